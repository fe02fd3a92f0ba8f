var searchData=
[
  ['_7easyncwriter_0',['~AsyncWriter',['../classpolicytrain_1_1checkpoint_1_1AsyncWriter.html#a616bbcfd42d4fdd283a63914eb2c97dc',1,'policytrain::checkpoint::AsyncWriter']]],
  ['_7eprofiler_1',['~Profiler',['../classpolicytrain_1_1callbacks_1_1Profiler.html#a33fcb94501c03b4e90a9a6e74a2e3167',1,'policytrain::callbacks::Profiler']]]
];
