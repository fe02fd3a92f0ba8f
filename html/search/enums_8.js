var searchData=
[
  ['unit_0',['Unit',['../lr_8hpp.html#a81a0163c6ff2cfc987f36e469793c217',1,'policytrain::schedule']]]
];
