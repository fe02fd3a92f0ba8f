var searchData=
[
  ['warmupmode_0',['WarmupMode',['../lr_8hpp.html#a06826186c0f78b2c2448804bd496207d',1,'policytrain::schedule']]]
];
