var searchData=
[
  ['gamma_0',['gamma',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a39cb000485deb3d190f0968cf13d49b9',1,'policytrain::schedule::LrOptions']]],
  ['global_5fbatch_1',['global_batch',['../structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html#a5e29df00c7dbd0999508af28b4f3bdb0',1,'policytrain::accumulate::AutoBatchOptions']]],
  ['global_5fstep_2',['global_step',['../structpolicytrain_1_1TrainState.html#a38573293383c9cb37a69385976b8b882',1,'policytrain::TrainState']]],
  ['global_5fsteps_3',['global_steps',['../structpolicytrain_1_1FitResult.html#ac43ed186084e33bad1cf76204f53b3a4',1,'policytrain::FitResult']]],
  ['gloo_5fthreads_4',['gloo_threads',['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html#ae98b4b1709c62c4356d74638e4eb9238',1,'policytrain::parallel::DataParallelOptions']]],
  ['gradient_5fas_5fbucket_5fview_5',['gradient_as_bucket_view',['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html#ad58c86969d0a226f4c4f146298921915',1,'policytrain::parallel::DataParallelOptions']]],
  ['graph_5fsafe_6',['graph_safe',['../classpolicytrain_1_1callbacks_1_1GradClip.html#af9517d1fe372c7712b8092c77faf7ca8',1,'policytrain::callbacks::GradClip::graph_safe()'],['../classpolicytrain_1_1precision_1_1Autocast.html#a73a2692196d8ad1be04fa99082d5fe11',1,'policytrain::precision::Autocast::graph_safe()'],['../structpolicytrain_1_1precision_1_1Fp32.html#a399acfb636c0b4546e5eb78fe092db31',1,'policytrain::precision::Fp32::graph_safe()']]],
  ['graph_5fsafe_5fv_7',['graph_safe_v',['../hooks_8hpp.html#a9354c595f8b9ff3474abadcda3c00eda',1,'policytrain']]],
  ['growth_5ffactor_8',['growth_factor',['../structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html#a2a1d18e099d91913a00f7ddf7cbec7fd',1,'policytrain::precision::LossScaler::Options']]],
  ['growth_5finterval_9',['growth_interval',['../structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html#a0f5ebbd0bf2518f4f88f5f448bea6dcc',1,'policytrain::precision::LossScaler::Options']]]
];
