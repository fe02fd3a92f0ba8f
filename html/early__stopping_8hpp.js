var early__stopping_8hpp =
[
    [ "policytrain::callbacks::EarlyStopping", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html", "classpolicytrain_1_1callbacks_1_1EarlyStopping" ],
    [ "policytrain::callbacks::EarlyStopping::Options", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options" ]
];