var structpolicytrain_1_1callbacks_1_1ProfilerOpStats =
[
    [ "annotation", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html#aae5e8b38b2a3433bb581e30ed00a63a2", null ],
    [ "calls", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html#a05feb443fad000aed4996f2622d46a46", null ],
    [ "cpu_total_us", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html#af009fa656641fe421ffd5ba4b4def24f", null ],
    [ "device_us", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html#a20b492686ef9924177078efeced91bc0", null ],
    [ "name", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html#adef36bfa7f56d8280d977170eb5d6648", null ],
    [ "self_cpu_mem", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html#ad44ca6adcff2f66776460eaac705d77d", null ],
    [ "self_cpu_us", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html#aff22fb56ebc6d08d505c9f55fe5f86b7", null ]
];