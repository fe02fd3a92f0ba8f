var searchData=
[
  ['on_5fnonfinite_0',['on_nonfinite',['../structpolicytrain_1_1precision_1_1Autocast_1_1Options.html#ab025e8f46b336d764b730ab5b513d17e',1,'policytrain::precision::Autocast::Options::on_nonfinite()'],['../structpolicytrain_1_1precision_1_1Fp32.html#ad383407c2ef5ad61ac2eca0ebc40db6e',1,'policytrain::precision::Fp32::on_nonfinite()']]],
  ['optimizer_1',['optimizer',['../structpolicytrain_1_1checkpoint_1_1Loaded.html#a3284cfd2d89f0e78d93a376c0205b701',1,'policytrain::checkpoint::Loaded']]],
  ['out_2',['out',['../structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html#ac0d7bcb25b963c4c8351f13bf2e8fa3d',1,'policytrain::callbacks::MetricsLog::Options::out()'],['../structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html#a8f82972ac230253d5e813e9006e37659',1,'policytrain::callbacks::Profiler::Options::out()'],['../structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html#a1d941433f991d13ee7e216575ba67ec2',1,'policytrain::callbacks::ProgressBar::Options::out()'],['../structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html#aa3f70156e207a12662319106c522966c',1,'policytrain::callbacks::TensorBoard::Options::out()']]],
  ['output_3',['output',['../structpolicytrain_1_1Prediction.html#a1ddb42a6bc88c73ba208bb0f7498e89f',1,'policytrain::Prediction']]]
];
