var fused__common_8hpp =
[
    [ "policytrain::optim::FusedGradScaling", "classpolicytrain_1_1optim_1_1FusedGradScaling.html", "classpolicytrain_1_1optim_1_1FusedGradScaling" ],
    [ "policytrain::optim::GraphReplayable", "classpolicytrain_1_1optim_1_1GraphReplayable.html", "classpolicytrain_1_1optim_1_1GraphReplayable" ]
];