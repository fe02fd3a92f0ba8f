var split_8hpp =
[
    [ "policytrain::data::Split", "structpolicytrain_1_1data_1_1Split.html", "structpolicytrain_1_1data_1_1Split" ],
    [ "stratified_split", "split_8hpp.html#aaa3a4ef3f9ac45be121bd59807773628", null ]
];