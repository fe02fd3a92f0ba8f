var structpolicytrain_1_1TrainState =
[
    [ "loss_value", "structpolicytrain_1_1TrainState.html#a638fe19504f494ec103fb9a0d9926d6a", null ],
    [ "batch_in_epoch", "structpolicytrain_1_1TrainState.html#a0f83b120fd8f2df9c1ef4d7910a49526", null ],
    [ "best_epoch", "structpolicytrain_1_1TrainState.html#ae2c8a268b99385e243c54b6402a1b95f", null ],
    [ "best_metric", "structpolicytrain_1_1TrainState.html#a7474f2a31c4a62bd5cbdef4bb94065bb", null ],
    [ "epoch", "structpolicytrain_1_1TrainState.html#a87ffaae9a6cd71ef72e81a35a22610d3", null ],
    [ "global_step", "structpolicytrain_1_1TrainState.html#a38573293383c9cb37a69385976b8b882", null ],
    [ "last_loss", "structpolicytrain_1_1TrainState.html#ae277dabd6580cb80944d31a20bc83c4a", null ],
    [ "micro_step", "structpolicytrain_1_1TrainState.html#a53850e58b6b6bf0348acf404b804a20c", null ],
    [ "samples_seen", "structpolicytrain_1_1TrainState.html#acb272312d2ebc147a4f978523be7eeb5", null ],
    [ "skipped_steps", "structpolicytrain_1_1TrainState.html#a494d492607df0d45f38d31c1c3807f72", null ],
    [ "stop_requested", "structpolicytrain_1_1TrainState.html#a48f5aec35dd1ca87651dc8310ce27d11", null ],
    [ "window_samples", "structpolicytrain_1_1TrainState.html#a923e565713ec673202afffd21090b3fd", null ]
];