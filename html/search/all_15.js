var searchData=
[
  ['x_0',['x',['../structpolicytrain_1_1Batch.html#a4d186352647f06c7bcc4dab78a99df7a',1,'policytrain::Batch::x()'],['../structpolicytrain_1_1data_1_1TensorPair.html#aca74c844c6fafd64248bc28d9008d214',1,'policytrain::data::TensorPair::x()']]]
];
