var structpolicytrain_1_1parallel_1_1DataParallelOptions =
[
    [ "backend", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a616fadc3cc813227c738ae488fe6847e", null ],
    [ "broadcast_buffers", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a32aedd6b5225f58af953d4796c507f09", null ],
    [ "bucket_mb", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a189ede68f78133f09bd63a4ec5217ec7", null ],
    [ "compression", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a8e7a3e9d6169ab81652940bc0930483a", null ],
    [ "enabled", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#afe7988b0adffb1429cffde97c2a982b7", null ],
    [ "find_unused_parameters", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#ad12548aab4d8d396f1187f8d2cb8f52e", null ],
    [ "first_bucket_mb", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a8c0e44519555c64009ddf00814ac649a", null ],
    [ "gloo_threads", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#ae98b4b1709c62c4356d74638e4eb9238", null ],
    [ "gradient_as_bucket_view", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#ad58c86969d0a226f4c4f146298921915", null ],
    [ "static_graph", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a01e5b101152239fc867de4544fc4f137", null ],
    [ "timeout", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html#ad5055d86d94c5e2d2033dcec26827773", null ]
];