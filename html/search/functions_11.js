var searchData=
[
  ['task_0',['task',['../classpolicytrain_1_1Trainer.html#af093c1aaea9b150a9ec4876721109327',1,'policytrain::Trainer::task()'],['../classpolicytrain_1_1Context.html#adefdf05988311bd9f5e55145d9b5ce6e',1,'policytrain::Context::task()']]],
  ['tensorboard_1',['TensorBoard',['../classpolicytrain_1_1callbacks_1_1TensorBoard.html#ae822e77f406cb380e5a82f377812c261',1,'policytrain::callbacks::TensorBoard']]],
  ['tensorloader_2',['TensorLoader',['../classpolicytrain_1_1data_1_1TensorLoader.html#a78e65450a9fd360f31d359e4f047742f',1,'policytrain::data::TensorLoader']]],
  ['threads_5fstarted_3',['threads_started',['../classpolicytrain_1_1data_1_1PrefetchLoader.html#af1ae14da09db05539f625069ef58f231',1,'policytrain::data::PrefetchLoader']]],
  ['to_4',['to',['../structpolicytrain_1_1Batch.html#aa57cf334c736dd801103d492e5751c6e',1,'policytrain::Batch']]],
  ['to_5fjson_5',['to_json',['../structpolicytrain_1_1ClassificationReport.html#ad95a66a2fd4dac42b77cd63ccc092f03',1,'policytrain::ClassificationReport']]],
  ['to_5fstring_6',['to_string',['../structpolicytrain_1_1ClassificationReport.html#ae4f9a92752229f333998386d12ecef42',1,'policytrain::ClassificationReport::to_string()'],['../lr_8hpp.html#a3b4e606fa2b960261692a0e6e6214053',1,'policytrain::schedule::to_string()'],['../autocast_8hpp.html#a25c1af8b4529d31424a1fd1a3a5b7c31',1,'policytrain::precision::to_string()'],['../monitor_8hpp.html#aa21b569b0cab5b85b5980ea01cb33451',1,'policytrain::to_string(Mode m)'],['../category_8hpp.html#af57b32ccb3f781883caadb850d6d7dd6',1,'policytrain::to_string(Category c)']]],
  ['total_7',['total',['../structpolicytrain_1_1callbacks_1_1PhaseTimes.html#a133243189be029a2f21f9f3b5e31656e',1,'policytrain::callbacks::PhaseTimes']]],
  ['totals_8',['totals',['../classpolicytrain_1_1callbacks_1_1MetricsLog.html#a06b7fbbc5262c786a4e60cc98ed981b2',1,'policytrain::callbacks::MetricsLog']]],
  ['trace_5fpath_9',['trace_path',['../classpolicytrain_1_1callbacks_1_1Profiler.html#a793482a625db03ce01bb300a1f050882',1,'policytrain::callbacks::Profiler']]],
  ['train_10',['train',['../classpolicytrain_1_1memory_1_1RecomputedImpl.html#ac7600777911260c960d5fb44477af270',1,'policytrain::memory::RecomputedImpl']]],
  ['trainer_11',['Trainer',['../classpolicytrain_1_1Trainer.html#ab7840777ff30f8076760efa61d010f26',1,'policytrain::Trainer::Trainer()'],['../trainer_8hpp.html#a59b837df107fa8514865ffc2d773a45a',1,'policytrain::Trainer()']]],
  ['transform_5floss_12',['transform_loss',['../structpolicytrain_1_1precision_1_1Fp32.html#add6cfdd1cbb97ee73a18d6cfb518a7fe',1,'policytrain::precision::Fp32::transform_loss()'],['../classpolicytrain_1_1precision_1_1Autocast.html#af8e674552d044f8517551f08729209ab',1,'policytrain::precision::Autocast::transform_loss()'],['../classpolicytrain_1_1accumulate_1_1Steps.html#a0dff62f4e33721175da021c2f5ba3ca5',1,'policytrain::accumulate::Steps::transform_loss()'],['../classpolicytrain_1_1accumulate_1_1NominalBatch.html#a65d8101261e6cf389a86a213f8667bc2',1,'policytrain::accumulate::NominalBatch::transform_loss()']]]
];
