var searchData=
[
  ['callbacks_5ftype_0',['callbacks_type',['../classpolicytrain_1_1Trainer.html#a8df07899a47d0c788ffcfbc1461bf8af',1,'policytrain::Trainer']]],
  ['checkpoint_5ftype_1',['checkpoint_type',['../classpolicytrain_1_1Trainer.html#a7de3db9050a2bbdcb5f86e69dada2ecf',1,'policytrain::Trainer']]],
  ['clock_2',['Clock',['../classpolicytrain_1_1callbacks_1_1StepPhases.html#ad445c70406ae1eb727d6c635a6823e3d',1,'policytrain::callbacks::StepPhases']]],
  ['context_5ftype_3',['context_type',['../classpolicytrain_1_1Trainer.html#a24d016486e72ac2743f15fcd2d87738d',1,'policytrain::Trainer']]],
  ['cudagraph_4',['CudaGraph',['../cuda__graph_8hpp.html#ad2847fa57e2a6ef898b75cf26bf0b759',1,'policytrain::step']]]
];
