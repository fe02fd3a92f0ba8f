var searchData=
[
  ['idx_2ehpp_0',['idx.hpp',['../idx_8hpp.html',1,'']]],
  ['idx_5fformat_2ehpp_1',['idx_format.hpp',['../idx__format_8hpp.html',1,'']]]
];
