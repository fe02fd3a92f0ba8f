var searchData=
[
  ['recompute_2ehpp_0',['recompute.hpp',['../recompute_8hpp.html',1,'']]]
];
