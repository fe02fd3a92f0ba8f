var structpolicytrain_1_1MetricsAccumulator_1_1Sums =
[
    [ "confusion", "structpolicytrain_1_1MetricsAccumulator_1_1Sums.html#a531da0f005a0d8fee8b95aaeb31ddf17", null ],
    [ "loss_sum", "structpolicytrain_1_1MetricsAccumulator_1_1Sums.html#a0c4fa7c97657551ba608ebb3af744202", null ],
    [ "samples", "structpolicytrain_1_1MetricsAccumulator_1_1Sums.html#a26ed21b79673e1f76a50d13df96c892d", null ]
];