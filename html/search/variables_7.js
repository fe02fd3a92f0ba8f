var searchData=
[
  ['half_5foptimizer_0',['half_optimizer',['../structpolicytrain_1_1checkpoint_1_1SaveOptions.html#a92756cc023ccf60dd037c7c7cda17545',1,'policytrain::checkpoint::SaveOptions']]],
  ['half_5fweights_1',['half_weights',['../structpolicytrain_1_1checkpoint_1_1SaveOptions.html#a422db23ce6102b65ac78c691c5cc053f',1,'policytrain::checkpoint::SaveOptions']]],
  ['histogram_5fevery_2',['histogram_every',['../structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#a874b4e7f290fea9f876249a4afd7424f',1,'policytrain::callbacks::TensorBoard::Options']]],
  ['horizontal_5fflip_3',['horizontal_flip',['../structpolicytrain_1_1data_1_1AugmentOptions.html#a84d6fc670a5fae898a25287313a1705d',1,'policytrain::data::AugmentOptions']]],
  ['hparams_4',['hparams',['../structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#a4e59fe917b8325c6a5462317655cff21',1,'policytrain::callbacks::TensorBoard::Options']]]
];
