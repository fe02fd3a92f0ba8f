var searchData=
[
  ['capturedstep_0',['CapturedStep',['../classpolicytrain_1_1step_1_1CapturedStep.html#ac98bd7f2fe8862da7f612f8c3f6ba88d',1,'policytrain::step::CapturedStep']]],
  ['captures_1',['captures',['../classpolicytrain_1_1step_1_1CapturedStep.html#a9973542078d40b24a7b9f388514a5be1',1,'policytrain::step::CapturedStep']]],
  ['capturing_2',['capturing',['../classpolicytrain_1_1Context.html#aa7112e5840d882ea1c31f4cd55b77632',1,'policytrain::Context::capturing()'],['../classpolicytrain_1_1step_1_1CapturedStep.html#a9b10f3a2f813865ae0043ea5b036ee46',1,'policytrain::step::CapturedStep::capturing()']]],
  ['clear_5fgrad_5fscaling_3',['clear_grad_scaling',['../classpolicytrain_1_1optim_1_1FusedGradScaling.html#ac73866c1cb4ee692ebafd880f56d5852',1,'policytrain::optim::FusedGradScaling']]],
  ['clips_5fby_5fnorm_4',['clips_by_norm',['../classpolicytrain_1_1callbacks_1_1GradClip.html#a4ca358140e32d74a4d20379d2167b755',1,'policytrain::callbacks::GradClip']]],
  ['collect_5fskips_5',['collect_skips',['../classpolicytrain_1_1precision_1_1LossScaler.html#aa1b6b3bb54fb7466e28a80941acbbfa6',1,'policytrain::precision::LossScaler']]],
  ['comm_5fwait_5fseconds_6',['comm_wait_seconds',['../classpolicytrain_1_1parallel_1_1DataParallel.html#a901bfa54984fc49e074e9b8e724ec7f9',1,'policytrain::parallel::DataParallel']]],
  ['connect_7',['connect',['../classpolicytrain_1_1parallel_1_1DataParallel.html#a1d3ebc1573fa919745b20d8f7cc16c18',1,'policytrain::parallel::DataParallel']]],
  ['context_8',['Context',['../classpolicytrain_1_1Context.html#a973ec387397b4fcd52c8e22aaeaec9ef',1,'policytrain::Context']]],
  ['context_9',['context',['../classpolicytrain_1_1Trainer.html#a3f1b0023133e442838d04b91f961d2d7',1,'policytrain::Trainer']]],
  ['cuda_5fin_5fuse_10',['cuda_in_use',['../peak_8hpp.html#ad4b9662337bbadafe2baa389a364469b',1,'policytrain::memory']]],
  ['cuda_5fmemory_5fbudget_11',['cuda_memory_budget',['../auto__batch_8hpp.html#ac30d39dbdb91d6985a4a90ca6a00009d',1,'policytrain::accumulate']]],
  ['cuda_5fpeak_5fallocated_5fbytes_12',['cuda_peak_allocated_bytes',['../peak_8hpp.html#a0066ca0f3502aa49583eec7262997e52',1,'policytrain::memory']]],
  ['cuda_5fpeak_5fbytes_13',['cuda_peak_bytes',['../auto__batch_8hpp.html#a022f3edd7caa7a2c07cf639c64e75006',1,'policytrain::accumulate']]],
  ['current_5frss_5fbytes_14',['current_rss_bytes',['../peak_8hpp.html#ab96db768b087b5ade342beec9f6763ec',1,'policytrain::memory']]]
];
