var classpolicytrain_1_1callbacks_1_1Ema =
[
    [ "Options", "structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html", "structpolicytrain_1_1callbacks_1_1Ema_1_1Options" ],
    [ "Ema", "classpolicytrain_1_1callbacks_1_1Ema.html#a3a8fe712ee75335acf036436af565c24", null ],
    [ "after_step", "classpolicytrain_1_1callbacks_1_1Ema.html#ac1af4f5ce1c81bce124145c589dcedb9", null ],
    [ "around_evaluate", "classpolicytrain_1_1callbacks_1_1Ema.html#a93f679afc11dc08a1dae68c16bcefdbe", null ],
    [ "average", "classpolicytrain_1_1callbacks_1_1Ema.html#ad51ad0fa0bf7faa5e7961994094f84e0", null ],
    [ "buffer_average", "classpolicytrain_1_1callbacks_1_1Ema.html#a50a558c28039e7b05fbe9e4a5946973f", null ],
    [ "decay_at", "classpolicytrain_1_1callbacks_1_1Ema.html#aec0939018324b229a4f76fa6ac1e06d9", null ],
    [ "enabled", "classpolicytrain_1_1callbacks_1_1Ema.html#a50ec161beca373e0cfd7d6d6ad06b531", null ],
    [ "load_state_dict", "classpolicytrain_1_1callbacks_1_1Ema.html#a7371d52915c96753488e484b7ff2c56f", null ],
    [ "on_fit_begin", "classpolicytrain_1_1callbacks_1_1Ema.html#aebb16113ff0cb5c3560afeff5134cc87", null ],
    [ "options", "classpolicytrain_1_1callbacks_1_1Ema.html#a90244d3a4a01b4f27be6d58a0bdb6b2d", null ],
    [ "state_dict", "classpolicytrain_1_1callbacks_1_1Ema.html#ad61fbe6a68ac034d3bbba7744a07c914", null ],
    [ "updates", "classpolicytrain_1_1callbacks_1_1Ema.html#a89aef8487f28871c8933d248c5a0abec", null ],
    [ "with_weights", "classpolicytrain_1_1callbacks_1_1Ema.html#ae9e383ac3aed47d2e9208d862b5a9b4e", null ],
    [ "name", "classpolicytrain_1_1callbacks_1_1Ema.html#abe7f19ae6a7c73d8bf555956ee8a4c79", null ]
];