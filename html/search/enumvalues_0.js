var searchData=
[
  ['after_5frun_0',['after_run',['../lr_8hpp.html#a50dcc7aeca4dd749b72bf14711703642aab86f289a22c3270a43dffe4a774fd14',1,'policytrain::schedule']]],
  ['automatic_1',['automatic',['../autocast_8hpp.html#a050ac1687561d6d6bc567cb5b57f5935a2bd9c0ed00116be1258e0cc66617d7c8',1,'policytrain::precision']]]
];
