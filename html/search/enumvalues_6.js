var searchData=
[
  ['record_0',['record',['../classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfbade17f0f24b49f8364187891f8550ffbb',1,'policytrain::callbacks::Profiler']]],
  ['record_5fand_5fsave_1',['record_and_save',['../classpolicytrain_1_1callbacks_1_1Profiler.html#adeb2594543dcbfd3cb223f393cc9abfbaf33ab42f1dbb839f4ec9d3fb05f20142',1,'policytrain::callbacks::Profiler']]],
  ['rollback_2',['rollback',['../fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201afff66e9b3d962fa319c8068b5c1997cd',1,'policytrain']]]
];
