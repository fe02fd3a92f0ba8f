var structpolicytrain_1_1schedule_1_1Horizon =
[
    [ "steps_per_epoch", "structpolicytrain_1_1schedule_1_1Horizon.html#a32b3d85c57374a80f50ab5216c2b0f72", null ],
    [ "total_steps", "structpolicytrain_1_1schedule_1_1Horizon.html#a98a66bbe7f99b92914072f165cf7482a", null ]
];