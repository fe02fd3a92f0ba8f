var structpolicytrain_1_1checkpoint_1_1SaveOptions =
[
    [ "half_optimizer", "structpolicytrain_1_1checkpoint_1_1SaveOptions.html#a92756cc023ccf60dd037c7c7cda17545", null ],
    [ "half_weights", "structpolicytrain_1_1checkpoint_1_1SaveOptions.html#a422db23ce6102b65ac78c691c5cc053f", null ]
];