var constant_8hpp =
[
    [ "policytrain::schedule::Constant", "structpolicytrain_1_1schedule_1_1Constant.html", "structpolicytrain_1_1schedule_1_1Constant" ]
];