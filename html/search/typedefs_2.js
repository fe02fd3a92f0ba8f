var searchData=
[
  ['difference_5ftype_0',['difference_type',['../classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#aa26bd6a998d0e83a63c8007b1de2e079',1,'policytrain::data::TensorLoader::iterator::difference_type()'],['../classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#ab17ce071c69f3facee45e2d8da96d337',1,'policytrain::data::PrefetchLoader::iterator::difference_type()']]]
];
