var classpolicytrain_1_1MetricsAccumulator =
[
    [ "Sums", "structpolicytrain_1_1MetricsAccumulator_1_1Sums.html", "structpolicytrain_1_1MetricsAccumulator_1_1Sums" ],
    [ "add", "classpolicytrain_1_1MetricsAccumulator.html#aa830d3bec5effb9275d21376e9b326b4", null ],
    [ "result", "classpolicytrain_1_1MetricsAccumulator.html#affcf1ae8793c13a5930ddeb91b8e0e54", null ],
    [ "set_sums", "classpolicytrain_1_1MetricsAccumulator.html#acfff58e1003b925a2270f950bccde2e7", null ],
    [ "sums", "classpolicytrain_1_1MetricsAccumulator.html#a83ff8f5141a62a1ed2f33ea409e05492", null ]
];