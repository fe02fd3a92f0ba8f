var searchData=
[
  ['evaluabletask_0',['EvaluableTask',['../conceptpolicytrain_1_1EvaluableTask.html',1,'policytrain']]],
  ['hasflushchecks_1',['HasFlushChecks',['../conceptpolicytrain_1_1HasFlushChecks.html',1,'policytrain']]],
  ['incapturedstep_2',['InCapturedStep',['../conceptpolicytrain_1_1InCapturedStep.html',1,'policytrain']]],
  ['stateful_3',['Stateful',['../conceptpolicytrain_1_1Stateful.html',1,'policytrain']]],
  ['trainabletask_4',['TrainableTask',['../conceptpolicytrain_1_1TrainableTask.html',1,'policytrain']]]
];
