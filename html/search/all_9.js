var searchData=
[
  ['keep_0',['keep',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a2dede1ea24e1b081b5fb5644547ad934',1,'policytrain::checkpoint::Disk::Options']]],
  ['keeps_5fgrads_1',['keeps_grads',['../classpolicytrain_1_1step_1_1CapturedStep.html#a31f38c91d306b3cd5ca6c48ad5adf595',1,'policytrain::step::CapturedStep']]],
  ['key_5faverages_2',['key_averages',['../classpolicytrain_1_1callbacks_1_1Profiler.html#a0577fc477490c505c611f16e1528e25f',1,'policytrain::callbacks::Profiler']]],
  ['key_5faverages_5fjson_3',['key_averages_json',['../classpolicytrain_1_1callbacks_1_1Profiler.html#a3b4c2aaa7fef59825cca0dbe05a8e154',1,'policytrain::callbacks::Profiler']]],
  ['key_5faverages_5ftable_4',['key_averages_table',['../classpolicytrain_1_1callbacks_1_1Profiler.html#ad09fc0bb1d54230eb8b164cf52fe08f2',1,'policytrain::callbacks::Profiler']]],
  ['kfashionmnistmean_5',['kFashionMnistMean',['../fashion__mnist_8hpp.html#a25825d79355d1530fa34cf0b46c2825b',1,'policytrain::data']]],
  ['kfashionmniststd_6',['kFashionMnistStd',['../fashion__mnist_8hpp.html#a5e1c44d3f1e8ffb62ee3464596b89616',1,'policytrain::data']]],
  ['kformatversion_7',['kFormatVersion',['../format_8hpp.html#a1850d2f4e44260326b4272a63e9cc82a',1,'policytrain::checkpoint']]],
  ['kheadersize_8',['kHeaderSize',['../format_8hpp.html#a01cbb181ee05671fe3b429c9da48b4fa',1,'policytrain::checkpoint']]],
  ['kind_9',['kind',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a3e3b169243f7155b0ab9b4207fe5d2cc',1,'policytrain::schedule::LrOptions']]],
  ['kind_10',['Kind',['../lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206',1,'policytrain::schedule']]],
  ['kind_5ffrom_5fstring_11',['kind_from_string',['../lr_8hpp.html#a37ffb5ce86e0aac8cc0088a98d636fbd',1,'policytrain::schedule']]],
  ['klibraryversion_12',['kLibraryVersion',['../disk_8hpp.html#a4278309bac62d35c8ce0d176e4e45c7a',1,'policytrain::checkpoint']]],
  ['kmagic_13',['kMagic',['../format_8hpp.html#ae7cb80b55fb2aa7d5ea9c36454be3a40',1,'policytrain::checkpoint']]]
];
