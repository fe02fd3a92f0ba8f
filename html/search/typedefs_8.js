var searchData=
[
  ['value_5ftype_0',['value_type',['../classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#a47f1f453096c710f466376c50d2aaeef',1,'policytrain::data::TensorLoader::iterator::value_type()'],['../classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#a95ffe6554d1af59f4badb87b68042c95',1,'policytrain::data::PrefetchLoader::iterator::value_type()']]]
];
