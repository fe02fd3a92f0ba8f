var searchData=
[
  ['p_0',['p',['../structpolicytrain_1_1callbacks_1_1GradClip_1_1Options.html#ae97a5a3cc7c6e041929c392b8ed219f8',1,'policytrain::callbacks::GradClip::Options']]],
  ['patience_1',['patience',['../structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html#a6232365ac6ef64c57182f026d8b4ed40',1,'policytrain::callbacks::EarlyStopping::Options::patience()'],['../structpolicytrain_1_1schedule_1_1LrOptions.html#a84fcac1979dc8289cecfd5b103042f24',1,'policytrain::schedule::LrOptions::patience()']]],
  ['payload_5fcrc_2',['payload_crc',['../structpolicytrain_1_1checkpoint_1_1Header.html#a7ae4f7d390a525292d1ab581a8bb5c13',1,'policytrain::checkpoint::Header']]],
  ['payload_5foffset_3',['payload_offset',['../structpolicytrain_1_1checkpoint_1_1RawFile.html#a65d0b58fcae5075a14f8f6ec50bac667',1,'policytrain::checkpoint::RawFile']]],
  ['payload_5fsize_4',['payload_size',['../structpolicytrain_1_1checkpoint_1_1Header.html#a6a0dcf27036d5f956bfa7876e915fd3a',1,'policytrain::checkpoint::Header']]],
  ['pct_5fstart_5',['pct_start',['../structpolicytrain_1_1schedule_1_1LrOptions.html#af494b97f6f01afbef97cd726ffe9b1e2',1,'policytrain::schedule::LrOptions']]],
  ['peak_5fbytes_6',['peak_bytes',['../structpolicytrain_1_1accumulate_1_1Probe.html#a64352731af7a7534a10947f8c3b7dddb',1,'policytrain::accumulate::Probe']]],
  ['plateau_5feps_7',['plateau_eps',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a4299bacb8212d1dc60e14e3a0f777986',1,'policytrain::schedule::LrOptions']]],
  ['power_8',['power',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a704a0c2713bf1ed3a05c1a31c42432b8',1,'policytrain::schedule::LrOptions']]],
  ['precision_9',['precision',['../structpolicytrain_1_1ClassScores.html#a793ec1608b6ab540fa2bd949975e085d',1,'policytrain::ClassScores']]],
  ['prefetch_10',['prefetch',['../structpolicytrain_1_1data_1_1PrefetchOptions.html#a2329eff029f7eecea1508925771a243c',1,'policytrain::data::PrefetchOptions']]],
  ['print_5fsummary_11',['print_summary',['../structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html#a2f7f3563da2b7108bd6a2b9c92a749fd',1,'policytrain::callbacks::MetricsLog::Options']]],
  ['profile_5fmemory_12',['profile_memory',['../structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a09baa1b6b4653ab5e8199f0fb00090bc',1,'policytrain::callbacks::Profiler::Options']]],
  ['program_13',['program',['../structpolicytrain_1_1parallel_1_1LaunchOptions.html#a2acac7e4a439e37f69cb7e041813d5d5',1,'policytrain::parallel::LaunchOptions']]]
];
