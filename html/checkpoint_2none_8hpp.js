var checkpoint_2none_8hpp =
[
    [ "policytrain::checkpoint::None", "structpolicytrain_1_1checkpoint_1_1None.html", "structpolicytrain_1_1checkpoint_1_1None" ]
];