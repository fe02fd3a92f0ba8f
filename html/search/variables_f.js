var searchData=
[
  ['ramp_5faccumulate_0',['ramp_accumulate',['../structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html#ae691084afea83946be97d9d0e52f5b6d',1,'policytrain::accumulate::NominalBatch::Options']]],
  ['rank_1',['rank',['../structpolicytrain_1_1data_1_1LoaderOptions.html#ac903b184cda90108ff64891e939ec446',1,'policytrain::data::LoaderOptions::rank()'],['../structpolicytrain_1_1parallel_1_1Environment.html#ade3f7c3b53d19fd8a9001f2c22b17c7f',1,'policytrain::parallel::Environment::rank()']]],
  ['readable_2',['readable',['../structpolicytrain_1_1checkpoint_1_1Candidates.html#a7717af16d14e0a1cbe603ce76ecc9155',1,'policytrain::checkpoint::Candidates']]],
  ['recall_3',['recall',['../structpolicytrain_1_1ClassScores.html#ac27ddfce5beb6cc594cc0385af8bb765',1,'policytrain::ClassScores']]],
  ['record_5fshapes_4',['record_shapes',['../structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a5cbe58f577d4df44de8e183f303b5fbd',1,'policytrain::callbacks::Profiler::Options']]],
  ['refresh_5fhz_5',['refresh_hz',['../structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html#ab97edda67c58c7ae807829bfe9153252',1,'policytrain::callbacks::ProgressBar::Options']]],
  ['repeat_6',['repeat',['../structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a49066185de03a75e5df316c0743183ea',1,'policytrain::callbacks::Profiler::Options']]],
  ['restart_5fcount_7',['restart_count',['../structpolicytrain_1_1parallel_1_1Environment.html#ac403182fd6b930002dcd73daa431e260',1,'policytrain::parallel::Environment']]],
  ['resume_8',['resume',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a702af6badef8fd46b8bddefd45efbf64',1,'policytrain::checkpoint::Disk::Options']]],
  ['rng_5fcpu_9',['rng_cpu',['../structpolicytrain_1_1checkpoint_1_1Loaded.html#a950a2a6b6ca266ab653cdae501f29519',1,'policytrain::checkpoint::Loaded']]],
  ['rng_5fcuda_10',['rng_cuda',['../structpolicytrain_1_1checkpoint_1_1Loaded.html#a183b4985c7292604d8e288812b0667ae',1,'policytrain::checkpoint::Loaded']]],
  ['rss_11',['rss',['../structpolicytrain_1_1memory_1_1PeakReading.html#a9db20ff8f1e4ed46f68d7239afe9af89',1,'policytrain::memory::PeakReading']]],
  ['rss_5fwhole_5fprocess_12',['rss_whole_process',['../structpolicytrain_1_1memory_1_1PeakReading.html#aac86b6da7092e3fd5f86ac2f5de0a7a8',1,'policytrain::memory::PeakReading']]],
  ['run_13',['run',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a26ee49bbcc24a63ad4d6231404b265aa',1,'policytrain::checkpoint::Disk::Options']]]
];
