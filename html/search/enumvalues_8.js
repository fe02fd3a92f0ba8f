var searchData=
[
  ['warmup_0',['warmup',['../classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfba468bfe2bd0d39a960b0fafb3d1e389ee',1,'policytrain::callbacks::Profiler']]]
];
