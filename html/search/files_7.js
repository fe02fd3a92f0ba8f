var searchData=
[
  ['hooks_2ehpp_0',['hooks.hpp',['../hooks_8hpp.html',1,'']]]
];
