var searchData=
[
  ['keeps_5fgrads_0',['keeps_grads',['../classpolicytrain_1_1step_1_1CapturedStep.html#a31f38c91d306b3cd5ca6c48ad5adf595',1,'policytrain::step::CapturedStep']]],
  ['key_5faverages_1',['key_averages',['../classpolicytrain_1_1callbacks_1_1Profiler.html#a0577fc477490c505c611f16e1528e25f',1,'policytrain::callbacks::Profiler']]],
  ['key_5faverages_5fjson_2',['key_averages_json',['../classpolicytrain_1_1callbacks_1_1Profiler.html#a3b4c2aaa7fef59825cca0dbe05a8e154',1,'policytrain::callbacks::Profiler']]],
  ['key_5faverages_5ftable_3',['key_averages_table',['../classpolicytrain_1_1callbacks_1_1Profiler.html#ad09fc0bb1d54230eb8b164cf52fe08f2',1,'policytrain::callbacks::Profiler']]],
  ['kind_5ffrom_5fstring_4',['kind_from_string',['../lr_8hpp.html#a37ffb5ce86e0aac8cc0088a98d636fbd',1,'policytrain::schedule']]]
];
