var structpolicytrain_1_1step_1_1GraphOptions =
[
    [ "warmup_steps", "structpolicytrain_1_1step_1_1GraphOptions.html#a35114810440d24e42bf9ebd0f2e5d22b", null ]
];