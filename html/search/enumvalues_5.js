var searchData=
[
  ['off_0',['off',['../autocast_8hpp.html#a050ac1687561d6d6bc567cb5b57f5935a3262d48df5d75e3452f0f16b313b7808',1,'policytrain::precision']]],
  ['on_1',['on',['../autocast_8hpp.html#a050ac1687561d6d6bc567cb5b57f5935aed2b5c0139cec8ad2873829dc1117d50',1,'policytrain::precision']]]
];
