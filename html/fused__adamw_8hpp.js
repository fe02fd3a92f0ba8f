var fused__adamw_8hpp =
[
    [ "policytrain::optim::FusedAdamW", "classpolicytrain_1_1optim_1_1FusedAdamW.html", null ]
];