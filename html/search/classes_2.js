var searchData=
[
  ['candidates_0',['Candidates',['../structpolicytrain_1_1checkpoint_1_1Candidates.html',1,'policytrain::checkpoint']]],
  ['capturedstep_1',['CapturedStep',['../classpolicytrain_1_1step_1_1CapturedStep.html',1,'policytrain::step']]],
  ['checkpointerror_2',['CheckpointError',['../structpolicytrain_1_1checkpoint_1_1CheckpointError.html',1,'policytrain::checkpoint']]],
  ['classificationreport_3',['ClassificationReport',['../structpolicytrain_1_1ClassificationReport.html',1,'policytrain']]],
  ['classscores_4',['ClassScores',['../structpolicytrain_1_1ClassScores.html',1,'policytrain']]],
  ['collectiveerror_5',['CollectiveError',['../structpolicytrain_1_1parallel_1_1CollectiveError.html',1,'policytrain::parallel']]],
  ['constant_6',['Constant',['../structpolicytrain_1_1schedule_1_1Constant.html',1,'policytrain::schedule']]],
  ['context_7',['Context',['../classpolicytrain_1_1Context.html',1,'policytrain']]],
  ['context_3c_20trainer_20_3e_8',['Context&lt; Trainer &gt;',['../classpolicytrain_1_1Context.html',1,'policytrain']]]
];
