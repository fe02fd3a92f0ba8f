var searchData=
[
  ['parallel_5ftype_0',['parallel_type',['../classpolicytrain_1_1Trainer.html#abdd14b0f2bb83ae13724fd78078fd2bb',1,'policytrain::Trainer']]],
  ['policies_5ftype_1',['policies_type',['../classpolicytrain_1_1Trainer.html#a1aea246b1a2479e4a7aba57bbb5b16d1',1,'policytrain::Trainer']]],
  ['precision_5ftype_2',['precision_type',['../classpolicytrain_1_1Trainer.html#a01399a939c5c175c26c7858ebf66941d',1,'policytrain::Trainer']]]
];
