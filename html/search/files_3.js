var searchData=
[
  ['data_5fparallel_2ehpp_0',['data_parallel.hpp',['../data__parallel_8hpp.html',1,'']]],
  ['datasets_2ehpp_1',['datasets.hpp',['../datasets_8hpp.html',1,'']]],
  ['digest_2ehpp_2',['digest.hpp',['../digest_8hpp.html',1,'']]],
  ['disk_2ehpp_3',['disk.hpp',['../disk_8hpp.html',1,'']]],
  ['divergence_5frollback_2ehpp_4',['divergence_rollback.hpp',['../divergence__rollback_8hpp.html',1,'']]]
];
