var ema_8hpp =
[
    [ "policytrain::callbacks::Ema", "classpolicytrain_1_1callbacks_1_1Ema.html", "classpolicytrain_1_1callbacks_1_1Ema" ],
    [ "policytrain::callbacks::Ema::Options", "structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html", "structpolicytrain_1_1callbacks_1_1Ema_1_1Options" ]
];