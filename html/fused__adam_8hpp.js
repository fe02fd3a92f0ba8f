var fused__adam_8hpp =
[
    [ "policytrain::optim::FusedAdam", "classpolicytrain_1_1optim_1_1FusedAdam.html", null ]
];