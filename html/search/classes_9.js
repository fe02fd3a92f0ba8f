var searchData=
[
  ['launchoptions_0',['LaunchOptions',['../structpolicytrain_1_1parallel_1_1LaunchOptions.html',1,'policytrain::parallel']]],
  ['loaded_1',['Loaded',['../structpolicytrain_1_1checkpoint_1_1Loaded.html',1,'policytrain::checkpoint']]],
  ['loaderoptions_2',['LoaderOptions',['../structpolicytrain_1_1data_1_1LoaderOptions.html',1,'policytrain::data']]],
  ['lossscaler_3',['LossScaler',['../classpolicytrain_1_1precision_1_1LossScaler.html',1,'policytrain::precision']]],
  ['lr_4',['Lr',['../classpolicytrain_1_1schedule_1_1Lr.html',1,'policytrain::schedule']]],
  ['lroptions_5',['LrOptions',['../structpolicytrain_1_1schedule_1_1LrOptions.html',1,'policytrain::schedule']]]
];
