var classpolicytrain_1_1memory_1_1Recomputed =
[
    [ "Impl", "classpolicytrain_1_1memory_1_1Recomputed.html#aeea00e0fe31a94d27439d46d0d221828", null ]
];