var accumulation_2none_8hpp =
[
    [ "policytrain::accumulate::None", "structpolicytrain_1_1accumulate_1_1None.html", "structpolicytrain_1_1accumulate_1_1None" ]
];