var structpolicytrain_1_1data_1_1LoaderOptions =
[
    [ "batch_size", "structpolicytrain_1_1data_1_1LoaderOptions.html#a80224bc0043aa1a22c28952ff654e057", null ],
    [ "drop_last", "structpolicytrain_1_1data_1_1LoaderOptions.html#acad3118abf59b84a80d7c96cce251816", null ],
    [ "rank", "structpolicytrain_1_1data_1_1LoaderOptions.html#ac903b184cda90108ff64891e939ec446", null ],
    [ "seed", "structpolicytrain_1_1data_1_1LoaderOptions.html#a6a889d289a6c6065bc33e6abcaa72cab", null ],
    [ "shuffle", "structpolicytrain_1_1data_1_1LoaderOptions.html#a4d1aeb8e92079f95d2b692fef6098f83", null ],
    [ "world_size", "structpolicytrain_1_1data_1_1LoaderOptions.html#a95474f4af606e3ad7019bf40c49e9f09", null ]
];