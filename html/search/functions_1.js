var searchData=
[
  ['backward_0',['backward',['../classpolicytrain_1_1callbacks_1_1StepPhases.html#a8b3c18536239c0d02130767a2ca4915f',1,'policytrain::callbacks::StepPhases']]],
  ['batch_1',['batch',['../classpolicytrain_1_1data_1_1TensorLoader.html#a432f088c0886ce1c548af5d4f3077c1a',1,'policytrain::data::TensorLoader']]],
  ['before_5fstep_2',['before_step',['../classpolicytrain_1_1accumulate_1_1NominalBatch.html#af4f95cab88cbbaf254793d49746cbe43',1,'policytrain::accumulate::NominalBatch::before_step()'],['../classpolicytrain_1_1accumulate_1_1Steps.html#ad297e5daaa55d732da73e2510f3344e2',1,'policytrain::accumulate::Steps::before_step()'],['../classpolicytrain_1_1callbacks_1_1GradClip.html#a80ce2dd512bd3400810abb5ac11e19ad',1,'policytrain::callbacks::GradClip::before_step()'],['../classpolicytrain_1_1callbacks_1_1MetricsLog.html#a2ae424e88066926177590fc717dd561f',1,'policytrain::callbacks::MetricsLog::before_step()'],['../classpolicytrain_1_1parallel_1_1DataParallel.html#ae0cfbed899571e92ddb38f8f2cf9a3c9',1,'policytrain::parallel::DataParallel::before_step()'],['../classpolicytrain_1_1precision_1_1Autocast.html#a820b8c36278a962f42e0416ae4540211',1,'policytrain::precision::Autocast::before_step()']]],
  ['begin_3',['begin',['../classpolicytrain_1_1data_1_1TensorLoader.html#a17d44e952edd67d843c083499e5f3e08',1,'policytrain::data::TensorLoader::begin()'],['../classpolicytrain_1_1data_1_1PrefetchLoader.html#affcf2ab5b10169ac44b22b8b9235f3c0',1,'policytrain::data::PrefetchLoader::begin()']]],
  ['best_4',['best',['../classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a7724625ac5ee0f32cbc59f7e212b1df3',1,'policytrain::callbacks::EarlyStopping']]],
  ['best_5fepoch_5',['best_epoch',['../classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a42f25ae94c9e19711405dfb9d12cfbf6',1,'policytrain::callbacks::EarlyStopping::best_epoch()'],['../classpolicytrain_1_1checkpoint_1_1Disk.html#a6c28c34a68a534bf134b5d8adf1a21c8',1,'policytrain::checkpoint::Disk::best_epoch() const']]],
  ['best_5fmetric_6',['best_metric',['../classpolicytrain_1_1checkpoint_1_1Disk.html#aae4dc8a65c5ff8ed3affd04e811561a0',1,'policytrain::checkpoint::Disk']]],
  ['better_7',['better',['../structpolicytrain_1_1Monitor.html#a9ab59762d6f331e45d1285f553971c0c',1,'policytrain::Monitor']]],
  ['broadcast_8',['broadcast',['../classpolicytrain_1_1parallel_1_1DataParallel.html#ac4ec60ec7aecf7f3008f90d5176ce38d',1,'policytrain::parallel::DataParallel']]],
  ['bucket_5fbytes_9',['bucket_bytes',['../classpolicytrain_1_1parallel_1_1DataParallel.html#a0cdcff337ff57102a152d14b3d14f7ee',1,'policytrain::parallel::DataParallel']]],
  ['bucket_5fcount_10',['bucket_count',['../classpolicytrain_1_1parallel_1_1DataParallel.html#a98f1b19a5437405aa935736040043723',1,'policytrain::parallel::DataParallel']]],
  ['buffer_5faverage_11',['buffer_average',['../classpolicytrain_1_1callbacks_1_1Ema.html#a50a558c28039e7b05fbe9e4a5946973f',1,'policytrain::callbacks::Ema']]],
  ['buffer_5fbroadcasts_12',['buffer_broadcasts',['../classpolicytrain_1_1parallel_1_1DataParallel.html#acc1c91ee6ba46b7fb70b007282bb49e3',1,'policytrain::parallel::DataParallel']]],
  ['busy_13',['busy',['../classpolicytrain_1_1checkpoint_1_1AsyncWriter.html#a8fa6b8235283bed205112a31f51323f0',1,'policytrain::checkpoint::AsyncWriter']]]
];
