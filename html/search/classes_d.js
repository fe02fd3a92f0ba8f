var searchData=
[
  ['peakmemory_0',['PeakMemory',['../classpolicytrain_1_1memory_1_1PeakMemory.html',1,'policytrain::memory']]],
  ['peakreading_1',['PeakReading',['../structpolicytrain_1_1memory_1_1PeakReading.html',1,'policytrain::memory']]],
  ['perfknobs_2',['PerfKnobs',['../classpolicytrain_1_1callbacks_1_1PerfKnobs.html',1,'policytrain::callbacks']]],
  ['phasetimes_3',['PhaseTimes',['../structpolicytrain_1_1callbacks_1_1PhaseTimes.html',1,'policytrain::callbacks']]],
  ['prediction_4',['Prediction',['../structpolicytrain_1_1Prediction.html',1,'policytrain']]],
  ['prefetchloader_5',['PrefetchLoader',['../classpolicytrain_1_1data_1_1PrefetchLoader.html',1,'policytrain::data']]],
  ['prefetchoptions_6',['PrefetchOptions',['../structpolicytrain_1_1data_1_1PrefetchOptions.html',1,'policytrain::data']]],
  ['probe_7',['Probe',['../structpolicytrain_1_1accumulate_1_1Probe.html',1,'policytrain::accumulate']]],
  ['profiler_8',['Profiler',['../classpolicytrain_1_1callbacks_1_1Profiler.html',1,'policytrain::callbacks']]],
  ['profileropstats_9',['ProfilerOpStats',['../structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html',1,'policytrain::callbacks']]],
  ['progressbar_10',['ProgressBar',['../classpolicytrain_1_1callbacks_1_1ProgressBar.html',1,'policytrain::callbacks']]]
];
