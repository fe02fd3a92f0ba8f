var structpolicytrain_1_1accumulate_1_1None =
[
    [ "category", "structpolicytrain_1_1accumulate_1_1None.html#a2a00333b1111b75ca552b6cb5e7a023a", null ],
    [ "name", "structpolicytrain_1_1accumulate_1_1None.html#a0b627fbda452de518b4eaf4ae8fcc6ec", null ]
];