var profiler_8hpp =
[
    [ "policytrain::callbacks::ProfilerOpStats", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats" ],
    [ "policytrain::callbacks::Profiler", "classpolicytrain_1_1callbacks_1_1Profiler.html", "classpolicytrain_1_1callbacks_1_1Profiler" ],
    [ "policytrain::callbacks::Profiler::Options", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options" ]
];