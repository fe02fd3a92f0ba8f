var searchData=
[
  ['needs_5ftotal_5fsteps_0',['needs_total_steps',['../lr_8hpp.html#ad6cb0ba11938c668afc519bff24bb67f',1,'policytrain::schedule']]],
  ['nominal_5faccumulate_1',['nominal_accumulate',['../window__mean_8hpp.html#a5b5bfd18df74fed9fbd385255ec5d33e',1,'policytrain::accumulate']]],
  ['nominal_5fweight_5fdecay_5ffactor_2',['nominal_weight_decay_factor',['../window__mean_8hpp.html#a74f52b63e8c1a7b567ebe1a86e5552a8',1,'policytrain::accumulate']]],
  ['nominalbatch_3',['NominalBatch',['../classpolicytrain_1_1accumulate_1_1NominalBatch.html#af2d5b9a7c32b864586757f5816883f2e',1,'policytrain::accumulate::NominalBatch']]],
  ['num_5fsamples_4',['num_samples',['../classpolicytrain_1_1data_1_1TensorLoader.html#a83ddb2af675f201edaa924c43a8b2b90',1,'policytrain::data::TensorLoader::num_samples()'],['../classpolicytrain_1_1data_1_1PrefetchLoader.html#ae729335625b5c459210f53e5d7c346be',1,'policytrain::data::PrefetchLoader::num_samples()']]]
];
