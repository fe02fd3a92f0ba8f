#pragma once
/// \file
/// A batch of inputs and targets, as the loaders yield it and a Task's steps receive it.
#include <map>
#include <string>

#include <torch/types.h>

namespace policytrain {

/// Inputs `x` and targets `y`; the first dimension of both is the batch.
struct Batch {
  /// Inputs, batch first.
  torch::Tensor x;
  /// Targets, batch first (class indices for classification).
  torch::Tensor y;
  /// Number of samples (first dimension of `x`).
  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  /// Both tensors moved to `device` (a no-op when already there).
  Batch to(const torch::Device& device, bool non_blocking = false) const {
    return {x.to(device, non_blocking), y.to(device, non_blocking)};
  }
};

/// What a Task's `validation_step` returns: the mean loss of the batch, the model's output (class scores for
/// classification, from which the Trainer builds accuracy and the confusion matrix) and the task's own metrics.
struct Prediction {
  /// The batch's mean loss (a scalar).
  torch::Tensor loss;
  /// The model's output for the batch ([batch, classes] scores for classification).
  torch::Tensor output;
  /// The task's own metrics of the batch, each a scalar: its mean over the batch's samples (a regression's
  /// "mae", a binary classifier's "accuracy"). The Trainer averages each over the evaluated samples, weighted by
  /// batch size as the loss is, into Metrics::extra ("accuracy" into Metrics::accuracy). The task lists their
  /// names in `metric_names()` (docs/trainer.md).
  std::map<std::string, torch::Tensor> metrics{};
};

}  // namespace policytrain
