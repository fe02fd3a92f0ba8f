var classpolicytrain_1_1memory_1_1TensorBytesMeter =
[
    [ "live", "classpolicytrain_1_1memory_1_1TensorBytesMeter.html#aa4eede5279ffd16ec8b7e1631dd84d7d", null ],
    [ "peak", "classpolicytrain_1_1memory_1_1TensorBytesMeter.html#ae21588669d65565b1c549285bfa66d21", null ],
    [ "reset_peak", "classpolicytrain_1_1memory_1_1TensorBytesMeter.html#aa98e2eeb154eff1cfb192414620554bb", null ]
];