var searchData=
[
  ['tensorboard_2ehpp_0',['tensorboard.hpp',['../tensorboard_8hpp.html',1,'']]],
  ['trainer_2ehpp_1',['trainer.hpp',['../trainer_8hpp.html',1,'']]]
];
