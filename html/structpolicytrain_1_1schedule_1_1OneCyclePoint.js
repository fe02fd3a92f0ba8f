var structpolicytrain_1_1schedule_1_1OneCyclePoint =
[
    [ "lr_factor", "structpolicytrain_1_1schedule_1_1OneCyclePoint.html#aea9a258addfce1ac9168f284d00f5c76", null ],
    [ "momentum", "structpolicytrain_1_1schedule_1_1OneCyclePoint.html#aaab4ab3a1d4b27525d68f3d7ce87cae3", null ]
];