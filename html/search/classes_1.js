var searchData=
[
  ['batch_0',['Batch',['../structpolicytrain_1_1Batch.html',1,'policytrain']]],
  ['batchplan_1',['BatchPlan',['../structpolicytrain_1_1accumulate_1_1BatchPlan.html',1,'policytrain::accumulate']]]
];
