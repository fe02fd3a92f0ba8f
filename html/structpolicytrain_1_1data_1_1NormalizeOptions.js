var structpolicytrain_1_1data_1_1NormalizeOptions =
[
    [ "enabled", "structpolicytrain_1_1data_1_1NormalizeOptions.html#a70dd35f9e71dc129fc46b5e07a5305f7", null ],
    [ "mean", "structpolicytrain_1_1data_1_1NormalizeOptions.html#a524217b35a06fbdc2def3ad9ccc4ce88", null ],
    [ "std", "structpolicytrain_1_1data_1_1NormalizeOptions.html#a3ec3b74a3a1906627bb97a1c12cea1ef", null ]
];