var searchData=
[
  ['unique_5fnamed_5fbuffers_0',['unique_named_buffers',['../parameters_8hpp.html#a6eea11db31445346169ad0e02850737c',1,'policytrain']]],
  ['unique_5fnamed_5fparameters_1',['unique_named_parameters',['../parameters_8hpp.html#a970d0b2535010a85e8ef8ca312541692',1,'policytrain']]],
  ['unique_5fparameters_2',['unique_parameters',['../parameters_8hpp.html#ae1a431b1f7b3b68d07d75c718bccb67e',1,'policytrain']]],
  ['unique_5ftensors_3',['unique_tensors',['../parameters_8hpp.html#a83a3dd89b21cfc37f49d2e1e3a02971f',1,'policytrain']]],
  ['unit_5fsteps_4',['unit_steps',['../lr_8hpp.html#a7d9d4432d82c81ebd12d106abfe2a539',1,'policytrain::schedule']]],
  ['unscale_5',['unscale',['../classpolicytrain_1_1precision_1_1LossScaler.html#aece9af73aa2ca742fc1f4db8e5a52e76',1,'policytrain::precision::LossScaler']]],
  ['update_6',['update',['../classpolicytrain_1_1precision_1_1LossScaler.html#aa5302c1cae486759d81501ad65186331',1,'policytrain::precision::LossScaler']]],
  ['updates_7',['updates',['../classpolicytrain_1_1callbacks_1_1Ema.html#a89aef8487f28871c8933d248c5a0abec',1,'policytrain::callbacks::Ema']]]
];
