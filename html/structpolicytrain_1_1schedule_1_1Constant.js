var structpolicytrain_1_1schedule_1_1Constant =
[
    [ "category", "structpolicytrain_1_1schedule_1_1Constant.html#aa35b9f6155ad55a93b16ce3a9ad4a818", null ],
    [ "name", "structpolicytrain_1_1schedule_1_1Constant.html#ad036de6eee1b1c0c7cb31d80844dab29", null ]
];