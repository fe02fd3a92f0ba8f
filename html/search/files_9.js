var searchData=
[
  ['launch_2ehpp_0',['launch.hpp',['../launch_8hpp.html',1,'']]],
  ['loader_2ehpp_1',['loader.hpp',['../loader_8hpp.html',1,'']]],
  ['loss_5fscaler_2ehpp_2',['loss_scaler.hpp',['../loss__scaler_8hpp.html',1,'']]],
  ['lr_2ehpp_3',['lr.hpp',['../lr_8hpp.html',1,'']]]
];
