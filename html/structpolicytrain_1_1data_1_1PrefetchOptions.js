var structpolicytrain_1_1data_1_1PrefetchOptions =
[
    [ "augment", "structpolicytrain_1_1data_1_1PrefetchOptions.html#adcd1712f05b1d0ca23eb8d2be96ac0ef", null ],
    [ "channels_last", "structpolicytrain_1_1data_1_1PrefetchOptions.html#ae173477b11555edc98535104275d8253", null ],
    [ "device", "structpolicytrain_1_1data_1_1PrefetchOptions.html#add9118fd5657a5699d4afe79e9f8fc42", null ],
    [ "normalize", "structpolicytrain_1_1data_1_1PrefetchOptions.html#af5492b6312660fba3e2c49850ccdca9b", null ],
    [ "prefetch", "structpolicytrain_1_1data_1_1PrefetchOptions.html#a2329eff029f7eecea1508925771a243c", null ],
    [ "workers", "structpolicytrain_1_1data_1_1PrefetchOptions.html#ad0c8ebacbb0fa5c4b552814fbb23e937", null ]
];