var hierarchy =
[
    [ "torch::optim::Adam", null, [
      [ "policytrain::optim::detail::FusedAdamImpl< torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState, false >", null, [
        [ "policytrain::optim::FusedAdam", "classpolicytrain_1_1optim_1_1FusedAdam.html", null ]
      ] ]
    ] ],
    [ "torch::optim::AdamW", null, [
      [ "policytrain::optim::detail::FusedAdamImpl< torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState, true >", null, [
        [ "policytrain::optim::FusedAdamW", "classpolicytrain_1_1optim_1_1FusedAdamW.html", null ]
      ] ]
    ] ],
    [ "policytrain::checkpoint::AsyncWriter", "classpolicytrain_1_1checkpoint_1_1AsyncWriter.html", null ],
    [ "policytrain::data::AugmentOptions", "structpolicytrain_1_1data_1_1AugmentOptions.html", null ],
    [ "policytrain::accumulate::AutoBatch", "classpolicytrain_1_1accumulate_1_1AutoBatch.html", null ],
    [ "policytrain::accumulate::AutoBatchOptions", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html", null ],
    [ "policytrain::precision::Autocast", "classpolicytrain_1_1precision_1_1Autocast.html", null ],
    [ "policytrain::precision::AutocastGuard", "classpolicytrain_1_1precision_1_1AutocastGuard.html", null ],
    [ "Base", null, null ],
    [ "policytrain::Batch", "structpolicytrain_1_1Batch.html", null ],
    [ "policytrain::accumulate::BatchPlan", "structpolicytrain_1_1accumulate_1_1BatchPlan.html", null ],
    [ "policytrain::checkpoint::Candidates", "structpolicytrain_1_1checkpoint_1_1Candidates.html", null ],
    [ "policytrain::step::CapturedStep< Backend >", "classpolicytrain_1_1step_1_1CapturedStep.html", null ],
    [ "policytrain::ClassificationReport", "structpolicytrain_1_1ClassificationReport.html", null ],
    [ "policytrain::ClassScores", "structpolicytrain_1_1ClassScores.html", null ],
    [ "policytrain::schedule::Constant", "structpolicytrain_1_1schedule_1_1Constant.html", null ],
    [ "policytrain::Context< TrainerT >", "classpolicytrain_1_1Context.html", null ],
    [ "policytrain::Context< Trainer >", "classpolicytrain_1_1Context.html", null ],
    [ "policytrain::parallel::DataParallel", "classpolicytrain_1_1parallel_1_1DataParallel.html", null ],
    [ "policytrain::parallel::DataParallelOptions", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html", null ],
    [ "policytrain::checkpoint::Disk", "classpolicytrain_1_1checkpoint_1_1Disk.html", null ],
    [ "policytrain::callbacks::DivergenceRollback", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html", null ],
    [ "policytrain::callbacks::EarlyStopping", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html", null ],
    [ "policytrain::callbacks::Ema", "classpolicytrain_1_1callbacks_1_1Ema.html", null ],
    [ "policytrain::parallel::Environment", "structpolicytrain_1_1parallel_1_1Environment.html", null ],
    [ "std::exception", null, [
      [ "std::runtime_error", null, [
        [ "policytrain::NonFiniteLoss", "structpolicytrain_1_1NonFiniteLoss.html", null ],
        [ "policytrain::callbacks::DivergenceError", "structpolicytrain_1_1callbacks_1_1DivergenceError.html", null ],
        [ "policytrain::checkpoint::CheckpointError", "structpolicytrain_1_1checkpoint_1_1CheckpointError.html", null ],
        [ "policytrain::data::IdxError", "structpolicytrain_1_1data_1_1IdxError.html", null ],
        [ "policytrain::parallel::CollectiveError", "structpolicytrain_1_1parallel_1_1CollectiveError.html", null ],
        [ "policytrain::parallel::ResumeMismatch", "structpolicytrain_1_1parallel_1_1ResumeMismatch.html", null ]
      ] ]
    ] ],
    [ "policytrain::FitOptions", "structpolicytrain_1_1FitOptions.html", null ],
    [ "policytrain::FitResult", "structpolicytrain_1_1FitResult.html", null ],
    [ "policytrain::precision::Fp32", "structpolicytrain_1_1precision_1_1Fp32.html", null ],
    [ "policytrain::optim::FusedGradScaling", "classpolicytrain_1_1optim_1_1FusedGradScaling.html", [
      [ "policytrain::optim::detail::FusedAdamImpl< torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState, false >", null, null ],
      [ "policytrain::optim::detail::FusedAdamImpl< torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState, true >", null, null ],
      [ "policytrain::optim::FusedSgd", "classpolicytrain_1_1optim_1_1FusedSgd.html", null ]
    ] ],
    [ "policytrain::callbacks::GradClip", "classpolicytrain_1_1callbacks_1_1GradClip.html", null ],
    [ "policytrain::step::GraphOptions", "structpolicytrain_1_1step_1_1GraphOptions.html", null ],
    [ "policytrain::optim::GraphReplayable", "classpolicytrain_1_1optim_1_1GraphReplayable.html", [
      [ "policytrain::optim::detail::FusedAdamImpl< torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState, false >", null, null ],
      [ "policytrain::optim::detail::FusedAdamImpl< torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState, true >", null, null ],
      [ "policytrain::optim::FusedSgd", "classpolicytrain_1_1optim_1_1FusedSgd.html", null ]
    ] ],
    [ "policytrain::checkpoint::Header", "structpolicytrain_1_1checkpoint_1_1Header.html", null ],
    [ "policytrain::schedule::Horizon", "structpolicytrain_1_1schedule_1_1Horizon.html", null ],
    [ "policytrain::data::IdxData", "structpolicytrain_1_1data_1_1IdxData.html", null ],
    [ "policytrain::data::ImageLabels", "structpolicytrain_1_1data_1_1ImageLabels.html", null ],
    [ "policytrain::data::PrefetchLoader::iterator", "classpolicytrain_1_1data_1_1PrefetchLoader_1_1iterator.html", null ],
    [ "policytrain::data::TensorLoader::iterator", "classpolicytrain_1_1data_1_1TensorLoader_1_1iterator.html", null ],
    [ "policytrain::parallel::LaunchOptions", "structpolicytrain_1_1parallel_1_1LaunchOptions.html", null ],
    [ "policytrain::checkpoint::Loaded", "structpolicytrain_1_1checkpoint_1_1Loaded.html", null ],
    [ "policytrain::data::LoaderOptions", "structpolicytrain_1_1data_1_1LoaderOptions.html", null ],
    [ "policytrain::precision::LossScaler", "classpolicytrain_1_1precision_1_1LossScaler.html", null ],
    [ "policytrain::schedule::Lr", "classpolicytrain_1_1schedule_1_1Lr.html", null ],
    [ "policytrain::schedule::LrOptions", "structpolicytrain_1_1schedule_1_1LrOptions.html", null ],
    [ "policytrain::Metrics", "structpolicytrain_1_1Metrics.html", null ],
    [ "policytrain::MetricsAccumulator", "classpolicytrain_1_1MetricsAccumulator.html", null ],
    [ "policytrain::callbacks::MetricsLog", "classpolicytrain_1_1callbacks_1_1MetricsLog.html", null ],
    [ "torch::nn::Module", null, [
      [ "policytrain::memory::RecomputedImpl< M >", "classpolicytrain_1_1memory_1_1RecomputedImpl.html", null ]
    ] ],
    [ "torch::nn::ModuleHolder", null, [
      [ "policytrain::memory::Recomputed< M >", "classpolicytrain_1_1memory_1_1Recomputed.html", null ]
    ] ],
    [ "policytrain::Monitor", "structpolicytrain_1_1Monitor.html", null ],
    [ "policytrain::accumulate::NominalBatch", "classpolicytrain_1_1accumulate_1_1NominalBatch.html", null ],
    [ "policytrain::accumulate::None", "structpolicytrain_1_1accumulate_1_1None.html", null ],
    [ "policytrain::checkpoint::None", "structpolicytrain_1_1checkpoint_1_1None.html", null ],
    [ "policytrain::data::NormalizeOptions", "structpolicytrain_1_1data_1_1NormalizeOptions.html", null ],
    [ "policytrain::schedule::OneCyclePoint", "structpolicytrain_1_1schedule_1_1OneCyclePoint.html", null ],
    [ "policytrain::accumulate::NominalBatch::Options", "structpolicytrain_1_1accumulate_1_1NominalBatch_1_1Options.html", null ],
    [ "policytrain::callbacks::DivergenceRollback::Options", "structpolicytrain_1_1callbacks_1_1DivergenceRollback_1_1Options.html", null ],
    [ "policytrain::callbacks::EarlyStopping::Options", "structpolicytrain_1_1callbacks_1_1EarlyStopping_1_1Options.html", null ],
    [ "policytrain::callbacks::Ema::Options", "structpolicytrain_1_1callbacks_1_1Ema_1_1Options.html", null ],
    [ "policytrain::callbacks::GradClip::Options", "structpolicytrain_1_1callbacks_1_1GradClip_1_1Options.html", null ],
    [ "policytrain::callbacks::MetricsLog::Options", "structpolicytrain_1_1callbacks_1_1MetricsLog_1_1Options.html", null ],
    [ "policytrain::callbacks::PerfKnobs::Options", "structpolicytrain_1_1callbacks_1_1PerfKnobs_1_1Options.html", null ],
    [ "policytrain::callbacks::Profiler::Options", "structpolicytrain_1_1callbacks_1_1Profiler_1_1Options.html", null ],
    [ "policytrain::callbacks::ProgressBar::Options", "structpolicytrain_1_1callbacks_1_1ProgressBar_1_1Options.html", null ],
    [ "policytrain::callbacks::TensorBoard::Options", "structpolicytrain_1_1callbacks_1_1TensorBoard_1_1Options.html", null ],
    [ "policytrain::checkpoint::Disk::Options", "structpolicytrain_1_1checkpoint_1_1Disk_1_1Options.html", null ],
    [ "policytrain::precision::Autocast::Options", "structpolicytrain_1_1precision_1_1Autocast_1_1Options.html", null ],
    [ "policytrain::precision::LossScaler::Options", "structpolicytrain_1_1precision_1_1LossScaler_1_1Options.html", null ],
    [ "policytrain::memory::PeakMemory", "classpolicytrain_1_1memory_1_1PeakMemory.html", null ],
    [ "policytrain::memory::PeakReading", "structpolicytrain_1_1memory_1_1PeakReading.html", null ],
    [ "policytrain::callbacks::PerfKnobs", "classpolicytrain_1_1callbacks_1_1PerfKnobs.html", null ],
    [ "policytrain::callbacks::PhaseTimes", "structpolicytrain_1_1callbacks_1_1PhaseTimes.html", null ],
    [ "policytrain::Prediction", "structpolicytrain_1_1Prediction.html", null ],
    [ "policytrain::data::PrefetchLoader", "classpolicytrain_1_1data_1_1PrefetchLoader.html", null ],
    [ "policytrain::data::PrefetchOptions", "structpolicytrain_1_1data_1_1PrefetchOptions.html", null ],
    [ "policytrain::accumulate::Probe", "structpolicytrain_1_1accumulate_1_1Probe.html", null ],
    [ "policytrain::callbacks::Profiler", "classpolicytrain_1_1callbacks_1_1Profiler.html", null ],
    [ "policytrain::callbacks::ProfilerOpStats", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html", null ],
    [ "policytrain::callbacks::ProgressBar", "classpolicytrain_1_1callbacks_1_1ProgressBar.html", null ],
    [ "policytrain::checkpoint::RawFile", "structpolicytrain_1_1checkpoint_1_1RawFile.html", null ],
    [ "policytrain::checkpoint::RunInfo", "structpolicytrain_1_1checkpoint_1_1RunInfo.html", null ],
    [ "policytrain::checkpoint::SaveOptions", "structpolicytrain_1_1checkpoint_1_1SaveOptions.html", null ],
    [ "torch::optim::SGD", null, [
      [ "policytrain::optim::FusedSgd", "classpolicytrain_1_1optim_1_1FusedSgd.html", null ]
    ] ],
    [ "policytrain::parallel::Single", "structpolicytrain_1_1parallel_1_1Single.html", null ],
    [ "policytrain::checkpoint::Snapshot", "classpolicytrain_1_1checkpoint_1_1Snapshot.html", null ],
    [ "policytrain::callbacks::StepPhases::Span", "structpolicytrain_1_1callbacks_1_1StepPhases_1_1Span.html", null ],
    [ "policytrain::data::Split", "structpolicytrain_1_1data_1_1Split.html", null ],
    [ "policytrain::callbacks::StepPhases", "classpolicytrain_1_1callbacks_1_1StepPhases.html", null ],
    [ "policytrain::accumulate::Steps", "classpolicytrain_1_1accumulate_1_1Steps.html", null ],
    [ "policytrain::MetricsAccumulator::Sums", "structpolicytrain_1_1MetricsAccumulator_1_1Sums.html", null ],
    [ "policytrain::callbacks::TensorBoard", "classpolicytrain_1_1callbacks_1_1TensorBoard.html", null ],
    [ "policytrain::memory::TensorBytesMeter", "classpolicytrain_1_1memory_1_1TensorBytesMeter.html", null ],
    [ "policytrain::data::TensorLoader", "classpolicytrain_1_1data_1_1TensorLoader.html", null ],
    [ "policytrain::data::TensorPair", "structpolicytrain_1_1data_1_1TensorPair.html", null ],
    [ "policytrain::Trainer< Task, Policies >", "classpolicytrain_1_1Trainer.html", null ],
    [ "policytrain::TrainState", "structpolicytrain_1_1TrainState.html", null ]
];