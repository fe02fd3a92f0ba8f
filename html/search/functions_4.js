var searchData=
[
  ['eager_5fsteps_0',['eager_steps',['../classpolicytrain_1_1step_1_1CapturedStep.html#a6191df5dd7a59f1d1f026255025308fd',1,'policytrain::step::CapturedStep']]],
  ['earlystopping_1',['EarlyStopping',['../classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a4ff720ac7c8f94030355254e0e4bd81a',1,'policytrain::callbacks::EarlyStopping']]],
  ['ema_2',['Ema',['../classpolicytrain_1_1callbacks_1_1Ema.html#a3a8fe712ee75335acf036436af565c24',1,'policytrain::callbacks::Ema']]],
  ['empty_3',['empty',['../classpolicytrain_1_1checkpoint_1_1Snapshot.html#a8f9c4528799071ed5cf3785da7939fc1',1,'policytrain::checkpoint::Snapshot']]],
  ['enabled_4',['enabled',['../classpolicytrain_1_1callbacks_1_1Ema.html#a50ec161beca373e0cfd7d6d6ad06b531',1,'policytrain::callbacks::Ema::enabled()'],['../classpolicytrain_1_1callbacks_1_1Profiler.html#a07097b04b6f479646d405ab780cbf2f5',1,'policytrain::callbacks::Profiler::enabled()'],['../classpolicytrain_1_1callbacks_1_1TensorBoard.html#abd2bc08f2a58b57b0bdb1faa79cd6083',1,'policytrain::callbacks::TensorBoard::enabled()'],['../classpolicytrain_1_1checkpoint_1_1Disk.html#a1747e58674577415d706d74df58bb43e',1,'policytrain::checkpoint::Disk::enabled()']]],
  ['end_5',['end',['../classpolicytrain_1_1data_1_1TensorLoader.html#ada0b4022cd5169cea37a1825cd5fca3b',1,'policytrain::data::TensorLoader::end()'],['../classpolicytrain_1_1data_1_1PrefetchLoader.html#ac2823b8725720692f5cbeb6551d39032',1,'policytrain::data::PrefetchLoader::end()']]],
  ['environment_6',['environment',['../classpolicytrain_1_1parallel_1_1DataParallel.html#aae23d5caff54df0ba7b166ab684c43ac',1,'policytrain::parallel::DataParallel']]],
  ['epoch_7',['epoch',['../classpolicytrain_1_1data_1_1TensorLoader.html#ac0e37c0c1e4b24ceb4d4a8355d12132a',1,'policytrain::data::TensorLoader::epoch()'],['../classpolicytrain_1_1data_1_1PrefetchLoader.html#a10f238282cf893b9f5cb99b605b1f5d1',1,'policytrain::data::PrefetchLoader::epoch()']]],
  ['epoch_5fbatches_8',['epoch_batches',['../classpolicytrain_1_1Context.html#af544ace19b9392dfd918836c2bb49626',1,'policytrain::Context']]],
  ['epoch_5fbegin_9',['epoch_begin',['../classpolicytrain_1_1callbacks_1_1StepPhases.html#a7c90711e108bc8d281d8aa059b3fbb66',1,'policytrain::callbacks::StepPhases']]],
  ['evaluate_10',['evaluate',['../classpolicytrain_1_1Trainer.html#a48ecd32fa48920211a9a2544a9b966d3',1,'policytrain::Trainer']]],
  ['export_5fweights_11',['export_weights',['../export_8hpp.html#ae2c08e06af631610d657ed66ad00c7c1',1,'policytrain::checkpoint']]]
];
