var searchData=
[
  ['val_5findex_0',['val_index',['../structpolicytrain_1_1data_1_1Split.html#a4ed280994e98cb49386b1da14075c9b7',1,'policytrain::data::Split']]],
  ['val_5fx_1',['val_x',['../structpolicytrain_1_1data_1_1Split.html#aa4816816d7ffc4b493d05a85e378b0a1',1,'policytrain::data::Split']]],
  ['val_5fy_2',['val_y',['../structpolicytrain_1_1data_1_1Split.html#a929ac6f7cc976274db0b002d9f2b415d',1,'policytrain::data::Split']]],
  ['validation_3',['validation',['../structpolicytrain_1_1FitResult.html#abaace94739c808d07f178f193d4b69e3',1,'policytrain::FitResult']]],
  ['verbose_4',['verbose',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#ade266fbe63bb829283055a536421f8c4',1,'policytrain::checkpoint::Disk::Options']]],
  ['version_5',['version',['../structpolicytrain_1_1checkpoint_1_1Header.html#a3a992fd663940e86cce99458547078be',1,'policytrain::checkpoint::Header']]]
];
