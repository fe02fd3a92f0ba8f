var structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options =
[
    [ "channels_last", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#a2346f9e9b0a686469a82f9f4111eaa2e", null ],
    [ "cudnn_benchmark", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#afb346e5c4dbb42785d3a219d7465b104", null ],
    [ "deterministic", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#a3155160e629e8d53f0e1fad92b70f926", null ],
    [ "interop_threads", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#afcf66218194f36916315534a86e3b378", null ],
    [ "intra_threads", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#a3e61f64930fddf84107f568c8c511f57", null ],
    [ "seed", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#a8ce2308c24cc9ceffae500591670fe3b", null ],
    [ "tf32", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#af3a86a4dc85213e21ce3cb051e89e3b6", null ]
];