var searchData=
[
  ['saveoptions_0',['SaveOptions',['../structpolicytrain_1_1checkpoint_1_1SaveOptions.html',1,'policytrain::checkpoint']]],
  ['single_1',['Single',['../structpolicytrain_1_1parallel_1_1Single.html',1,'policytrain::parallel']]],
  ['snapshot_2',['Snapshot',['../classpolicytrain_1_1checkpoint_1_1Snapshot.html',1,'policytrain::checkpoint']]],
  ['span_3',['Span',['../structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span.html',1,'policytrain::callbacks::StepPhases']]],
  ['split_4',['Split',['../structpolicytrain_1_1data_1_1Split.html',1,'policytrain::data']]],
  ['stepphases_5',['StepPhases',['../classpolicytrain_1_1callbacks_1_1StepPhases.html',1,'policytrain::callbacks']]],
  ['steps_6',['Steps',['../classpolicytrain_1_1accumulate_1_1Steps.html',1,'policytrain::accumulate']]],
  ['sums_7',['Sums',['../structpolicytrain_1_1MetricsAccumulator_1_1Sums.html',1,'policytrain::MetricsAccumulator']]]
];
