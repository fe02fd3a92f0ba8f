var searchData=
[
  ['last_5fstep_0',['last_step',['../lr_8hpp.html#a50dcc7aeca4dd749b72bf14711703642ac212c19623768565770d894e772438ef',1,'policytrain::schedule']]]
];
