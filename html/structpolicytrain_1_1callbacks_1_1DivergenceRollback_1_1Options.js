var structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options =
[
    [ "enabled", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a7b1a7dd4d8789f525f3e28ff4e28de16", null ],
    [ "log", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a8ebe51202178e52d36ed700e5f2e9136", null ],
    [ "lr_factor", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a1e6eabda0c08c0f4d94f0afc491d2ab0", null ],
    [ "max_rollbacks", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a5dc046fd5ebb8e4b4c458da2b2ff267a", null ],
    [ "smoothing", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a1e045377a04e4f3f9a63daf3d2a00d96", null ],
    [ "snapshot_every", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#abf064353d3c60700e351823559954c40", null ],
    [ "spike_factor", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#aa361e3c6bbdecb14ae999628912e572d", null ],
    [ "warmup_steps", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a2b5e3843d3c4bddedb49b069fcab4f0a", null ]
];