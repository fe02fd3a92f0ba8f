var searchData=
[
  ['unit_0',['unit',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a915747c708aaf168ecfb9712b9838193',1,'policytrain::schedule::LrOptions']]],
  ['unreadable_1',['unreadable',['../structpolicytrain_1_1checkpoint_1_1Candidates.html#af72c69786fc56cf07ff2c093248790ea',1,'policytrain::checkpoint::Candidates']]]
];
