var classpolicytrain_1_1memory_1_1PeakMemory =
[
    [ "read", "classpolicytrain_1_1memory_1_1PeakMemory.html#a645fe8b7b2e1a1ebfc1c6cd057428de0", null ],
    [ "reset", "classpolicytrain_1_1memory_1_1PeakMemory.html#a4176a6766ed4223f5467e1f004299956", null ]
];