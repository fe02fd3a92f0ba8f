var recompute_8hpp =
[
    [ "policytrain::memory::RecomputedImpl< M >", "classpolicytrain_1_1memory_1_1RecomputedImpl.html", "classpolicytrain_1_1memory_1_1RecomputedImpl" ],
    [ "policytrain::memory::Recomputed< M >", "classpolicytrain_1_1memory_1_1Recomputed.html", "classpolicytrain_1_1memory_1_1Recomputed" ],
    [ "recompute", "recompute_8hpp.html#a06754c4e477455001c793bb41b76e026", null ],
    [ "recompute_sequential", "recompute_8hpp.html#a0222731e03756e619e75ae480035034d", null ],
    [ "recomputing", "recompute_8hpp.html#a36447cdab5373a0f5a4ecd0a7ede23ee", null ]
];