var classpolicytrain_1_1callbacks_1_1EarlyStopping =
[
    [ "Options", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options" ],
    [ "EarlyStopping", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a4ff720ac7c8f94030355254e0e4bd81a", null ],
    [ "best", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a7724625ac5ee0f32cbc59f7e212b1df3", null ],
    [ "best_epoch", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a42f25ae94c9e19711405dfb9d12cfbf6", null ],
    [ "load_state_dict", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#ab84f7b34d3fa04ace777963ddf6fed0d", null ],
    [ "on_validation_end", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#adca4df4c585fa817b47d4e78e4d0f513", null ],
    [ "options", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a395f02d0c37b9e05fa3ecd59d8701a03", null ],
    [ "reason", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#aab2ed9c281054ca35cd6ca00a4091fe9", null ],
    [ "state_dict", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a749e26ea5fd00d48be8e4d90726d1ffc", null ],
    [ "stopped_epoch", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a7a02b748cf47e526327cb5c40b91b009", null ],
    [ "wait", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a4ba3897ca24afba81ce4a4b78a3efd73", null ],
    [ "name", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html#aa47dfb1ea30238e04ae8927aef2ddc2a", null ]
];