var searchData=
[
  ['backend_0',['backend',['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a616fadc3cc813227c738ae488fe6847e',1,'policytrain::parallel::DataParallelOptions']]],
  ['backoff_5ffactor_1',['backoff_factor',['../structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html#a906cfc8ce3d9d45e8ae1f9ea9aa6a879',1,'policytrain::precision::LossScaler::Options']]],
  ['backward_2',['backward',['../structpolicytrain_1_1callbacks_1_1PhaseTimes.html#affa06c9ff82dc3799561c1ec2bac8592',1,'policytrain::callbacks::PhaseTimes']]],
  ['base_5fmomentum_3',['base_momentum',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a37f14332e92ec8dc260032c059e712fd',1,'policytrain::schedule::LrOptions']]],
  ['batch_4',['batch',['../structpolicytrain_1_1accumulate_1_1Probe.html#add005bbcdb718d5bcdba6587b917aa1c',1,'policytrain::accumulate::Probe::batch()'],['../structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html#a5878bc741dbe6f5dd7012b00d482d840',1,'policytrain::accumulate::NominalBatch::Options::batch()']]],
  ['batch_5fin_5fepoch_5',['batch_in_epoch',['../structpolicytrain_1_1TrainState.html#a0f83b120fd8f2df9c1ef4d7910a49526',1,'policytrain::TrainState']]],
  ['batch_5fsize_6',['batch_size',['../structpolicytrain_1_1checkpoint_1_1RunInfo.html#a01c340253543085133f9dfa3cb507515',1,'policytrain::checkpoint::RunInfo::batch_size()'],['../structpolicytrain_1_1data_1_1LoaderOptions.html#a80224bc0043aa1a22c28952ff654e057',1,'policytrain::data::LoaderOptions::batch_size()']]],
  ['begin_7',['begin',['../structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span.html#ab56cb03bb025f2c3a118ac75ec75c09e',1,'policytrain::callbacks::StepPhases::Span']]],
  ['best_8',['best',['../structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html#a750cb214781555e6fb2a34e01cdad51d',1,'policytrain::checkpoint::Disk::Options']]],
  ['best_5fepoch_9',['best_epoch',['../structpolicytrain_1_1TrainState.html#ae2c8a268b99385e243c54b6402a1b95f',1,'policytrain::TrainState']]],
  ['best_5fmetric_10',['best_metric',['../structpolicytrain_1_1TrainState.html#a7474f2a31c4a62bd5cbdef4bb94065bb',1,'policytrain::TrainState']]],
  ['bias_5fgroups_11',['bias_groups',['../structpolicytrain_1_1schedule_1_1LrOptions.html#a52df8aeec7ebdd9f0a8995804277bd1f',1,'policytrain::schedule::LrOptions']]],
  ['broadcast_5fbuffers_12',['broadcast_buffers',['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a32aedd6b5225f58af953d4796c507f09',1,'policytrain::parallel::DataParallelOptions']]],
  ['bucket_5fmb_13',['bucket_mb',['../structpolicytrain_1_1parallel_1_1DataParallelOptions.html#a189ede68f78133f09bd63a4ec5217ec7',1,'policytrain::parallel::DataParallelOptions']]],
  ['bytes_14',['bytes',['../structpolicytrain_1_1checkpoint_1_1RawFile.html#ae2baaae2e5748d97c2154a9de267b7b3',1,'policytrain::checkpoint::RawFile::bytes()'],['../structpolicytrain_1_1data_1_1IdxData.html#a6c8fca5b3045035aa9e37276caebd744',1,'policytrain::data::IdxData::bytes()']]]
];
