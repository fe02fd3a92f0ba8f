var structpolicytrain_1_1memory_1_1PeakReading =
[
    [ "cuda", "structpolicytrain_1_1memory_1_1PeakReading.html#af3937a26a917d1fc428dd12e117b980a", null ],
    [ "rss", "structpolicytrain_1_1memory_1_1PeakReading.html#a9db20ff8f1e4ed46f68d7239afe9af89", null ],
    [ "rss_whole_process", "structpolicytrain_1_1memory_1_1PeakReading.html#aac86b6da7092e3fd5f86ac2f5de0a7a8", null ]
];