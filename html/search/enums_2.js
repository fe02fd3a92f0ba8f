var searchData=
[
  ['decayend_0',['DecayEnd',['../lr_8hpp.html#a50dcc7aeca4dd749b72bf14711703642',1,'policytrain::schedule']]]
];
