var searchData=
[
  ['options_0',['Options',['../classpolicytrain_1_1parallel_1_1DataParallel.html#a93d32a7b24ce8eb3508b8a81caa9f9ca',1,'policytrain::parallel::DataParallel']]]
];
