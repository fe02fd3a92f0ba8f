var searchData=
[
  ['wait_0',['wait',['../classpolicytrain_1_1callbacks_1_1EarlyStopping.html#a4ba3897ca24afba81ce4a4b78a3efd73',1,'policytrain::callbacks::EarlyStopping::wait()'],['../classpolicytrain_1_1checkpoint_1_1AsyncWriter.html#ad5c853a73e5246fc3d49bf50d977e038',1,'policytrain::checkpoint::AsyncWriter::wait()'],['../classpolicytrain_1_1checkpoint_1_1Disk.html#afe31a5953a019cbf7a0a30eaa9497ab7',1,'policytrain::checkpoint::Disk::wait()']]],
  ['warmup_5fsteps_1',['warmup_steps',['../lr_8hpp.html#ada2b3c19cc7f363f68156021712aa412',1,'policytrain::schedule']]],
  ['weight_5fdecay_5ffactor_2',['weight_decay_factor',['../classpolicytrain_1_1accumulate_1_1NominalBatch.html#a0941f2726e6ac8658bb8c612ef973292',1,'policytrain::accumulate::NominalBatch']]],
  ['weight_5fdecay_5fof_3',['weight_decay_of',['../window__mean_8hpp.html#aacae6d82ae571a481bf0ab0034daf6b1',1,'policytrain']]],
  ['window_5fopen_4',['window_open',['../classpolicytrain_1_1callbacks_1_1Profiler.html#a2ab4b0c3d21f6d918e604f8e7f985b5e',1,'policytrain::callbacks::Profiler']]],
  ['with_5fweights_5',['with_weights',['../classpolicytrain_1_1callbacks_1_1Ema.html#ae9e383ac3aed47d2e9208d862b5a9b4e',1,'policytrain::callbacks::Ema']]],
  ['world_5fsize_6',['world_size',['../classpolicytrain_1_1accumulate_1_1NominalBatch.html#a1413ddacdf080302f17ca40bdffae077',1,'policytrain::accumulate::NominalBatch::world_size()'],['../classpolicytrain_1_1parallel_1_1DataParallel.html#aa32498af961cbe7fa1789311e3954d5d',1,'policytrain::parallel::DataParallel::world_size()']]],
  ['worse_7',['worse',['../structpolicytrain_1_1Monitor.html#aed3d181f720f4d1b154184f28626c230',1,'policytrain::Monitor']]],
  ['write_5fatomic_8',['write_atomic',['../format_8hpp.html#ada17bcfd22915e9c5cdc3820cf4d5641',1,'policytrain::checkpoint']]],
  ['write_5ffile_9',['write_file',['../format_8hpp.html#a9027cd8caeeb5b3a78fdbed2d4ee6af8',1,'policytrain::checkpoint']]]
];
