var searchData=
[
  ['make_5fheader_0',['make_header',['../format_8hpp.html#ad7912941db8b0d44b258de51cd3f116b',1,'policytrain::checkpoint']]],
  ['make_5fpayload_1',['make_payload',['../archive_8hpp.html#a9e637b748f5b43f7c3b049f2b0c4bf44',1,'policytrain::checkpoint']]],
  ['meta_5fbool_2',['meta_bool',['../format_8hpp.html#ab6b6933827cf7fd175d4e49dafbf7269',1,'policytrain::checkpoint']]],
  ['meta_5fint_3',['meta_int',['../format_8hpp.html#ad17daf1c142fc1615b341a2c5c6018d1',1,'policytrain::checkpoint']]],
  ['metricslog_4',['MetricsLog',['../classpolicytrain_1_1callbacks_1_1MetricsLog.html#ab8c760e0a0ed090889938329483884db',1,'policytrain::callbacks::MetricsLog']]],
  ['module_5',['module',['../classpolicytrain_1_1Context.html#a9c8cd0251e2e716aebbbb81eaab4916d',1,'policytrain::Context::module()'],['../classpolicytrain_1_1Trainer.html#a43f36883149de6aaa2057a47b5faca1e',1,'policytrain::Trainer::module()']]],
  ['momentum_5fat_6',['momentum_at',['../classpolicytrain_1_1schedule_1_1Lr.html#af6c134b1c721bca7b3ab0b95d70f2959',1,'policytrain::schedule::Lr']]],
  ['momentum_5fof_7',['momentum_of',['../lr_8hpp.html#a1471a1a413cfa70f35aa30d9471c4789',1,'policytrain::schedule']]]
];
