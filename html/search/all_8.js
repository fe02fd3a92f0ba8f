var searchData=
[
  ['idx_2ehpp_0',['idx.hpp',['../idx_8hpp.html',1,'']]],
  ['idx_5fformat_2ehpp_1',['idx_format.hpp',['../idx__format_8hpp.html',1,'']]],
  ['idxdata_2',['IdxData',['../structpolicytrain_1_1data_1_1IdxData.html',1,'policytrain::data']]],
  ['idxerror_3',['IdxError',['../structpolicytrain_1_1data_1_1IdxError.html',1,'policytrain::data']]],
  ['ignore_4',['ignore',['../fp32_8hpp.html#a0661a7ef33270b29179943eddba1e201a567bc1d268f135496de3d5b946b691f3',1,'policytrain']]],
  ['imagelabels_5',['ImageLabels',['../structpolicytrain_1_1data_1_1ImageLabels.html',1,'policytrain::data']]],
  ['images_6',['images',['../structpolicytrain_1_1data_1_1ImageLabels.html#a09e2c45b3fc45add337ccf928851083b',1,'policytrain::data::ImageLabels']]],
  ['impl_7',['Impl',['../classpolicytrain_1_1memory_1_1Recomputed.html#aeea00e0fe31a94d27439d46d0d221828',1,'policytrain::memory::Recomputed']]],
  ['improves_8',['improves',['../structpolicytrain_1_1Monitor.html#a2c4aa053c3eaef0a333c4439b0be2d54',1,'policytrain::Monitor']]],
  ['index_9',['index',['../classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#af67d1660e7e41bafcc6528608d29b94f',1,'policytrain::data::PrefetchLoader::iterator']]],
  ['indices_10',['indices',['../classpolicytrain_1_1data_1_1TensorLoader.html#a612a6c07b03c1547bc680a55abf52a53',1,'policytrain::data::TensorLoader']]],
  ['init_5fscale_11',['init_scale',['../structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html#aebbb07fb603fcfd30b520fca5bf0b2ae',1,'policytrain::precision::LossScaler::Options']]],
  ['inner_12',['inner',['../classpolicytrain_1_1memory_1_1RecomputedImpl.html#af1674340e67f7d8a6027cb0901d56a63',1,'policytrain::memory::RecomputedImpl']]],
  ['interop_5fthreads_13',['interop_threads',['../structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#afcf66218194f36916315534a86e3b378',1,'policytrain::callbacks::PerfKnobs::Options']]],
  ['interpolate_14',['interpolate',['../lr_8hpp.html#a06826186c0f78b2c2448804bd496207daa38db99c73ac1258e03067286e3f4e02',1,'policytrain::schedule']]],
  ['intra_5fthreads_15',['intra_threads',['../structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html#a3e61f64930fddf84107f568c8c511f57',1,'policytrain::callbacks::PerfKnobs::Options']]],
  ['is_5flast_5fmicro_5fstep_16',['is_last_micro_step',['../classpolicytrain_1_1Context.html#af6d3dedbbbf8738c6bc398f5c6a78f05',1,'policytrain::Context']]],
  ['is_5fmain_17',['is_main',['../classpolicytrain_1_1Context.html#a7f3f84a1cd928fe5512be1a505275e20',1,'policytrain::Context::is_main()'],['../classpolicytrain_1_1parallel_1_1DataParallel.html#a5d2e5c3674965d12c740cba202d5cd56',1,'policytrain::parallel::DataParallel::is_main() const'],['../classpolicytrain_1_1parallel_1_1DataParallel.html#a8b397ba3c54e07b0a747de4c5aa9008b',1,'policytrain::parallel::DataParallel::is_main()'],['../classpolicytrain_1_1Trainer.html#a6f823fdf624920419f6dff1210b28c2b',1,'policytrain::Trainer::is_main()']]],
  ['iterator_18',['iterator',['../classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#a1ce84c894a961b87a2e85a63c542818e',1,'policytrain::data::TensorLoader::iterator::iterator()=default'],['../classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#a99d1804c4552eabdecbea00ca033f8e9',1,'policytrain::data::TensorLoader::iterator::iterator(const TensorLoader *l, size_t i)'],['../classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#aee566c40a607fb79113861979ed6926c',1,'policytrain::data::PrefetchLoader::iterator::iterator()'],['../classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html',1,'policytrain::data::PrefetchLoader::iterator'],['../classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html',1,'policytrain::data::TensorLoader::iterator']]]
];
