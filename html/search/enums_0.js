var searchData=
[
  ['action_0',['Action',['../classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfb',1,'policytrain::callbacks::Profiler']]],
  ['anneal_1',['Anneal',['../lr_8hpp.html#ad5d12dbe31e58410ec53521ef4c3227e',1,'policytrain::schedule']]]
];
