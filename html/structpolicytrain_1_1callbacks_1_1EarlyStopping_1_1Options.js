var structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options =
[
    [ "check_finite", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#a7dd972638ffef250c08b13297976d95f", null ],
    [ "divergence_threshold", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#a803d1cfb44745492780d99b88f23718c", null ],
    [ "enabled", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#ac073be89058e871a5d77162ebe8a44a5", null ],
    [ "log", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#a79146a4282b61d9b45482c93b88ee743", null ],
    [ "monitor", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#a96515f3f17fdc3a36048703c6ef79d4f", null ],
    [ "patience", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#a6232365ac6ef64c57182f026d8b4ed40", null ],
    [ "stopping_threshold", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#aa92005135a1bd001a33f083274f9ea91", null ]
];