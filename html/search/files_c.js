var searchData=
[
  ['observe_2ehpp_0',['observe.hpp',['../observe_8hpp.html',1,'']]]
];
