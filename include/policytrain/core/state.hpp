#pragma once
/// \file
/// TrainState: the counters every policy may read, and that a checkpoint restores.
#include <cstdint>
#include <limits>
#include <torch/types.h>

namespace policytrain {

/// Counters of a run. `global_step` counts optimizer steps that were attempted (skipped ones included,
/// as PyTorch's GradScaler counts them); `skipped_steps` those of them that did not update the weights.
struct TrainState {
  int64_t epoch = 0;             ///< current epoch, 0-based
  int64_t global_step = 0;       ///< optimizer steps attempted so far
  int64_t skipped_steps = 0;     ///< of them, skipped (non-finite gradients)
  int64_t micro_step = 0;        ///< micro-batches accumulated in the current window
  int64_t batch_in_epoch = 0;    ///< micro-batches consumed in the current epoch
  int64_t samples_seen = 0;      ///< training samples consumed, all epochs
  int64_t window_samples = 0;    ///< samples in the current accumulation window
  /// Tokens trained, all epochs (this rank's; 0 unless the task declares tokens(batch) or
  /// FitOptions::items_per_sample is set: Context::counts_tokens).
  int64_t tokens_seen = 0;
  int64_t window_tokens = 0;     ///< tokens in the current accumulation window (as window_samples)
  double best_metric = std::numeric_limits<double>::quiet_NaN();  ///< best monitored validation metric
  int64_t best_epoch = -1;       ///< epoch of best_metric
  int64_t best_step = -1;        ///< global step of best_metric (the step its validation followed)
  torch::Tensor last_loss;       ///< loss of the last micro-batch (detached; read it lazily: `loss_value()`)
  bool stop_requested = false;   ///< a hook asked to stop
  /// A hook asked to stop at the end of this optimizer step (callbacks::Preemption): the Trainer cuts the epoch
  /// there, without validation or epoch-end hooks, and fit returns with FitResult::stopped_at_step; the checkpoint
  /// policy's fit end writes a mid-epoch checkpoint that resumes at the next batch. Every rank must set it at the
  /// same step (agree first).
  bool stop_at_step = false;

  /// The last loss as a double (synchronises with the device of the loss).
  double loss_value() const {
    return last_loss.defined() ? last_loss.item<double>() : std::numeric_limits<double>::quiet_NaN();
  }
};

}  // namespace policytrain
