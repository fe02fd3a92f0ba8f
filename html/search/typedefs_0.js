var searchData=
[
  ['accumulation_5ftype_0',['accumulation_type',['../classpolicytrain_1_1Trainer.html#ac6072adc641e6c0136dc4e0ee67db870',1,'policytrain::Trainer']]]
];
