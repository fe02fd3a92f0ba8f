var searchData=
[
  ['table_5frows_0',['table_rows',['../structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#aec704086d8ff8ceb34f1692d7c298ec6',1,'policytrain::callbacks::Profiler::Options']]],
  ['tau_1',['tau',['../structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html#a60871db6fbe19b08a1bd3a7824fe1efa',1,'policytrain::callbacks::Ema::Options']]],
  ['tf32_2',['tf32',['../structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#af3a86a4dc85213e21ce3cb051e89e3b6',1,'policytrain::callbacks::PerfKnobs::Options']]],
  ['three_5fphase_3',['three_phase',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a643cac6a9c3b68892179279e2e7fc5d5',1,'policytrain::schedule::LrOptions']]],
  ['threshold_4',['threshold',['../structpolicytrain_1_1schedule_1_1LrOptions.html#aba8d51131a9a2c773cfdbb92845929c1',1,'policytrain::schedule::LrOptions']]],
  ['threshold_5fmode_5',['threshold_mode',['../structpolicytrain_1_1schedule_1_1LrOptions.html#ababfa7a6c0974368e5b89d8fc03b850b',1,'policytrain::schedule::LrOptions']]],
  ['timeout_6',['timeout',['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html#ad5055d86d94c5e2d2033dcec26827773',1,'policytrain::parallel::DataParallelOptions']]],
  ['top_5fk_7',['top_k',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a0405123b5b38ea3b719ee3636d56750f',1,'policytrain::checkpoint::Disk::Options']]],
  ['total_8',['total',['../structpolicytrain_1_1ClassificationReport.html#a7e2fabd16a5eab0c789f45e50f15dd5c',1,'policytrain::ClassificationReport']]],
  ['total_5fsteps_9',['total_steps',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a8652cc6a2815beb6b80d47c62397a130',1,'policytrain::schedule::LrOptions::total_steps()'],['../structpolicytrain_1_1schedule_1_1Horizon.html#a98a66bbe7f99b92914072f165cf7482a',1,'policytrain::schedule::Horizon::total_steps()']]],
  ['train_5findex_10',['train_index',['../structpolicytrain_1_1data_1_1Split.html#a196a2843d7bc540a6b82e9a1c42045f7',1,'policytrain::data::Split']]],
  ['train_5fseconds_11',['train_seconds',['../structpolicytrain_1_1FitResult.html#a1c9bb26279aea02cf87115e85a01eeb7',1,'policytrain::FitResult']]],
  ['train_5fx_12',['train_x',['../structpolicytrain_1_1data_1_1Split.html#a67b23c0ca1e092f18a7d5903ff5c8f2c',1,'policytrain::data::Split']]],
  ['train_5fy_13',['train_y',['../structpolicytrain_1_1data_1_1Split.html#a5feb43d216c07a8046dfcc14d3205a8a',1,'policytrain::data::Split']]],
  ['type_14',['type',['../structpolicytrain_1_1data_1_1IdxData.html#ae076c8ea11d89fd951d3d4168db526b7',1,'policytrain::data::IdxData']]]
];
