var structpolicytrain_1_1precision_1_1Autocast_1_1Options =
[
    [ "cache_enabled", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#a9de5be3a320726276680a310c95a980e", null ],
    [ "check_every", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#a8591d247437b943a13eb2de80d62c72a", null ],
    [ "device", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#a5fa80c7e1b5ab20753225415e0ce8c27", null ],
    [ "device_skip", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#acf1402823e244ae79a543694a1c48954", null ],
    [ "dtype", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#aa1be92681d3020174df582e13d77aff9", null ],
    [ "loss_scaling", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#ae85f689f3e56c2cbba8870f453d29ce8", null ],
    [ "on_nonfinite", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#ab025e8f46b336d764b730ab5b513d17e", null ],
    [ "scaler", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#abb1edc89e939111062d92a76ec6d5f0c", null ]
];