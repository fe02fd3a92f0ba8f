var structpolicytrain_1_1data_1_1TensorPair =
[
    [ "x", "structpolicytrain_1_1data_1_1TensorPair.html#aca74c844c6fafd64248bc28d9008d214", null ],
    [ "y", "structpolicytrain_1_1data_1_1TensorPair.html#a5279b257da42461e62458eba09661fbb", null ]
];