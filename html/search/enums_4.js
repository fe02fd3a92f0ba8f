var searchData=
[
  ['lossscaling_0',['LossScaling',['../autocast_8hpp.html#a050ac1687561d6d6bc567cb5b57f5935',1,'policytrain::precision']]]
];
