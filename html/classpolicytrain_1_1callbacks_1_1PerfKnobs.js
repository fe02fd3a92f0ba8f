var classpolicytrain_1_1callbacks_1_1PerfKnobs =
[
    [ "Options", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options" ],
    [ "PerfKnobs", "classpolicytrain_1_1callbacks_1_1PerfKnobs.html#a2f725451f47f3e50e65df90782e265f5", null ],
    [ "apply", "classpolicytrain_1_1callbacks_1_1PerfKnobs.html#a0be68146a5398c51026b05b4f1825090", null ],
    [ "describe", "classpolicytrain_1_1callbacks_1_1PerfKnobs.html#a2fc3391711dcb1cd5892a5786ee2ba7b", null ],
    [ "on_fit_begin", "classpolicytrain_1_1callbacks_1_1PerfKnobs.html#a31f97c3fddf2084565419dc518598ef7", null ],
    [ "options", "classpolicytrain_1_1callbacks_1_1PerfKnobs.html#add7e744922583fcb8aacddf536b0b94d", null ],
    [ "name", "classpolicytrain_1_1callbacks_1_1PerfKnobs.html#ae8e6801817f5b4686988e5e2f594bb4f", null ]
];