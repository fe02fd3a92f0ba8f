var searchData=
[
  ['nonfinite_0',['NonFinite',['../fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201',1,'policytrain']]]
];
