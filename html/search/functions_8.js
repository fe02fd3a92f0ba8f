var searchData=
[
  ['improves_0',['improves',['../structpolicytrain_1_1Monitor.html#a2c4aa053c3eaef0a333c4439b0be2d54',1,'policytrain::Monitor']]],
  ['index_1',['index',['../classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#af67d1660e7e41bafcc6528608d29b94f',1,'policytrain::data::PrefetchLoader::iterator']]],
  ['indices_2',['indices',['../classpolicytrain_1_1data_1_1TensorLoader.html#a612a6c07b03c1547bc680a55abf52a53',1,'policytrain::data::TensorLoader']]],
  ['inner_3',['inner',['../classpolicytrain_1_1memory_1_1RecomputedImpl.html#af1674340e67f7d8a6027cb0901d56a63',1,'policytrain::memory::RecomputedImpl']]],
  ['is_5flast_5fmicro_5fstep_4',['is_last_micro_step',['../classpolicytrain_1_1Context.html#af6d3dedbbbf8738c6bc398f5c6a78f05',1,'policytrain::Context']]],
  ['is_5fmain_5',['is_main',['../classpolicytrain_1_1Context.html#a7f3f84a1cd928fe5512be1a505275e20',1,'policytrain::Context::is_main()'],['../classpolicytrain_1_1parallel_1_1DataParallel.html#a5d2e5c3674965d12c740cba202d5cd56',1,'policytrain::parallel::DataParallel::is_main() const'],['../classpolicytrain_1_1parallel_1_1DataParallel.html#a8b397ba3c54e07b0a747de4c5aa9008b',1,'policytrain::parallel::DataParallel::is_main()'],['../classpolicytrain_1_1Trainer.html#a6f823fdf624920419f6dff1210b28c2b',1,'policytrain::Trainer::is_main()']]],
  ['iterator_6',['iterator',['../classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#a1ce84c894a961b87a2e85a63c542818e',1,'policytrain::data::TensorLoader::iterator::iterator()=default'],['../classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html#a99d1804c4552eabdecbea00ca033f8e9',1,'policytrain::data::TensorLoader::iterator::iterator(const TensorLoader *l, size_t i)'],['../classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html#aee566c40a607fb79113861979ed6926c',1,'policytrain::data::PrefetchLoader::iterator::iterator()']]]
];
