var structpolicytrain_1_1checkpoint_1_1RunInfo =
[
    [ "batch_size", "structpolicytrain_1_1checkpoint_1_1RunInfo.html#a01c340253543085133f9dfa3cb507515", null ],
    [ "data_size", "structpolicytrain_1_1checkpoint_1_1RunInfo.html#a71aef2a73bff2b4860aaf664e413adbc", null ],
    [ "world_size", "structpolicytrain_1_1checkpoint_1_1RunInfo.html#a4e83c1a1412996805740dd3e1e104d5d", null ]
];