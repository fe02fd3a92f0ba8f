var searchData=
[
  ['data_5fwait_5ffraction_0',['data_wait_fraction',['../classpolicytrain_1_1callbacks_1_1MetricsLog.html#a6c2cafbfc69060c6f880dab4e11caba8',1,'policytrain::callbacks::MetricsLog']]],
  ['dataparallel_1',['DataParallel',['../classpolicytrain_1_1parallel_1_1DataParallel.html#a00f04de8560e8672cd31679cf620afc2',1,'policytrain::parallel::DataParallel']]],
  ['decay_5fat_2',['decay_at',['../classpolicytrain_1_1callbacks_1_1Ema.html#aec0939018324b229a4f76fa6ac1e06d9',1,'policytrain::callbacks::Ema']]],
  ['decay_5flength_3',['decay_length',['../lr_8hpp.html#a6c3f2f8a63bbb2357bee45ad00fe28df',1,'policytrain::schedule']]],
  ['default_5fautocast_5fdtype_4',['default_autocast_dtype',['../autocast__guard_8hpp.html#a876746ea00c9a04eb690079ca1cfbdd8',1,'policytrain::precision']]],
  ['default_5ffashion_5fmnist_5fdir_5',['default_fashion_mnist_dir',['../fashion__mnist_8hpp.html#a5fe17b0e36fe390854cd2893b1e01019',1,'policytrain::data']]],
  ['default_5fmode_6',['default_mode',['../structpolicytrain_1_1Monitor.html#a3966c1055c13e9d46a086aaa7dd6cba1',1,'policytrain::Monitor']]],
  ['describe_7',['describe',['../classpolicytrain_1_1callbacks_1_1Profiler.html#a0d9b9ef928a1b6b47687748f40f6ab2f',1,'policytrain::callbacks::Profiler::describe()'],['../classpolicytrain_1_1callbacks_1_1TensorBoard.html#a008acc2d96ef15bb9c72fd7ce3503c2b',1,'policytrain::callbacks::TensorBoard::describe()'],['../classpolicytrain_1_1callbacks_1_1PerfKnobs.html#a2fc3391711dcb1cd5892a5786ee2ba7b',1,'policytrain::callbacks::PerfKnobs::describe()'],['../classpolicytrain_1_1callbacks_1_1GradClip.html#ae1588e755526bcd209e20eca7d9d26e5',1,'policytrain::callbacks::GradClip::describe()']]],
  ['device_8',['device',['../classpolicytrain_1_1Context.html#af656408a6bffdb61832927c6d2479a4e',1,'policytrain::Context::device()'],['../classpolicytrain_1_1Trainer.html#a87ce5ff561a6d3fa75cb2c164ee53992',1,'policytrain::Trainer::device()']]],
  ['device_5ftype_9',['device_type',['../classpolicytrain_1_1precision_1_1Autocast.html#aa3e8c5733590f63385bc269dbc22cd05',1,'policytrain::precision::Autocast']]],
  ['discard_5fstep_10',['discard_step',['../classpolicytrain_1_1precision_1_1Autocast.html#aae207d8e81da7ce5a11a6c69afc035a0',1,'policytrain::precision::Autocast::discard_step()'],['../structpolicytrain_1_1precision_1_1Fp32.html#ae2be6f37a0773b2931ce25f06f981125',1,'policytrain::precision::Fp32::discard_step()'],['../classpolicytrain_1_1precision_1_1LossScaler.html#a0bd98e1df5af8c14d9c3f8f8e31e8faf',1,'policytrain::precision::LossScaler::discard_step()']]],
  ['disk_11',['Disk',['../classpolicytrain_1_1checkpoint_1_1Disk.html#afbc70160fce154e04f8580a4b64a580a',1,'policytrain::checkpoint::Disk']]],
  ['divergencerollback_12',['DivergenceRollback',['../classpolicytrain_1_1callbacks_1_1DivergenceRollback.html#a5c3d26000e91b4fa903e9712e6045ac1',1,'policytrain::callbacks::DivergenceRollback']]],
  ['dtype_13',['dtype',['../classpolicytrain_1_1precision_1_1Autocast.html#a589ebbe27d2dbdf87313b4b064e44d11',1,'policytrain::precision::Autocast']]]
];
