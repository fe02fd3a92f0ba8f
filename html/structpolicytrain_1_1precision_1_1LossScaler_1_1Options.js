var structpolicytrain_1_1precision_1_1LossScaler_1_1Options =
[
    [ "backoff_factor", "structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html#a906cfc8ce3d9d45e8ae1f9ea9aa6a879", null ],
    [ "growth_factor", "structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html#a2a1d18e099d91913a00f7ddf7cbec7fd", null ],
    [ "growth_interval", "structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html#a0f5ebbd0bf2518f4f88f5f448bea6dcc", null ],
    [ "init_scale", "structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html#aebbb07fb603fcfd30b520fca5bf0b2ae", null ]
];