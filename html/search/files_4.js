var searchData=
[
  ['early_5fstopping_2ehpp_0',['early_stopping.hpp',['../early__stopping_8hpp.html',1,'']]],
  ['ema_2ehpp_1',['ema.hpp',['../ema_8hpp.html',1,'']]],
  ['export_2ehpp_2',['export.hpp',['../export_8hpp.html',1,'']]]
];
