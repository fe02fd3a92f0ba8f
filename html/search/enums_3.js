var searchData=
[
  ['kind_0',['Kind',['../lr_8hpp.html#aa34ab7720a7e29d254d546a79f5fa206',1,'policytrain::schedule']]]
];
