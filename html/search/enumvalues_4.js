var searchData=
[
  ['none_0',['none',['../classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfba334c4a4c42fdb79d7ebc3e73b517e6f8',1,'policytrain::callbacks::Profiler']]]
];
