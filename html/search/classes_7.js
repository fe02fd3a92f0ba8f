var searchData=
[
  ['header_0',['Header',['../structpolicytrain_1_1checkpoint_1_1Header.html',1,'policytrain::checkpoint']]],
  ['horizon_1',['Horizon',['../structpolicytrain_1_1schedule_1_1Horizon.html',1,'policytrain::schedule']]]
];
