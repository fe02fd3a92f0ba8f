var structpolicytrain_1_1accumulate_1_1AutoBatchOptions =
[
    [ "global_batch", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html#a5e29df00c7dbd0999508af28b4f3bdb0", null ],
    [ "log", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html#a8d79eabdd3cba175089d893ee9c2cb2c", null ],
    [ "max_batch", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html#a55ff949481fca082b89bb97a1a0d8457", null ],
    [ "max_halvings", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html#ad04e3ef91a43099e29655cdda25f1c8e", null ],
    [ "memory_fraction", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html#aec635c12c19fae4d6e00253e40d6a850", null ],
    [ "min_batch", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html#a46bfad41ead9b73f967687d3d47ac578", null ]
];