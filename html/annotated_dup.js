var annotated_dup =
[
    [ "policytrain", null, [
      [ "accumulate", null, [
        [ "AutoBatch", "classpolicytrain_1_1accumulate_1_1AutoBatch.html", "classpolicytrain_1_1accumulate_1_1AutoBatch" ],
        [ "AutoBatchOptions", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions.html", "structpolicytrain_1_1accumulate_1_1AutoBatchOptions" ],
        [ "BatchPlan", "structpolicytrain_1_1accumulate_1_1BatchPlan.html", "structpolicytrain_1_1accumulate_1_1BatchPlan" ],
        [ "NominalBatch", "classpolicytrain_1_1accumulate_1_1NominalBatch.html", "classpolicytrain_1_1accumulate_1_1NominalBatch" ],
        [ "None", "structpolicytrain_1_1accumulate_1_1None.html", "structpolicytrain_1_1accumulate_1_1None" ],
        [ "Probe", "structpolicytrain_1_1accumulate_1_1Probe.html", "structpolicytrain_1_1accumulate_1_1Probe" ],
        [ "Steps", "classpolicytrain_1_1accumulate_1_1Steps.html", "classpolicytrain_1_1accumulate_1_1Steps" ]
      ] ],
      [ "callbacks", null, [
        [ "DivergenceError", "structpolicytrain_1_1callbacks_1_1DivergenceError.html", null ],
        [ "DivergenceRollback", "classpolicytrain_1_1callbacks_1_1DivergenceRollback.html", "classpolicytrain_1_1callbacks_1_1DivergenceRollback" ],
        [ "EarlyStopping", "classpolicytrain_1_1callbacks_1_1EarlyStopping.html", "classpolicytrain_1_1callbacks_1_1EarlyStopping" ],
        [ "Ema", "classpolicytrain_1_1callbacks_1_1Ema.html", "classpolicytrain_1_1callbacks_1_1Ema" ],
        [ "GradClip", "classpolicytrain_1_1callbacks_1_1GradClip.html", "classpolicytrain_1_1callbacks_1_1GradClip" ],
        [ "MetricsLog", "classpolicytrain_1_1callbacks_1_1MetricsLog.html", "classpolicytrain_1_1callbacks_1_1MetricsLog" ],
        [ "PerfKnobs", "classpolicytrain_1_1callbacks_1_1PerfKnobs.html", "classpolicytrain_1_1callbacks_1_1PerfKnobs" ],
        [ "PhaseTimes", "structpolicytrain_1_1callbacks_1_1PhaseTimes.html", "structpolicytrain_1_1callbacks_1_1PhaseTimes" ],
        [ "Profiler", "classpolicytrain_1_1callbacks_1_1Profiler.html", "classpolicytrain_1_1callbacks_1_1Profiler" ],
        [ "ProfilerOpStats", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats.html", "structpolicytrain_1_1callbacks_1_1ProfilerOpStats" ],
        [ "ProgressBar", "classpolicytrain_1_1callbacks_1_1ProgressBar.html", "classpolicytrain_1_1callbacks_1_1ProgressBar" ],
        [ "StepPhases", "classpolicytrain_1_1callbacks_1_1StepPhases.html", "classpolicytrain_1_1callbacks_1_1StepPhases" ],
        [ "TensorBoard", "classpolicytrain_1_1callbacks_1_1TensorBoard.html", "classpolicytrain_1_1callbacks_1_1TensorBoard" ]
      ] ],
      [ "checkpoint", null, [
        [ "AsyncWriter", "classpolicytrain_1_1checkpoint_1_1AsyncWriter.html", "classpolicytrain_1_1checkpoint_1_1AsyncWriter" ],
        [ "Candidates", "structpolicytrain_1_1checkpoint_1_1Candidates.html", "structpolicytrain_1_1checkpoint_1_1Candidates" ],
        [ "CheckpointError", "structpolicytrain_1_1checkpoint_1_1CheckpointError.html", null ],
        [ "Disk", "classpolicytrain_1_1checkpoint_1_1Disk.html", "classpolicytrain_1_1checkpoint_1_1Disk" ],
        [ "Header", "structpolicytrain_1_1checkpoint_1_1Header.html", "structpolicytrain_1_1checkpoint_1_1Header" ],
        [ "Loaded", "structpolicytrain_1_1checkpoint_1_1Loaded.html", "structpolicytrain_1_1checkpoint_1_1Loaded" ],
        [ "None", "structpolicytrain_1_1checkpoint_1_1None.html", "structpolicytrain_1_1checkpoint_1_1None" ],
        [ "RawFile", "structpolicytrain_1_1checkpoint_1_1RawFile.html", "structpolicytrain_1_1checkpoint_1_1RawFile" ],
        [ "RunInfo", "structpolicytrain_1_1checkpoint_1_1RunInfo.html", "structpolicytrain_1_1checkpoint_1_1RunInfo" ],
        [ "SaveOptions", "structpolicytrain_1_1checkpoint_1_1SaveOptions.html", "structpolicytrain_1_1checkpoint_1_1SaveOptions" ],
        [ "Snapshot", "classpolicytrain_1_1checkpoint_1_1Snapshot.html", "classpolicytrain_1_1checkpoint_1_1Snapshot" ]
      ] ],
      [ "data", null, [
        [ "AugmentOptions", "structpolicytrain_1_1data_1_1AugmentOptions.html", "structpolicytrain_1_1data_1_1AugmentOptions" ],
        [ "IdxData", "structpolicytrain_1_1data_1_1IdxData.html", "structpolicytrain_1_1data_1_1IdxData" ],
        [ "IdxError", "structpolicytrain_1_1data_1_1IdxError.html", null ],
        [ "ImageLabels", "structpolicytrain_1_1data_1_1ImageLabels.html", "structpolicytrain_1_1data_1_1ImageLabels" ],
        [ "LoaderOptions", "structpolicytrain_1_1data_1_1LoaderOptions.html", "structpolicytrain_1_1data_1_1LoaderOptions" ],
        [ "NormalizeOptions", "structpolicytrain_1_1data_1_1NormalizeOptions.html", "structpolicytrain_1_1data_1_1NormalizeOptions" ],
        [ "PrefetchLoader", "classpolicytrain_1_1data_1_1PrefetchLoader.html", "classpolicytrain_1_1data_1_1PrefetchLoader" ],
        [ "PrefetchOptions", "structpolicytrain_1_1data_1_1PrefetchOptions.html", "structpolicytrain_1_1data_1_1PrefetchOptions" ],
        [ "Split", "structpolicytrain_1_1data_1_1Split.html", "structpolicytrain_1_1data_1_1Split" ],
        [ "TensorLoader", "classpolicytrain_1_1data_1_1TensorLoader.html", "classpolicytrain_1_1data_1_1TensorLoader" ],
        [ "TensorPair", "structpolicytrain_1_1data_1_1TensorPair.html", "structpolicytrain_1_1data_1_1TensorPair" ]
      ] ],
      [ "memory", null, [
        [ "PeakMemory", "classpolicytrain_1_1memory_1_1PeakMemory.html", "classpolicytrain_1_1memory_1_1PeakMemory" ],
        [ "PeakReading", "structpolicytrain_1_1memory_1_1PeakReading.html", "structpolicytrain_1_1memory_1_1PeakReading" ],
        [ "Recomputed", "classpolicytrain_1_1memory_1_1Recomputed.html", "classpolicytrain_1_1memory_1_1Recomputed" ],
        [ "RecomputedImpl", "classpolicytrain_1_1memory_1_1RecomputedImpl.html", "classpolicytrain_1_1memory_1_1RecomputedImpl" ],
        [ "TensorBytesMeter", "classpolicytrain_1_1memory_1_1TensorBytesMeter.html", "classpolicytrain_1_1memory_1_1TensorBytesMeter" ]
      ] ],
      [ "optim", null, [
        [ "FusedAdam", "classpolicytrain_1_1optim_1_1FusedAdam.html", null ],
        [ "FusedAdamW", "classpolicytrain_1_1optim_1_1FusedAdamW.html", null ],
        [ "FusedGradScaling", "classpolicytrain_1_1optim_1_1FusedGradScaling.html", "classpolicytrain_1_1optim_1_1FusedGradScaling" ],
        [ "FusedSgd", "classpolicytrain_1_1optim_1_1FusedSgd.html", "classpolicytrain_1_1optim_1_1FusedSgd" ],
        [ "GraphReplayable", "classpolicytrain_1_1optim_1_1GraphReplayable.html", "classpolicytrain_1_1optim_1_1GraphReplayable" ]
      ] ],
      [ "parallel", null, [
        [ "CollectiveError", "structpolicytrain_1_1parallel_1_1CollectiveError.html", null ],
        [ "DataParallel", "classpolicytrain_1_1parallel_1_1DataParallel.html", "classpolicytrain_1_1parallel_1_1DataParallel" ],
        [ "DataParallelOptions", "structpolicytrain_1_1parallel_1_1DataParallelOptions.html", "structpolicytrain_1_1parallel_1_1DataParallelOptions" ],
        [ "Environment", "structpolicytrain_1_1parallel_1_1Environment.html", "structpolicytrain_1_1parallel_1_1Environment" ],
        [ "LaunchOptions", "structpolicytrain_1_1parallel_1_1LaunchOptions.html", "structpolicytrain_1_1parallel_1_1LaunchOptions" ],
        [ "ResumeMismatch", "structpolicytrain_1_1parallel_1_1ResumeMismatch.html", null ],
        [ "Single", "structpolicytrain_1_1parallel_1_1Single.html", "structpolicytrain_1_1parallel_1_1Single" ]
      ] ],
      [ "precision", null, [
        [ "Autocast", "classpolicytrain_1_1precision_1_1Autocast.html", "classpolicytrain_1_1precision_1_1Autocast" ],
        [ "AutocastGuard", "classpolicytrain_1_1precision_1_1AutocastGuard.html", "classpolicytrain_1_1precision_1_1AutocastGuard" ],
        [ "Fp32", "structpolicytrain_1_1precision_1_1Fp32.html", "structpolicytrain_1_1precision_1_1Fp32" ],
        [ "LossScaler", "classpolicytrain_1_1precision_1_1LossScaler.html", "classpolicytrain_1_1precision_1_1LossScaler" ]
      ] ],
      [ "schedule", null, [
        [ "Constant", "structpolicytrain_1_1schedule_1_1Constant.html", "structpolicytrain_1_1schedule_1_1Constant" ],
        [ "Horizon", "structpolicytrain_1_1schedule_1_1Horizon.html", "structpolicytrain_1_1schedule_1_1Horizon" ],
        [ "Lr", "classpolicytrain_1_1schedule_1_1Lr.html", "classpolicytrain_1_1schedule_1_1Lr" ],
        [ "LrOptions", "structpolicytrain_1_1schedule_1_1LrOptions.html", "structpolicytrain_1_1schedule_1_1LrOptions" ],
        [ "OneCyclePoint", "structpolicytrain_1_1schedule_1_1OneCyclePoint.html", "structpolicytrain_1_1schedule_1_1OneCyclePoint" ]
      ] ],
      [ "step", null, [
        [ "CapturedStep", "classpolicytrain_1_1step_1_1CapturedStep.html", "classpolicytrain_1_1step_1_1CapturedStep" ],
        [ "GraphOptions", "structpolicytrain_1_1step_1_1GraphOptions.html", "structpolicytrain_1_1step_1_1GraphOptions" ]
      ] ],
      [ "Batch", "structpolicytrain_1_1Batch.html", "structpolicytrain_1_1Batch" ],
      [ "ClassificationReport", "structpolicytrain_1_1ClassificationReport.html", "structpolicytrain_1_1ClassificationReport" ],
      [ "ClassScores", "structpolicytrain_1_1ClassScores.html", "structpolicytrain_1_1ClassScores" ],
      [ "Context", "classpolicytrain_1_1Context.html", "classpolicytrain_1_1Context" ],
      [ "FitOptions", "structpolicytrain_1_1FitOptions.html", "structpolicytrain_1_1FitOptions" ],
      [ "FitResult", "structpolicytrain_1_1FitResult.html", "structpolicytrain_1_1FitResult" ],
      [ "Metrics", "structpolicytrain_1_1Metrics.html", "structpolicytrain_1_1Metrics" ],
      [ "MetricsAccumulator", "classpolicytrain_1_1MetricsAccumulator.html", "classpolicytrain_1_1MetricsAccumulator" ],
      [ "Monitor", "structpolicytrain_1_1Monitor.html", "structpolicytrain_1_1Monitor" ],
      [ "NonFiniteLoss", "structpolicytrain_1_1NonFiniteLoss.html", null ],
      [ "Prediction", "structpolicytrain_1_1Prediction.html", "structpolicytrain_1_1Prediction" ],
      [ "Trainer", "classpolicytrain_1_1Trainer.html", "classpolicytrain_1_1Trainer" ],
      [ "TrainState", "structpolicytrain_1_1TrainState.html", "structpolicytrain_1_1TrainState" ]
    ] ]
];