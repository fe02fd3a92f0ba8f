var searchData=
[
  ['tensorboard_0',['TensorBoard',['../classpolicytrain_1_1callbacks_1_1TensorBoard.html',1,'policytrain::callbacks']]],
  ['tensorbytesmeter_1',['TensorBytesMeter',['../classpolicytrain_1_1memory_1_1TensorBytesMeter.html',1,'policytrain::memory']]],
  ['tensorloader_2',['TensorLoader',['../classpolicytrain_1_1data_1_1TensorLoader.html',1,'policytrain::data']]],
  ['tensorpair_3',['TensorPair',['../structpolicytrain_1_1data_1_1TensorPair.html',1,'policytrain::data']]],
  ['trainer_4',['Trainer',['../classpolicytrain_1_1Trainer.html',1,'policytrain']]],
  ['trainstate_5',['TrainState',['../structpolicytrain_1_1TrainState.html',1,'policytrain']]]
];
