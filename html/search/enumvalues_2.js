var searchData=
[
  ['ignore_0',['ignore',['../fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201a567bc1d268f135496de3d5b946b691f3',1,'policytrain']]],
  ['interpolate_1',['interpolate',['../lr_8hpp.html#a06826186c0f78b2c2448804bd496207daa38db99c73ac1258e03067286e3f4e02',1,'policytrain::schedule']]]
];
