var metrics_8hpp =
[
    [ "policytrain::ClassScores", "structpolicytrain_1_1ClassScores.html", "structpolicytrain_1_1ClassScores" ],
    [ "policytrain::ClassificationReport", "structpolicytrain_1_1ClassificationReport.html", "structpolicytrain_1_1ClassificationReport" ],
    [ "policytrain::Metrics", "structpolicytrain_1_1Metrics.html", "structpolicytrain_1_1Metrics" ],
    [ "policytrain::MetricsAccumulator", "classpolicytrain_1_1MetricsAccumulator.html", "classpolicytrain_1_1MetricsAccumulator" ],
    [ "policytrain::MetricsAccumulator::Sums", "structpolicytrain_1_1MetricsAccumulator_1_1Sums.html", "structpolicytrain_1_1MetricsAccumulator_1_1Sums" ]
];