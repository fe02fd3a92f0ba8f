var structpolicytrain_1_1data_1_1Split =
[
    [ "train_index", "structpolicytrain_1_1data_1_1Split.html#a196a2843d7bc540a6b82e9a1c42045f7", null ],
    [ "train_x", "structpolicytrain_1_1data_1_1Split.html#a67b23c0ca1e092f18a7d5903ff5c8f2c", null ],
    [ "train_y", "structpolicytrain_1_1data_1_1Split.html#a5feb43d216c07a8046dfcc14d3205a8a", null ],
    [ "val_index", "structpolicytrain_1_1data_1_1Split.html#a4ed280994e98cb49386b1da14075c9b7", null ],
    [ "val_x", "structpolicytrain_1_1data_1_1Split.html#aa4816816d7ffc4b493d05a85e378b0a1", null ],
    [ "val_y", "structpolicytrain_1_1data_1_1Split.html#a929ac6f7cc976274db0b002d9f2b415d", null ]
];