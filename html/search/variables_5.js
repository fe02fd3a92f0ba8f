var searchData=
[
  ['f1_0',['f1',['../structpolicytrain_1_1ClassScores.html#ac728dbef5d68ecd02b30b1910b5deb04',1,'policytrain::ClassScores']]],
  ['factor_1',['factor',['../structpolicytrain_1_1schedule_1_1LrOptions.html#ab84896a806cf503b960f013215a61c82',1,'policytrain::schedule::LrOptions']]],
  ['file_2',['file',['../structpolicytrain_1_1checkpoint_1_1Loaded.html#a6e57d0c73726b1127f8131180dfb0ef2',1,'policytrain::checkpoint::Loaded']]],
  ['fill_3',['fill',['../structpolicytrain_1_1data_1_1AugmentOptions.html#afaefd5af607e6b2d771055de7f4b36a8',1,'policytrain::data::AugmentOptions']]],
  ['find_5funused_5fparameters_4',['find_unused_parameters',['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html#ad12548aab4d8d396f1187f8d2cb8f52e',1,'policytrain::parallel::DataParallelOptions']]],
  ['first_5fbucket_5fmb_5',['first_bucket_mb',['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a8c0e44519555c64009ddf00814ac649a',1,'policytrain::parallel::DataParallelOptions']]],
  ['fits_6',['fits',['../structpolicytrain_1_1accumulate_1_1Probe.html#a7c64b6a832dee73259f18dcaddca40af',1,'policytrain::accumulate::Probe']]],
  ['force_5ftty_7',['force_tty',['../structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html#a9966099db8e97d748eb11e0edf49a19d',1,'policytrain::callbacks::ProgressBar::Options']]],
  ['forward_8',['forward',['../structpolicytrain_1_1callbacks_1_1PhaseTimes.html#a3757ec07c0cdd6bb12d27cc0e40c9586',1,'policytrain::callbacks::PhaseTimes']]]
];
