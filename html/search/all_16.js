var searchData=
[
  ['y_0',['y',['../structpolicytrain_1_1Batch.html#ac06efec35cecd71bade09b37a3c8b412',1,'policytrain::Batch::y()'],['../structpolicytrain_1_1data_1_1TensorPair.html#a5279b257da42461e62458eba09661fbb',1,'policytrain::data::TensorPair::y()']]]
];
