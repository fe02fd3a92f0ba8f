var searchData=
[
  ['nominalbatch_0',['NominalBatch',['../classpolicytrain_1_1accumulate_1_1NominalBatch.html',1,'policytrain::accumulate']]],
  ['none_1',['None',['../structpolicytrain_1_1accumulate_1_1None.html',1,'policytrain::accumulate::None'],['../structpolicytrain_1_1checkpoint_1_1None.html',1,'policytrain::checkpoint::None']]],
  ['nonfiniteloss_2',['NonFiniteLoss',['../structpolicytrain_1_1NonFiniteLoss.html',1,'policytrain']]],
  ['normalizeoptions_3',['NormalizeOptions',['../structpolicytrain_1_1data_1_1NormalizeOptions.html',1,'policytrain::data']]]
];
