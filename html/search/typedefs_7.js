var searchData=
[
  ['schedule_5ftype_0',['schedule_type',['../classpolicytrain_1_1Trainer.html#a72354a67e9055a646eb4196d71b89a03',1,'policytrain::Trainer']]],
  ['statedict_1',['StateDict',['../state__dict_8hpp.html#a7eeacb345ec7678e57e998c5afcab368',1,'policytrain']]]
];
