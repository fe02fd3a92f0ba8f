#pragma once
/// \file
/// accumulate::Steps — gradient accumulation over a window of micro-batches, with
/// the loss normalised so that the optimizer sees the gradient of the mean loss over every sample of the window,
/// whatever the sizes of its micro-batches.
///
/// `Steps{n}`: an optimizer step every n micro-batches (accumulate::NominalBatch derives n from a nominal batch).
///
/// Normalisation: a Task returns the mean loss of its micro-batch. transform_loss multiplies it by
/// n_i / N̂ (n_i: the micro-batch's samples; N̂ = accumulate × n_1, the window's expected size), and before_step
/// multiplies the gradients by N̂ / N (N: the samples the window really had). The optimizer therefore sees
/// Σ n_i ∇mean_i / N = ∇(mean over the window). For windows of equal micro-batches N̂ = N and before_step does
/// nothing; the gradients keep the magnitude of a mean loss, which matters under fp16 loss scaling.
///
/// Trailing window: the Trainer closes an open window at the end of every epoch (the last micro-batch of an
/// epoch always ends a window, `ctx.is_last_micro_step()`), and it is stepped as the mean over the samples it has.
/// So windows never span epochs, an epoch of B micro-batches takes ceil(B / accumulate) optimizer steps, and no
/// sample is dropped or counted twice.
///
/// Hooks: transform_loss, should_step, before_step.
/// Requires: a Task whose training_step returns the micro-batch's *mean* loss. Under data parallelism the mean is
/// exact when every rank's window has the same number of samples (the DistributedSampler-style loader pads so);
/// the parallel policy averages the ranks' gradients.
/// Cost: accumulate = 1 costs a few integer operations per micro-batch (the loss is returned untouched); with
/// accumulation one scalar multiply of the loss per micro-batch, and one _foreach_mul_ for an uneven window.
/// Example: examples/fashion_mnist/flags_accumulation.hpp, tests/unit/test_accumulation.cpp.
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>
#include <torch/types.h>

#include <policytrain/accumulation/window_mean.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::accumulate {

/// An optimizer step every `n` micro-batches (n = 1: every micro-batch), with the exact window mean.
class Steps {
 public:
  /// Category: accumulation (at most one per Trainer).
  static constexpr Category category = Category::accumulation;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "accumulate::Steps";

  Steps() = default;
  /// An optimizer step every `n` micro-batches; throws std::invalid_argument for n < 1.
  explicit Steps(int64_t n) : n_(n) { check(n); }

  /// Micro-batches per optimizer step.
  int64_t accumulate() const { return n_; }
  /// Changes the window (between optimizer steps: auto batch size after an out-of-memory error).
  void set_accumulate(int64_t n) { check(n); n_ = n; }

  /// Multiplies the micro-batch's mean loss by its share of the window (see the file comment).
  template <class Ctx>
  torch::Tensor transform_loss(Ctx& ctx, torch::Tensor loss) { return mean_.transform_loss(ctx, std::move(loss), n_); }
  /// Steps once the window holds `n` micro-batches.
  template <class Ctx>
  bool should_step(Ctx& ctx) { return ctx.state().micro_step >= n_; }
  /// Rescales the gradients of an uneven window to the mean over its samples.
  template <class Ctx>
  void before_step(Ctx& ctx) { mean_.before_step(ctx); }

 private:
  static void check(int64_t n) {
    if (n < 1)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::accumulate::Steps", policytrain::detail::format("accumulate is {}; expected >= 1", n)));
  }
  int64_t n_ = 1;
  detail::WindowMean mean_;
};

}  // namespace policytrain::accumulate
