var structpolicytrain_1_1accumulate_1_1Probe =
[
    [ "batch", "structpolicytrain_1_1accumulate_1_1Probe.html#add005bbcdb718d5bcdba6587b917aa1c", null ],
    [ "fits", "structpolicytrain_1_1accumulate_1_1Probe.html#a7c64b6a832dee73259f18dcaddca40af", null ],
    [ "peak_bytes", "structpolicytrain_1_1accumulate_1_1Probe.html#a64352731af7a7534a10947f8c3b7dddb", null ]
];