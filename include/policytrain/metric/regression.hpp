#pragma once
/// \file
/// Regression metrics over an epoch, as torchmetrics computes them: metric::MeanSquaredError (and its root,
/// metric::RootMeanSquaredError), metric::MeanAbsoluteError, metric::R2Score. Each takes predictions and targets of
/// one number per sample (a [batch, 1] output against [batch] targets is flattened), keeps double sums on the CPU,
/// reduced over ranks by summing. Declared in a task's `metrics()` (core/metric.hpp, docs/metrics.md).
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include <policytrain/core/metric.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::metric {

namespace detail {
/// The prediction and target as flat CPU doubles; a std::invalid_argument naming `who` when they differ in size.
inline std::pair<torch::Tensor, torch::Tensor> flat_pair(const std::string& who, const torch::Tensor& prediction,
                                                         const torch::Tensor& target) {
  if (prediction.numel() != target.numel())
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::metric::" + who,
        policytrain::detail::format("the prediction has {} values {} and the target {} {}", prediction.numel(),
                                    c10::str(prediction.sizes()), target.numel(), c10::str(target.sizes())),
        {}, "a regression metric takes one prediction per target value"));
  return {prediction.detach().to(torch::kCPU, torch::kDouble).reshape({-1}),
          target.detach().to(torch::kCPU, torch::kDouble).reshape({-1})};
}
inline torch::Tensor zero() { return torch::zeros({}, torch::kDouble); }
}  // namespace detail

/// Mean squared error over every sample (torchmetrics.MeanSquaredError); with `squared = false` its root.
class MeanSquaredError {
 public:
  /// A mean squared error named `name`; its root when `squared` is false.
  explicit MeanSquaredError(std::string name = "mse", bool squared = true) : name_(std::move(name)), squared_(squared) {}
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const { return name_; }
  /// Adds a batch to the states.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) {
    auto [p, t] = detail::flat_pair(squared_ ? "MeanSquaredError" : "RootMeanSquaredError", prediction, target);
    sse_.value = sse_.value + (p - t).square().sum();
    total_.value = total_.value + static_cast<double>(t.numel());
  }
  /// The mean squared error (or its root) over every batch since reset().
  torch::Tensor compute() const {
    auto mse = sse_.value / total_.value;
    return squared_ ? mse : mse.sqrt();
  }
  /// Clears the states: no batch.
  void reset() { sse_.value = detail::zero(), total_.value = detail::zero(); }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return {&sse_, &total_}; }

 private:
  std::string name_;
  bool squared_;
  MetricState sse_{"sum_squared_error", detail::zero(), Reduce::sum};
  MetricState total_{"total", detail::zero(), Reduce::sum};
};

/// The root of the mean squared error over every sample (torchmetrics.MeanSquaredError(squared=False)): not the
/// mean of the batches' roots.
class RootMeanSquaredError : public MeanSquaredError {
 public:
  /// A root mean squared error named `name`.
  explicit RootMeanSquaredError(std::string name = "rmse") : MeanSquaredError(std::move(name), false) {}
};

/// Mean absolute error over every sample (torchmetrics.MeanAbsoluteError).
class MeanAbsoluteError {
 public:
  /// A mean absolute error named `name`.
  explicit MeanAbsoluteError(std::string name = "mae") : name_(std::move(name)) {}
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const { return name_; }
  /// Adds a batch to the states.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) {
    auto [p, t] = detail::flat_pair("MeanAbsoluteError", prediction, target);
    sae_.value = sae_.value + (p - t).abs().sum();
    total_.value = total_.value + static_cast<double>(t.numel());
  }
  /// The mean absolute error over every batch since reset().
  torch::Tensor compute() const { return sae_.value / total_.value; }
  /// Clears the states: no batch.
  void reset() { sae_.value = detail::zero(), total_.value = detail::zero(); }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return {&sae_, &total_}; }

 private:
  std::string name_;
  MetricState sae_{"sum_abs_error", detail::zero(), Reduce::sum};
  MetricState total_{"total", detail::zero(), Reduce::sum};
};

/// Coefficient of determination over every sample (torchmetrics.R2Score): 1 - residual sum of squares / total sum
/// of squares about the targets' mean, from four sums, so exact over batches and ranks (the mean of the targets is
/// the epoch's, not a batch's); near-zero sums handled as torchmetrics handles them (compute()).
class R2Score {
 public:
  /// An R² score named `name`.
  explicit R2Score(std::string name = "r2") : name_(std::move(name)) {}
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const { return name_; }
  /// Adds a batch to the states.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) {
    auto [p, t] = detail::flat_pair("R2Score", prediction, target);
    sum_sq_.value = sum_sq_.value + t.square().sum();
    sum_.value = sum_.value + t.sum();
    residual_.value = residual_.value + (t - p).square().sum();
    total_.value = total_.value + static_cast<double>(t.numel());
  }
  /// The R² score over every batch since reset(). As torchmetrics: a residual sum of squares within 1e-4 of zero
  /// gives 1, else a total sum of squares within 1e-4 of zero (near-constant targets) gives 0. Fewer than two
  /// samples give NaN (torchmetrics raises ValueError; docs/metrics.md, "Departures").
  torch::Tensor compute() const {
    if (total_.value.item<double>() < 2) return torch::full({}, std::nan(""), torch::kDouble);
    const auto mean = sum_.value / total_.value;
    const auto tss = sum_sq_.value - sum_.value * mean;
    if (residual_.value.abs().item<double>() <= 1e-4) return torch::ones({}, torch::kDouble);
    if (tss.abs().item<double>() <= 1e-4) return torch::zeros({}, torch::kDouble);
    return 1 - residual_.value / tss;
  }
  /// Clears the states: no batch.
  void reset() { sum_sq_.value = detail::zero(), sum_.value = detail::zero(), residual_.value = detail::zero(), total_.value = detail::zero(); }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return {&sum_sq_, &sum_, &residual_, &total_}; }

 private:
  std::string name_;
  MetricState sum_sq_{"sum_squared_target", detail::zero(), Reduce::sum};
  MetricState sum_{"sum_target", detail::zero(), Reduce::sum};
  MetricState residual_{"residual", detail::zero(), Reduce::sum};
  MetricState total_{"total", detail::zero(), Reduce::sum};
};

}  // namespace policytrain::metric
