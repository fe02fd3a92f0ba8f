var fused__sgd_8hpp =
[
    [ "policytrain::optim::FusedSgd", "classpolicytrain_1_1optim_1_1FusedSgd.html", "classpolicytrain_1_1optim_1_1FusedSgd" ]
];