var searchData=
[
  ['keep_0',['keep',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a2dede1ea24e1b081b5fb5644547ad934',1,'policytrain::checkpoint::Disk::Options']]],
  ['kfashionmnistmean_1',['kFashionMnistMean',['../fashion__mnist_8hpp.html#a25825d79355d1530fa34cf0b46c2825b',1,'policytrain::data']]],
  ['kfashionmniststd_2',['kFashionMnistStd',['../fashion__mnist_8hpp.html#a5e1c44d3f1e8ffb62ee3464596b89616',1,'policytrain::data']]],
  ['kformatversion_3',['kFormatVersion',['../format_8hpp.html#a1850d2f4e44260326b4272a63e9cc82a',1,'policytrain::checkpoint']]],
  ['kheadersize_4',['kHeaderSize',['../format_8hpp.html#a01cbb181ee05671fe3b429c9da48b4fa',1,'policytrain::checkpoint']]],
  ['kind_5',['kind',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a3e3b169243f7155b0ab9b4207fe5d2cc',1,'policytrain::schedule::LrOptions']]],
  ['klibraryversion_6',['kLibraryVersion',['../disk_8hpp.html#a4278309bac62d35c8ce0d176e4e45c7a',1,'policytrain::checkpoint']]],
  ['kmagic_7',['kMagic',['../format_8hpp.html#ae7cb80b55fb2aa7d5ea9c36454be3a40',1,'policytrain::checkpoint']]]
];
