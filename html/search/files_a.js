var searchData=
[
  ['metrics_2ehpp_0',['metrics.hpp',['../metrics_8hpp.html',1,'']]],
  ['metrics_5flog_2ehpp_1',['metrics_log.hpp',['../metrics__log_8hpp.html',1,'']]],
  ['monitor_2ehpp_2',['monitor.hpp',['../monitor_8hpp.html',1,'']]]
];
