var searchData=
[
  ['wait_0',['wait',['../structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a1c2b415af912e324f1fcdebd6192eab8',1,'policytrain::callbacks::Profiler::Options']]],
  ['warmup_1',['warmup',['../structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#ad19a5177a80631222145dac2991fb175',1,'policytrain::callbacks::Profiler::Options']]],
  ['warmup_5fbatches_2',['warmup_batches',['../structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html#af79e7c5e9105889bdb4764e0c3a10bc1',1,'policytrain::accumulate::NominalBatch::Options']]],
  ['warmup_5fbias_5flr_3',['warmup_bias_lr',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a8ba614165d45c641dc4e604379ddfb4c',1,'policytrain::schedule::LrOptions']]],
  ['warmup_5fepochs_4',['warmup_epochs',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a0e92dd6472138f3779a7930ec7c139f7',1,'policytrain::schedule::LrOptions']]],
  ['warmup_5fmode_5',['warmup_mode',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a44811317e059c202685ec655b8ccacbc',1,'policytrain::schedule::LrOptions']]],
  ['warmup_5fmomentum_6',['warmup_momentum',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a5e231b1154ae45535d92bad73063d1e5',1,'policytrain::schedule::LrOptions']]],
  ['warmup_5fstart_5ffactor_7',['warmup_start_factor',['../structpolicytrain_1_1schedule_1_1LrOptions.html#aa755468755513602d9ad3b6f5de47840',1,'policytrain::schedule::LrOptions']]],
  ['warmup_5fsteps_8',['warmup_steps',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a64fd2b0bc60fe81ed9f758b06b1c91ca',1,'policytrain::schedule::LrOptions::warmup_steps()'],['../structpolicytrain_1_1step_1_1GraphOptions.html#a35114810440d24e42bf9ebd0f2e5d22b',1,'policytrain::step::GraphOptions::warmup_steps()'],['../structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a2b5e3843d3c4bddedb49b069fcab4f0a',1,'policytrain::callbacks::DivergenceRollback::Options::warmup_steps()']]],
  ['weighted_5favg_9',['weighted_avg',['../structpolicytrain_1_1ClassificationReport.html#a6ab6f6e9a1f06d3e947e60d4d3353e23',1,'policytrain::ClassificationReport']]],
  ['weights_5fonly_10',['weights_only',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#ade2ef96c089bcf562974e8ef40e878bc',1,'policytrain::checkpoint::Disk::Options']]],
  ['window_5fsamples_11',['window_samples',['../structpolicytrain_1_1TrainState.html#a923e565713ec673202afffd21090b3fd',1,'policytrain::TrainState']]],
  ['with_5fstack_12',['with_stack',['../structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a7d825466db7e60303e61c0678e30fc1d',1,'policytrain::callbacks::Profiler::Options']]],
  ['workers_13',['workers',['../structpolicytrain_1_1data_1_1PrefetchOptions.html#ad0c8ebacbb0fa5c4b552814fbb23e937',1,'policytrain::data::PrefetchOptions']]],
  ['world_5fsize_14',['world_size',['../structpolicytrain_1_1checkpoint_1_1RunInfo.html#a4e83c1a1412996805740dd3e1e104d5d',1,'policytrain::checkpoint::RunInfo::world_size()'],['../structpolicytrain_1_1data_1_1LoaderOptions.html#a95474f4af606e3ad7019bf40c49e9f09',1,'policytrain::data::LoaderOptions::world_size()'],['../structpolicytrain_1_1parallel_1_1Environment.html#a90280ad2b6e3af38413f3d0ad4a3bd3b',1,'policytrain::parallel::Environment::world_size()']]]
];
