var searchData=
[
  ['batch_2ehpp_0',['batch.hpp',['../batch_8hpp.html',1,'']]]
];
