var searchData=
[
  ['idxdata_0',['IdxData',['../structpolicytrain_1_1data_1_1IdxData.html',1,'policytrain::data']]],
  ['idxerror_1',['IdxError',['../structpolicytrain_1_1data_1_1IdxError.html',1,'policytrain::data']]],
  ['imagelabels_2',['ImageLabels',['../structpolicytrain_1_1data_1_1ImageLabels.html',1,'policytrain::data']]],
  ['iterator_3',['iterator',['../classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html',1,'policytrain::data::PrefetchLoader::iterator'],['../classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html',1,'policytrain::data::TensorLoader::iterator']]]
];
