var searchData=
[
  ['get_0',['get',['../classpolicytrain_1_1Context.html#a0858ee70ca5312b298987c85ac6911b3',1,'policytrain::Context::get()'],['../structpolicytrain_1_1Metrics.html#aea49a25be5ae52e69ee0b4920194d3b4',1,'policytrain::Metrics::get()'],['../classpolicytrain_1_1Trainer.html#a7999c5a29e44773111af407b71cefdd6',1,'policytrain::Trainer::get()']]],
  ['global_5fbatch_1',['global_batch',['../structpolicytrain_1_1accumulate_1_1BatchPlan.html#aa3d0865012533cdf53a0e43e16ff8c68',1,'policytrain::accumulate::BatchPlan']]],
  ['grad_5fscale_2',['grad_scale',['../classpolicytrain_1_1optim_1_1FusedGradScaling.html#af4e63e0c224449e93f18d97dbd777f2b',1,'policytrain::optim::FusedGradScaling']]],
  ['gradclip_3',['GradClip',['../classpolicytrain_1_1callbacks_1_1GradClip.html#aa08e728d0a56acb5081239f80d14b494',1,'policytrain::callbacks::GradClip']]],
  ['graph_5frefusal_4',['graph_refusal',['../classpolicytrain_1_1precision_1_1Autocast.html#ac6b8e57ea32bfb29781da4d5bd491f43',1,'policytrain::precision::Autocast::graph_refusal()'],['../structpolicytrain_1_1precision_1_1Fp32.html#a0c6259349162ac345442d75de72531f2',1,'policytrain::precision::Fp32::graph_refusal()']]],
  ['graph_5frefusals_5',['graph_refusals',['../classpolicytrain_1_1Context.html#ae0e4bec91da7b54da0279b7c40b9f98b',1,'policytrain::Context']]],
  ['growth_5ftracker_6',['growth_tracker',['../classpolicytrain_1_1precision_1_1LossScaler.html#a4f13a6531d30cfc8f3a8164bf1fb0035',1,'policytrain::precision::LossScaler']]]
];
