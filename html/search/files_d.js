var searchData=
[
  ['parallel_2ehpp_0',['parallel.hpp',['../parallel_8hpp.html',1,'']]],
  ['parameters_2ehpp_1',['parameters.hpp',['../parameters_8hpp.html',1,'']]],
  ['peak_2ehpp_2',['peak.hpp',['../peak_8hpp.html',1,'']]],
  ['perf_5fknobs_2ehpp_3',['perf_knobs.hpp',['../perf__knobs_8hpp.html',1,'']]],
  ['policytrain_2ehpp_4',['policytrain.hpp',['../policytrain_8hpp.html',1,'']]],
  ['prefetch_5floader_2ehpp_5',['prefetch_loader.hpp',['../prefetch__loader_8hpp.html',1,'']]],
  ['profiler_2ehpp_6',['profiler.hpp',['../profiler_8hpp.html',1,'']]],
  ['progress_5fbar_2ehpp_7',['progress_bar.hpp',['../progress__bar_8hpp.html',1,'']]]
];
