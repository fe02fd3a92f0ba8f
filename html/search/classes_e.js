var searchData=
[
  ['rawfile_0',['RawFile',['../structpolicytrain_1_1checkpoint_1_1RawFile.html',1,'policytrain::checkpoint']]],
  ['recomputed_1',['Recomputed',['../classpolicytrain_1_1memory_1_1Recomputed.html',1,'policytrain::memory']]],
  ['recomputedimpl_2',['RecomputedImpl',['../classpolicytrain_1_1memory_1_1RecomputedImpl.html',1,'policytrain::memory']]],
  ['resumemismatch_3',['ResumeMismatch',['../structpolicytrain_1_1parallel_1_1ResumeMismatch.html',1,'policytrain::parallel']]],
  ['runinfo_4',['RunInfo',['../structpolicytrain_1_1checkpoint_1_1RunInfo.html',1,'policytrain::checkpoint']]]
];
