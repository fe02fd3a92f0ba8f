var structpolicytrain_1_1parallel_1_1Single =
[
    [ "category", "structpolicytrain_1_1parallel_1_1Single.html#a70d77e107df501c579d764f44e2f6641", null ],
    [ "name", "structpolicytrain_1_1parallel_1_1Single.html#a541ab15f3ff3307353b3f376a85fe09f", null ]
];