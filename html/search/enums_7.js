var searchData=
[
  ['thresholdmode_0',['ThresholdMode',['../lr_8hpp.html#a564b6ab214a0b80b0bb026d6dba65ac2',1,'policytrain::schedule']]]
];
