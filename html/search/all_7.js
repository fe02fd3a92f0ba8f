var searchData=
[
  ['half_5foptimizer_0',['half_optimizer',['../structpolicytrain_1_1checkpoint_1_1SaveOptions.html#a92756cc023ccf60dd037c7c7cda17545',1,'policytrain::checkpoint::SaveOptions']]],
  ['half_5fweights_1',['half_weights',['../structpolicytrain_1_1checkpoint_1_1SaveOptions.html#a422db23ce6102b65ac78c691c5cc053f',1,'policytrain::checkpoint::SaveOptions']]],
  ['halvings_2',['halvings',['../classpolicytrain_1_1accumulate_1_1AutoBatch.html#a6c46eb933d24d063373debf7bfbbf909',1,'policytrain::accumulate::AutoBatch']]],
  ['has_3',['has',['../classpolicytrain_1_1Context.html#ab76f91fc2bd1fe7cd3fdada8d68b4254',1,'policytrain::Context::has()'],['../classpolicytrain_1_1Trainer.html#a23d681e23425b016ed8b244accfa184f',1,'policytrain::Trainer::has()']]],
  ['header_4',['Header',['../structpolicytrain_1_1checkpoint_1_1Header.html',1,'policytrain::checkpoint']]],
  ['histogram_5fevery_5',['histogram_every',['../structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#a874b4e7f290fea9f876249a4afd7424f',1,'policytrain::callbacks::TensorBoard::Options']]],
  ['history_6',['history',['../classpolicytrain_1_1checkpoint_1_1Disk.html#aba44d75bc63aa69f34f6c1999c8c934e',1,'policytrain::checkpoint::Disk']]],
  ['hooks_2ehpp_7',['hooks.hpp',['../hooks_8hpp.html',1,'']]],
  ['horizon_8',['horizon',['../classpolicytrain_1_1schedule_1_1Lr.html#a3940ed308de0ab59fc72928df3f6edc9',1,'policytrain::schedule::Lr']]],
  ['horizon_9',['Horizon',['../structpolicytrain_1_1schedule_1_1Horizon.html',1,'policytrain::schedule']]],
  ['horizontal_5fflip_10',['horizontal_flip',['../structpolicytrain_1_1data_1_1AugmentOptions.html#a84d6fc670a5fae898a25287313a1705d',1,'policytrain::data::AugmentOptions']]],
  ['hparams_11',['hparams',['../structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#a4e59fe917b8325c6a5462317655cff21',1,'policytrain::callbacks::TensorBoard::Options']]]
];
