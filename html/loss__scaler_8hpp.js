var loss__scaler_8hpp =
[
    [ "policytrain::precision::LossScaler", "classpolicytrain_1_1precision_1_1LossScaler.html", "classpolicytrain_1_1precision_1_1LossScaler" ],
    [ "policytrain::precision::LossScaler::Options", "structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html", "structpolicytrain_1_1precision_1_1LossScaler_1_1Options" ]
];