var searchData=
[
  ['mode_0',['Mode',['../classpolicytrain_1_1callbacks_1_1GradClip.html#ad1044c82e77fa7d3b434f54e5539a269',1,'policytrain::callbacks::GradClip::Mode()'],['../monitor_8hpp.html#a15b094ad555763974066e57bc2ded5cc',1,'policytrain::Mode()']]]
];
