var searchData=
[
  ['sequential_0',['sequential',['../lr_8hpp.html#a06826186c0f78b2c2448804bd496207da6ec7489017b25b5fff20d353b6d2162e',1,'policytrain::schedule']]],
  ['skip_1',['skip',['../fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201a08b43519a7e36ee4c6c5615d1663bcfd',1,'policytrain']]]
];
