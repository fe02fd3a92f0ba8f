var searchData=
[
  ['fitoptions_0',['FitOptions',['../structpolicytrain_1_1FitOptions.html',1,'policytrain']]],
  ['fitresult_1',['FitResult',['../structpolicytrain_1_1FitResult.html',1,'policytrain']]],
  ['fp32_2',['Fp32',['../structpolicytrain_1_1precision_1_1Fp32.html',1,'policytrain::precision']]],
  ['fusedadam_3',['FusedAdam',['../classpolicytrain_1_1optim_1_1FusedAdam.html',1,'policytrain::optim']]],
  ['fusedadamw_4',['FusedAdamW',['../classpolicytrain_1_1optim_1_1FusedAdamW.html',1,'policytrain::optim']]],
  ['fusedgradscaling_5',['FusedGradScaling',['../classpolicytrain_1_1optim_1_1FusedGradScaling.html',1,'policytrain::optim']]],
  ['fusedsgd_6',['FusedSgd',['../classpolicytrain_1_1optim_1_1FusedSgd.html',1,'policytrain::optim']]]
];
