var searchData=
[
  ['asyncwriter_0',['AsyncWriter',['../classpolicytrain_1_1checkpoint_1_1AsyncWriter.html',1,'policytrain::checkpoint']]],
  ['augmentoptions_1',['AugmentOptions',['../structpolicytrain_1_1data_1_1AugmentOptions.html',1,'policytrain::data']]],
  ['autobatch_2',['AutoBatch',['../classpolicytrain_1_1accumulate_1_1AutoBatch.html',1,'policytrain::accumulate']]],
  ['autobatchoptions_3',['AutoBatchOptions',['../structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html',1,'policytrain::accumulate']]],
  ['autocast_4',['Autocast',['../classpolicytrain_1_1precision_1_1Autocast.html',1,'policytrain::precision']]],
  ['autocastguard_5',['AutocastGuard',['../classpolicytrain_1_1precision_1_1AutocastGuard.html',1,'policytrain::precision']]]
];
