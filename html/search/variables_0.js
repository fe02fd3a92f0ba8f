var searchData=
[
  ['accumulate_0',['accumulate',['../structpolicytrain_1_1accumulate_1_1BatchPlan.html#aba36e0ed125e1e088bd938b592e85df4',1,'policytrain::accumulate::BatchPlan']]],
  ['accuracy_1',['accuracy',['../structpolicytrain_1_1ClassificationReport.html#a3e4a3ddcd46ebe5ca3e168eefa291e8c',1,'policytrain::ClassificationReport::accuracy()'],['../structpolicytrain_1_1Metrics.html#ae6071f0be1cb1c56900372c0353799e0',1,'policytrain::Metrics::accuracy()']]],
  ['active_2',['active',['../structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#aa132f9431fd762b882a11fe52d9f3281',1,'policytrain::callbacks::Profiler::Options']]],
  ['agent_5fstore_3',['agent_store',['../structpolicytrain_1_1parallel_1_1Environment.html#ad168cc8f070896920276281e9b7842d8',1,'policytrain::parallel::Environment']]],
  ['anneal_4',['anneal',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a2e0017b65bfb693f8c4a62233736ffcc',1,'policytrain::schedule::LrOptions']]],
  ['annotation_5',['annotation',['../structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html#aae5e8b38b2a3433bb581e30ed00a63a2',1,'policytrain::callbacks::ProfilerOpStats']]],
  ['args_6',['args',['../structpolicytrain_1_1parallel_1_1LaunchOptions.html#ad101917cb9b23b5ba9ddb1200f0f58a3',1,'policytrain::parallel::LaunchOptions']]],
  ['async_7',['async',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a41a9827ebb46fc651a0598c34311b8c1',1,'policytrain::checkpoint::Disk::Options']]],
  ['augment_8',['augment',['../structpolicytrain_1_1data_1_1PrefetchOptions.html#adcd1712f05b1d0ca23eb8d2be96ac0ef',1,'policytrain::data::PrefetchOptions']]],
  ['average_5fbuffers_9',['average_buffers',['../structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html#aad386309bf0443a2e8cd54126289ebca',1,'policytrain::callbacks::Ema::Options']]]
];
