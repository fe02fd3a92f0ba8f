var searchData=
[
  ['element_5fsize_0',['element_size',['../structpolicytrain_1_1data_1_1IdxData.html#a17df50befc924eb11a6b14dde9488a5e',1,'policytrain::data::IdxData']]],
  ['enabled_1',['enabled',['../structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html#a7b1a7dd4d8789f525f3e28ff4e28de16',1,'policytrain::callbacks::DivergenceRollback::Options::enabled()'],['../structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#ac073be89058e871a5d77162ebe8a44a5',1,'policytrain::callbacks::EarlyStopping::Options::enabled()'],['../structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html#a0ad73745fb496e32df9dd9338ca4a68c',1,'policytrain::callbacks::Ema::Options::enabled()'],['../structpolicytrain_1_1data_1_1AugmentOptions.html#a969f57bfb128a0711cfd39d40c3b2568',1,'policytrain::data::AugmentOptions::enabled()'],['../structpolicytrain_1_1data_1_1NormalizeOptions.html#a70dd35f9e71dc129fc46b5e07a5305f7',1,'policytrain::data::NormalizeOptions::enabled()'],['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html#afe7988b0adffb1429cffde97c2a982b7',1,'policytrain::parallel::DataParallelOptions::enabled()']]],
  ['end_2',['end',['../structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span.html#ad4176cd4414f90e667fa310c8abf0675',1,'policytrain::callbacks::StepPhases::Span']]],
  ['env_3',['env',['../structpolicytrain_1_1parallel_1_1LaunchOptions.html#a16fcbb968adff4fbe5aa8204541a6a1d',1,'policytrain::parallel::LaunchOptions']]],
  ['environ_4',['environ',['../launch_8hpp.html#aa006daaf11f1e2e45a6ababaf463212b',1,'launch.hpp']]],
  ['epoch_5',['epoch',['../structpolicytrain_1_1TrainState.html#a87ffaae9a6cd71ef72e81a35a22610d3',1,'policytrain::TrainState']]],
  ['epochs_6',['epochs',['../structpolicytrain_1_1FitOptions.html#a2f860966c079ead30befcb0e8d40b24e',1,'policytrain::FitOptions']]],
  ['epochs_5frun_7',['epochs_run',['../structpolicytrain_1_1FitResult.html#ab1b3db65259c5d76e114aae6dfcc0cd6',1,'policytrain::FitResult']]],
  ['every_8',['every',['../structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html#ad2e763499f61c0e23bcaea00724132fa',1,'policytrain::callbacks::MetricsLog::Options::every()'],['../structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html#aaef5d56378da3478fa56ab31b6c7357b',1,'policytrain::callbacks::ProgressBar::Options::every()'],['../structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#a1e1857a866ccf271802889bed06fe700',1,'policytrain::callbacks::TensorBoard::Options::every()']]],
  ['every_5fepochs_9',['every_epochs',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a39f7013ea90b12bbc6f6df574b099daf',1,'policytrain::checkpoint::Disk::Options']]],
  ['every_5fseconds_10',['every_seconds',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#ac9ec708a5195bd52a935d7d254afb5e0',1,'policytrain::checkpoint::Disk::Options']]],
  ['every_5fsteps_11',['every_steps',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#abb1c2cb8fc02473c6cbbb9188cbc88f0',1,'policytrain::checkpoint::Disk::Options']]],
  ['export_5ffinal_12',['export_final',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a0627e6fb2acd63563229d5e2d3b7f30a',1,'policytrain::checkpoint::Disk::Options']]],
  ['extra_13',['extra',['../structpolicytrain_1_1Metrics.html#af128242c8655f9068a1f08c57bab2cff',1,'policytrain::Metrics']]]
];
