var searchData=
[
  ['metrics_0',['Metrics',['../structpolicytrain_1_1Metrics.html',1,'policytrain']]],
  ['metricsaccumulator_1',['MetricsAccumulator',['../classpolicytrain_1_1MetricsAccumulator.html',1,'policytrain']]],
  ['metricslog_2',['MetricsLog',['../classpolicytrain_1_1callbacks_1_1MetricsLog.html',1,'policytrain::callbacks']]],
  ['monitor_3',['Monitor',['../structpolicytrain_1_1Monitor.html',1,'policytrain']]]
];
