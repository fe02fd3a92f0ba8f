var searchData=
[
  ['padding_0',['padding',['../classpolicytrain_1_1data_1_1PrefetchLoader.html#a7f84fccb747d96291d36088ee97c95c3',1,'policytrain::data::PrefetchLoader::padding()'],['../classpolicytrain_1_1data_1_1TensorLoader.html#a15c653d78ef5af134e6570635c094e5d',1,'policytrain::data::TensorLoader::padding()']]],
  ['params_5fsha256_1',['params_sha256',['../digest_8hpp.html#a96d25f54fa73ac579dcd5a2bdc2b2504',1,'policytrain::io']]],
  ['parse_5ffile_2',['parse_file',['../format_8hpp.html#ae9addab4c5af33c3cde28dd0bd1344a3',1,'policytrain::checkpoint']]],
  ['parse_5fheader_3',['parse_header',['../format_8hpp.html#a409dfccc82dc6624ab56672d6d38e6a3',1,'policytrain::checkpoint']]],
  ['parse_5fmode_4',['parse_mode',['../monitor_8hpp.html#a6abf4d508b16a4a09897525c93c19135',1,'policytrain']]],
  ['payload_5',['payload',['../structpolicytrain_1_1checkpoint_1_1RawFile.html#a9ec8c7a7b6312ee427f7fdfadb2df1b4',1,'policytrain::checkpoint::RawFile']]],
  ['peak_6',['peak',['../classpolicytrain_1_1memory_1_1TensorBytesMeter.html#ae21588669d65565b1c549285bfa66d21',1,'policytrain::memory::TensorBytesMeter']]],
  ['peak_5fmemory_7',['peak_memory',['../classpolicytrain_1_1callbacks_1_1MetricsLog.html#a1f65bdcd370d14398c478b17aaf88150',1,'policytrain::callbacks::MetricsLog']]],
  ['peak_5frss_5fbytes_8',['peak_rss_bytes',['../peak_8hpp.html#a4e869ff26afe72b03c6ade4709f4c543',1,'policytrain::memory']]],
  ['perfknobs_9',['PerfKnobs',['../classpolicytrain_1_1callbacks_1_1PerfKnobs.html#a2f725451f47f3e50e65df90782e265f5',1,'policytrain::callbacks::PerfKnobs']]],
  ['plan_10',['plan',['../classpolicytrain_1_1accumulate_1_1AutoBatch.html#a741f01be5fd0e321cd81444dc6b40f61',1,'policytrain::accumulate::AutoBatch']]],
  ['plateau_5ffactor_11',['plateau_factor',['../classpolicytrain_1_1schedule_1_1Lr.html#a121e19bfb4387f3d60077f6548ee931b',1,'policytrain::schedule::Lr']]],
  ['policy_12',['policy',['../classpolicytrain_1_1Context.html#a6144f42aaf5d3bed8e5fab2d151471d5',1,'policytrain::Context::policy()'],['../classpolicytrain_1_1Trainer.html#ad1b31110f499c5917ffbe09a31d8cfa1',1,'policytrain::Trainer::policy()']]],
  ['policy_5fname_13',['policy_name',['../category_8hpp.html#a06fd6f20a189a868aa466698b6ad4316',1,'policytrain']]],
  ['prefetch_5foptions_14',['prefetch_options',['../classpolicytrain_1_1data_1_1PrefetchLoader.html#acb93afe89b28ba308716d5df12e3cdde',1,'policytrain::data::PrefetchLoader']]],
  ['prefetchloader_15',['PrefetchLoader',['../classpolicytrain_1_1data_1_1PrefetchLoader.html#a77c762bd678863ad2054f016d7a784df',1,'policytrain::data::PrefetchLoader']]],
  ['prepare_5fcapture_16',['prepare_capture',['../classpolicytrain_1_1precision_1_1LossScaler.html#a12376893f50c2d12a44905aa0c303bd1',1,'policytrain::precision::LossScaler::prepare_capture()'],['../structpolicytrain_1_1precision_1_1Fp32.html#a0506e640fbcf673a1485cd87cc81cac8',1,'policytrain::precision::Fp32::prepare_capture()'],['../classpolicytrain_1_1precision_1_1Autocast.html#ad9d80cd7264f93dc9db0bdf948a11c0d',1,'policytrain::precision::Autocast::prepare_capture()'],['../classpolicytrain_1_1Context.html#a348c68aa5b36bcb30df7817ad7381699',1,'policytrain::Context::prepare_capture()']]],
  ['prepare_5freplay_17',['prepare_replay',['../classpolicytrain_1_1optim_1_1GraphReplayable.html#a836c6cf1bd4bce625b44e8330ca244c4',1,'policytrain::optim::GraphReplayable::prepare_replay()'],['../classpolicytrain_1_1optim_1_1FusedSgd.html#a1ee2e8dc526bc3dd0dbb5c301ff4b060',1,'policytrain::optim::FusedSgd::prepare_replay()']]],
  ['probes_18',['probes',['../classpolicytrain_1_1accumulate_1_1AutoBatch.html#ab501386d9a020727bd6e1fda2ab0426d',1,'policytrain::accumulate::AutoBatch']]],
  ['profiler_19',['Profiler',['../classpolicytrain_1_1callbacks_1_1Profiler.html#a300d79442bcbb79429058e45fc2c8a5d',1,'policytrain::callbacks::Profiler::Profiler(Options o)'],['../classpolicytrain_1_1callbacks_1_1Profiler.html#af46c1842fd01f0e4cf56411a9648dbcb',1,'policytrain::callbacks::Profiler::Profiler(Profiler &amp;&amp;o) noexcept']]],
  ['progressbar_20',['ProgressBar',['../classpolicytrain_1_1callbacks_1_1ProgressBar.html#a405b903ea63578fea4191021278260e7',1,'policytrain::callbacks::ProgressBar']]]
];
