var structpolicytrain_1_1callbacks_1_1Profiler_1_1Options =
[
    [ "active", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#aa132f9431fd762b882a11fe52d9f3281", null ],
    [ "dir", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a91fe733ef4fe06c10f276ef2b409e67e", null ],
    [ "out", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a8f82972ac230253d5e813e9006e37659", null ],
    [ "profile_memory", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a09baa1b6b4653ab5e8199f0fb00090bc", null ],
    [ "record_shapes", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a5cbe58f577d4df44de8e183f303b5fbd", null ],
    [ "repeat", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a49066185de03a75e5df316c0743183ea", null ],
    [ "table_rows", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#aec704086d8ff8ceb34f1692d7c298ec6", null ],
    [ "wait", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a1c2b415af912e324f1fcdebd6192eab8", null ],
    [ "warmup", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#ad19a5177a80631222145dac2991fb175", null ],
    [ "with_stack", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a7d825466db7e60303e61c0678e30fc1d", null ]
];