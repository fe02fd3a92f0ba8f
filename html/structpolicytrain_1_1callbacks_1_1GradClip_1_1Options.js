var structpolicytrain_1_1callbacks_1_1GradClip_1_1Options =
[
    [ "clip_value", "structpolicytrain_1_1callbacks_1_1GradClip_1_1Options.html#a1fd768a9940c9c43e0ed2c8484bad026", null ],
    [ "max_norm", "structpolicytrain_1_1callbacks_1_1GradClip_1_1Options.html#ab1c4f26512957a6137dc1587bca5d1d7", null ],
    [ "mode", "structpolicytrain_1_1callbacks_1_1GradClip_1_1Options.html#a45a0a9a52f9ff2f5081f2b82a90ee6f8", null ],
    [ "p", "structpolicytrain_1_1callbacks_1_1GradClip_1_1Options.html#ae97a5a3cc7c6e041929c392b8ed219f8", null ]
];