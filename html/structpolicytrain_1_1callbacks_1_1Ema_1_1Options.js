var structpolicytrain_1_1callbacks_1_1Ema_1_1Options =
[
    [ "average_buffers", "structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html#aad386309bf0443a2e8cd54126289ebca", null ],
    [ "decay", "structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html#ad4957d57c78e6ff1c4c1405c3e19eef0", null ],
    [ "enabled", "structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html#a0ad73745fb496e32df9dd9338ca4a68c", null ],
    [ "tau", "structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html#a60871db6fbe19b08a1bd3a7824fe1efa", null ]
];