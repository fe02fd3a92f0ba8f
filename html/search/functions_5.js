var searchData=
[
  ['fallbacks_0',['fallbacks',['../classpolicytrain_1_1step_1_1CapturedStep.html#a5768fd037c24f8cc3ba086f6d3f7bdc3',1,'policytrain::step::CapturedStep']]],
  ['fashion_5fmnist_5flabels_1',['fashion_mnist_labels',['../fashion__mnist_8hpp.html#ae354987acda557174bef6ce9a0683372',1,'policytrain::data']]],
  ['file_2',['file',['../classpolicytrain_1_1callbacks_1_1TensorBoard.html#aad87b989b7cc2bf010e1fe21312f68c4',1,'policytrain::callbacks::TensorBoard']]],
  ['files_5fwritten_3',['files_written',['../classpolicytrain_1_1checkpoint_1_1Disk.html#aa1b8ac46400fd41179d47ea2a50a6baa',1,'policytrain::checkpoint::Disk']]],
  ['fingerprint_4',['fingerprint',['../classpolicytrain_1_1checkpoint_1_1Disk.html#a54e653978a5176fe94ca6b344caa56d0',1,'policytrain::checkpoint::Disk::fingerprint() const'],['../classpolicytrain_1_1checkpoint_1_1Disk.html#aa7219a5dd3fc8ee5ec78bad86a52abf7',1,'policytrain::checkpoint::Disk::fingerprint(Ctx &amp;ctx) const']]],
  ['fingerprint_5fdifferences_5',['fingerprint_differences',['../disk_8hpp.html#a3bbf89a57e54dd67aca858e4aab74af0',1,'policytrain::checkpoint']]],
  ['fit_6',['fit',['../classpolicytrain_1_1Trainer.html#ab6c67e56095aa3608bb6adcbd09c79fd',1,'policytrain::Trainer::fit(TrainData &amp;train, const FitOptions &amp;options={})'],['../classpolicytrain_1_1Trainer.html#a2b5c51496d7db7de48d23c13b9f48d12',1,'policytrain::Trainer::fit(TrainData &amp;train, ValData &amp;val, const FitOptions &amp;options={})']]],
  ['fit_5fauto_5fbatch_7',['fit_auto_batch',['../auto__batch_8hpp.html#aea2dd0faa65cbe16e2dd6d7996a503ba',1,'policytrain::accumulate']]],
  ['flush_5fchecks_8',['flush_checks',['../classpolicytrain_1_1Context.html#a43229ce2956c89167a01ba389e042c5f',1,'policytrain::Context::flush_checks()'],['../classpolicytrain_1_1precision_1_1Autocast.html#aded7c80ac93b590a9aacc4f78f38d8ea',1,'policytrain::precision::Autocast::flush_checks()'],['../structpolicytrain_1_1precision_1_1Fp32.html#a9ac5c265f3c108c4e373ae0cc0481d77',1,'policytrain::precision::Fp32::flush_checks()']]],
  ['for_5feach_5fpolicy_9',['for_each_policy',['../classpolicytrain_1_1Trainer.html#a7737fce441fc22a974e3dbc3898a82e7',1,'policytrain::Trainer']]],
  ['forward_10',['forward',['../classpolicytrain_1_1callbacks_1_1StepPhases.html#a315f28442a83672cb1fb02ca85562a8a',1,'policytrain::callbacks::StepPhases::forward()'],['../classpolicytrain_1_1memory_1_1RecomputedImpl.html#aefbeccc6d35b865134698215f1279bd6',1,'policytrain::memory::RecomputedImpl::forward()']]],
  ['found_5finf_11',['found_inf',['../classpolicytrain_1_1precision_1_1LossScaler.html#ad0f31bda997291740956042a4d38945b',1,'policytrain::precision::LossScaler::found_inf()'],['../classpolicytrain_1_1optim_1_1FusedGradScaling.html#a8f8683813dfa21a693fbaedd3c3f5c69',1,'policytrain::optim::FusedGradScaling::found_inf()']]],
  ['fp32_12',['Fp32',['../structpolicytrain_1_1precision_1_1Fp32.html#af68abb8bcb5a0ab458aab6bead0f26b7',1,'policytrain::precision::Fp32::Fp32()=default'],['../structpolicytrain_1_1precision_1_1Fp32.html#ac9419b8cbff14d7fef5a9631b38e59f2',1,'policytrain::precision::Fp32::Fp32(NonFinite on_nonfinite)']]],
  ['free_5fport_13',['free_port',['../launch_8hpp.html#a36d55a82c743566e4944f9650fb655d8',1,'policytrain::parallel']]],
  ['from_5fconfusion_14',['from_confusion',['../structpolicytrain_1_1ClassificationReport.html#abf2281dc78c329c63f8b964535c58b19',1,'policytrain::ClassificationReport']]],
  ['from_5fenv_15',['from_env',['../structpolicytrain_1_1parallel_1_1Environment.html#a4baea8c495bc0eea0117dcc3be38ec34',1,'policytrain::parallel::Environment']]]
];
