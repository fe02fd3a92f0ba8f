var perf__knobs_8hpp =
[
    [ "policytrain::callbacks::PerfKnobs", "classpolicytrain_1_1callbacks_1_1PerfKnobs.html", "classpolicytrain_1_1callbacks_1_1PerfKnobs" ],
    [ "policytrain::callbacks::PerfKnobs::Options", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options" ],
    [ "seed_everything", "perf__knobs_8hpp.html#a3335e6ccfd2cf4144cacc55e1fd4967e", null ]
];