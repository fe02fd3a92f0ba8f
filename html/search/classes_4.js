var searchData=
[
  ['earlystopping_0',['EarlyStopping',['../classpolicytrain_1_1callbacks_1_1EarlyStopping.html',1,'policytrain::callbacks']]],
  ['ema_1',['Ema',['../classpolicytrain_1_1callbacks_1_1Ema.html',1,'policytrain::callbacks']]],
  ['environment_2',['Environment',['../structpolicytrain_1_1parallel_1_1Environment.html',1,'policytrain::parallel']]]
];
