var searchData=
[
  ['images_0',['images',['../structpolicytrain_1_1data_1_1ImageLabels.html#a09e2c45b3fc45add337ccf928851083b',1,'policytrain::data::ImageLabels']]],
  ['init_5fscale_1',['init_scale',['../structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html#aebbb07fb603fcfd30b520fca5bf0b2ae',1,'policytrain::precision::LossScaler::Options']]],
  ['interop_5fthreads_2',['interop_threads',['../structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#afcf66218194f36916315534a86e3b378',1,'policytrain::callbacks::PerfKnobs::Options']]],
  ['intra_5fthreads_3',['intra_threads',['../structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#a3e61f64930fddf84107f568c8c511f57',1,'policytrain::callbacks::PerfKnobs::Options']]]
];
