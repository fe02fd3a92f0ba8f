var structpolicytrain_1_1Monitor =
[
    [ "better", "structpolicytrain_1_1Monitor.html#a9ab59762d6f331e45d1285f553971c0c", null ],
    [ "default_mode", "structpolicytrain_1_1Monitor.html#a3966c1055c13e9d46a086aaa7dd6cba1", null ],
    [ "improves", "structpolicytrain_1_1Monitor.html#a2c4aa053c3eaef0a333c4439b0be2d54", null ],
    [ "worse", "structpolicytrain_1_1Monitor.html#aed3d181f720f4d1b154184f28626c230", null ],
    [ "metric", "structpolicytrain_1_1Monitor.html#a0b55b761c564a1278ca00a55f85e3e72", null ],
    [ "min_delta", "structpolicytrain_1_1Monitor.html#a76d41947d25b470f9aa07585b157c082", null ],
    [ "mode", "structpolicytrain_1_1Monitor.html#ab59692a3d0b83f30e2d18475e23145fa", null ]
];