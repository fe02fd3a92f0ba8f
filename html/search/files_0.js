var searchData=
[
  ['all_2ehpp_0',['all.hpp',['../all_8hpp.html',1,'']]],
  ['archive_2ehpp_1',['archive.hpp',['../archive_8hpp.html',1,'']]],
  ['auto_5fbatch_2ehpp_2',['auto_batch.hpp',['../auto__batch_8hpp.html',1,'']]],
  ['autocast_2ehpp_3',['autocast.hpp',['../autocast_8hpp.html',1,'']]],
  ['autocast_5fguard_2ehpp_4',['autocast_guard.hpp',['../autocast__guard_8hpp.html',1,'']]]
];
