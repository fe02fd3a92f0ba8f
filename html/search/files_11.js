var searchData=
[
  ['window_5fmean_2ehpp_0',['window_mean.hpp',['../window__mean_8hpp.html',1,'']]]
];
