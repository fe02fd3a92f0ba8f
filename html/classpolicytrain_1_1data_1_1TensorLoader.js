var classpolicytrain_1_1data_1_1TensorLoader =
[
    [ "iterator", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator" ],
    [ "TensorLoader", "classpolicytrain_1_1data_1_1TensorLoader.html#a78e65450a9fd360f31d359e4f047742f", null ],
    [ "batch", "classpolicytrain_1_1data_1_1TensorLoader.html#a432f088c0886ce1c548af5d4f3077c1a", null ],
    [ "begin", "classpolicytrain_1_1data_1_1TensorLoader.html#a17d44e952edd67d843c083499e5f3e08", null ],
    [ "end", "classpolicytrain_1_1data_1_1TensorLoader.html#ada0b4022cd5169cea37a1825cd5fca3b", null ],
    [ "epoch", "classpolicytrain_1_1data_1_1TensorLoader.html#ac0e37c0c1e4b24ceb4d4a8355d12132a", null ],
    [ "indices", "classpolicytrain_1_1data_1_1TensorLoader.html#a612a6c07b03c1547bc680a55abf52a53", null ],
    [ "num_samples", "classpolicytrain_1_1data_1_1TensorLoader.html#a83ddb2af675f201edaa924c43a8b2b90", null ],
    [ "options", "classpolicytrain_1_1data_1_1TensorLoader.html#a37a239d2897aaaa706d0a4f167be6140", null ],
    [ "padding", "classpolicytrain_1_1data_1_1TensorLoader.html#a15c653d78ef5af134e6570635c094e5d", null ],
    [ "set_epoch", "classpolicytrain_1_1data_1_1TensorLoader.html#ab5c9d1fadc416d2502be5759122e0c42", null ],
    [ "size", "classpolicytrain_1_1data_1_1TensorLoader.html#aa6bb0678e6f2f41cdbf8a08d63e580e7", null ]
];