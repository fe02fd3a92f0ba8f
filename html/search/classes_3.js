var searchData=
[
  ['dataparallel_0',['DataParallel',['../classpolicytrain_1_1parallel_1_1DataParallel.html',1,'policytrain::parallel']]],
  ['dataparalleloptions_1',['DataParallelOptions',['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html',1,'policytrain::parallel']]],
  ['disk_2',['Disk',['../classpolicytrain_1_1checkpoint_1_1Disk.html',1,'policytrain::checkpoint']]],
  ['divergenceerror_3',['DivergenceError',['../structpolicytrain_1_1callbacks_1_1DivergenceError.html',1,'policytrain::callbacks']]],
  ['divergencerollback_4',['DivergenceRollback',['../classpolicytrain_1_1callbacks_1_1DivergenceRollback.html',1,'policytrain::callbacks']]]
];
