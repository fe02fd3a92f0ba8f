var searchData=
[
  ['label_0',['label',['../structpolicytrain_1_1ClassScores.html#ad132c498d3b7a82fee13efb70beac505',1,'policytrain::ClassScores']]],
  ['labels_1',['labels',['../structpolicytrain_1_1data_1_1ImageLabels.html#a6daa8893135a7991de8723d1fbccb43a',1,'policytrain::data::ImageLabels']]],
  ['last_2',['last',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#ac211f6acbb8dd852ab74c99b16739fe4',1,'policytrain::checkpoint::Disk::Options']]],
  ['last_5floss_3',['last_loss',['../structpolicytrain_1_1TrainState.html#ae277dabd6580cb80944d31a20bc83c4a',1,'policytrain::TrainState']]],
  ['limit_5ftrain_5fbatches_4',['limit_train_batches',['../structpolicytrain_1_1FitOptions.html#aed4eecbc70db97996ae205f786bf472e',1,'policytrain::FitOptions']]],
  ['limit_5fval_5fbatches_5',['limit_val_batches',['../structpolicytrain_1_1FitOptions.html#a320166ce05a0096554c20a363f001329',1,'policytrain::FitOptions']]],
  ['local_5frank_6',['local_rank',['../structpolicytrain_1_1parallel_1_1Environment.html#a475b1f023094317d7956127edd66873e',1,'policytrain::parallel::Environment']]],
  ['log_7',['log',['../structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#a79146a4282b61d9b45482c93b88ee743',1,'policytrain::callbacks::EarlyStopping::Options::log()'],['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a23051a0cd283c9a30ac8344c5c08d988',1,'policytrain::checkpoint::Disk::Options::log()'],['../structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a8ebe51202178e52d36ed700e5f2e9136',1,'policytrain::callbacks::DivergenceRollback::Options::log()'],['../structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html#a8d79eabdd3cba175089d893ee9c2cb2c',1,'policytrain::accumulate::AutoBatchOptions::log()']]],
  ['loss_8',['loss',['../structpolicytrain_1_1Prediction.html#a07d1ca14cda448f068c71034447213f7',1,'policytrain::Prediction::loss()'],['../structpolicytrain_1_1Metrics.html#a366cd64df0e72f8bf71a758fe639f42a',1,'policytrain::Metrics::loss()']]],
  ['loss_5fscaling_9',['loss_scaling',['../structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#ae85f689f3e56c2cbba8870f453d29ce8',1,'policytrain::precision::Autocast::Options']]],
  ['loss_5fsum_10',['loss_sum',['../structpolicytrain_1_1MetricsAccumulator_1_1Sums.html#a0c4fa7c97657551ba608ebb3af744202',1,'policytrain::MetricsAccumulator::Sums']]],
  ['lr_5ffactor_11',['lr_factor',['../structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a1e6eabda0c08c0f4d94f0afc491d2ab0',1,'policytrain::callbacks::DivergenceRollback::Options::lr_factor()'],['../structpolicytrain_1_1schedule_1_1OneCyclePoint.html#aea9a258addfce1ac9168f284d00f5c76',1,'policytrain::schedule::OneCyclePoint::lr_factor()']]],
  ['lrf_12',['lrf',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a6afc65275ffaaef6197108a1d180bb28',1,'policytrain::schedule::LrOptions']]]
];
