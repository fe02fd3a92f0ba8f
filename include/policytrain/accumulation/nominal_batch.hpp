#pragma once
/// \file
/// accumulate::NominalBatch — accumulates micro-batches up to a nominal batch, accumulate =
/// max(round(nominal / batch), 1), and multiplies every param group's weight decay by batch * accumulate / nominal
/// at on_fit_begin (the Ultralytics rule; under data parallelism `batch` is the global batch, the loader's batch
/// times the world size), from the value the group had at the first fit. The loss normalisation
/// and the trailing window are those of accumulate::Steps (accumulation/steps.hpp).
/// Warmup ramp (Ultralytics' trainer, on by default when `warmup_batches` > 0): while the global micro-batch index
/// ni = epoch * batches_per_epoch + batch_in_epoch (0-based) is at most nw = warmup_batches, the window closes
/// once it holds accumulate(ni) = max(1, round(interp(ni, [0, nw], [1, nominal / batch]))) micro-batches
/// (numpy's interp and round, half to even); afterwards the full accumulate. Ultralytics sets
/// nw = max(round(warmup_epochs * batches_per_epoch), 100). A window whose length the ramp changed is still
/// normalised to the mean over its samples. Unlike Ultralytics, whose windows run across epoch ends, the
/// trailing window of an epoch is stepped. With nominal = 0 it is
/// `Steps{steps}`, so one composed Trainer can switch between the two at run time.
/// Hooks: on_fit_begin, transform_loss, should_step, before_step; state: the groups' base weight decay.
/// Requires an optimizer whose options are AdamW, Adam, SGD, RMSprop or Adagrad when it scales the weight decay
/// (another type is an error naming the fix). Cost when nominal = 0 and steps = 1: a few integer operations per
/// micro-batch.
/// Example: examples/fashion_mnist/flags_accumulation.hpp.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <torch/types.h>

#include <policytrain/accumulation/window_mean.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::accumulate {

/// Accumulates up to a nominal batch and scales the weight decay to it (Ultralytics' `nbs`).
class NominalBatch {
 public:
  /// Category: accumulation (at most one per Trainer).
  static constexpr Category category = Category::accumulation;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "accumulate::NominalBatch";

  /// Settings of NominalBatch: the nominal batch, the micro-batch size, and the window when nominal == 0.
  struct Options {
    int64_t nominal = 0;             ///< nominal batch; 0: off, accumulate `steps` micro-batches, weight decay unchanged
    int64_t batch = 0;               ///< the micro-batch size the loader yields (required when nominal > 0)
    int64_t steps = 1;               ///< micro-batches per step when nominal == 0
    bool scale_weight_decay = true;  ///< multiply each group's weight decay by batch * accumulate / nominal
    /// Ultralytics' warmup ramp length nw in micro-batches (nominal > 0 only); 0: no ramp.
    int64_t warmup_batches = 0;
    /// Ramp the accumulation from 1 over the warmup, as Ultralytics (false: the full accumulation from the start).
    bool ramp_accumulate = true;
  };

  NominalBatch() = default;
  /// Throws std::invalid_argument for nominal < 0, batch <= 0 when nominal > 0, or steps < 1.
  explicit NominalBatch(Options o) : o_(o) { validate(); }

  /// The settings.
  const Options& options() const { return o_; }
  /// Micro-batches per optimizer step.
  /// Under data parallelism the rule applies to the global batch, batch × world size (as Ultralytics does).
  int64_t accumulate() const { return o_.nominal > 0 ? nominal_accumulate(o_.nominal, o_.batch * world_) : o_.steps; }
  /// Ranks whose micro-batches make one global micro-batch (the parallel policy's world size, read at
  /// on_fit_begin; 1 before).
  int64_t world_size() const { return world_; }
  /// Micro-batches per optimizer step for the window that holds global micro-batch `ni` (0-based): the warmup
  /// ramp while ni <= warmup_batches, else accumulate().
  int64_t accumulate_at(int64_t ni) const {
    if (o_.nominal <= 0 || !o_.ramp_accumulate || o_.warmup_batches <= 0 || ni > o_.warmup_batches) return accumulate();
    // numpy.interp(ni, [0, nw], [1, nominal / batch]) = slope * (ni - 0) + 1, in numpy's order of operations.
    const double target = static_cast<double>(o_.nominal) / static_cast<double>(o_.batch * world_);
    const double slope = (target - 1.0) / static_cast<double>(o_.warmup_batches);
    return std::max<int64_t>(1, round_half_even(slope * static_cast<double>(ni) + 1.0));
  }
  /// The weight-decay factor (1 when nominal == 0 or scaling is off).
  double weight_decay_factor() const {
    if (o_.nominal <= 0 || !o_.scale_weight_decay) return 1.0;
    return static_cast<double>(o_.batch * world_) * static_cast<double>(accumulate()) / static_cast<double>(o_.nominal);
  }
  /// Changes the micro-batch size (auto batch size); the accumulation follows the rule, and the weight decay
  /// is rescaled at the next on_fit_begin. With nominal == 0, `set_accumulate` changes the window instead.
  void set_batch(int64_t batch) { o_.batch = batch; validate(); }
  /// Sets the micro-batches per step (nominal == 0 only; otherwise std::logic_error).
  void set_accumulate(int64_t n) {
    if (o_.nominal > 0)
      throw std::logic_error(policytrain::detail::error_message("policytrain::accumulate::NominalBatch::set_accumulate",
                                                                "the window follows from the "
                                                                "nominal batch; call set_batch, or use nominal = 0"));
    o_.steps = n;
    validate();
  }

  /// Scales every param group's weight decay by weight_decay_factor(), from the value the group had at the first
  /// fit (kept in the state, so a resumed or repeated fit never compounds the factor).
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    world_ = std::max<int64_t>(1, ctx.template policy<Category::parallel>().world_size());
    if (o_.nominal <= 0 || !o_.scale_weight_decay) return;
    auto& groups = ctx.optimizer().param_groups();
    if (base_wd_.empty())
      for (auto& g : groups) base_wd_.push_back(weight_decay_of(g.options(), name));
    if (base_wd_.size() != groups.size())
      throw std::invalid_argument(policytrain::detail::error_message(
          name, policytrain::detail::format("the optimizer has {} param groups but the state has {}; "
                                            "resume with the optimizer the state was saved with",
                                            groups.size(), base_wd_.size())));
    const double f = weight_decay_factor();
    for (size_t i = 0; i < groups.size(); ++i) set_weight_decay(groups[i].options(), base_wd_[i] * f, name);
  }

  /// Multiplies the micro-batch's mean loss by its share of the window (see accumulate::Steps).
  template <class Ctx>
  torch::Tensor transform_loss(Ctx& ctx, torch::Tensor loss) {
    return mean_.transform_loss(ctx, std::move(loss), accumulate_at(micro_batch_index(ctx)));
  }
  /// Steps once the window holds accumulate_at(ni) micro-batches (accumulate() after the warmup).
  template <class Ctx>
  bool should_step(Ctx& ctx) { return ctx.state().micro_step >= accumulate_at(micro_batch_index(ctx)); }
  /// Rescales the gradients of an uneven window to the mean over its samples.
  template <class Ctx>
  void before_step(Ctx& ctx) { mean_.before_step(ctx); }

  /// The groups' base weight decay.
  StateDict state_dict() const {
    StateDict d{{"groups", scalar_tensor(static_cast<int64_t>(base_wd_.size()))}};
    for (size_t i = 0; i < base_wd_.size(); ++i) d.emplace(policytrain::detail::format("base_weight_decay/{}", i), scalar_tensor(base_wd_[i]));
    return d;
  }
  /// Restores what state_dict() saved.
  void load_state_dict(const StateDict& d) {
    const int64_t n = state_int(d, "groups");
    base_wd_.clear();
    for (int64_t i = 0; i < n; ++i) base_wd_.push_back(state_double(d, policytrain::detail::format("base_weight_decay/{}", i)));
  }

 private:
  /// The global index of the current micro-batch (only needed during the ramp).
  template <class Ctx>
  int64_t micro_batch_index(Ctx& ctx) const {
    if (o_.nominal <= 0 || !o_.ramp_accumulate || o_.warmup_batches <= 0) return 0;
    const int64_t nb = ctx.epoch_batches();
    if (nb < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::accumulate::NominalBatch",
          "the warmup ramp of the accumulation needs the epoch's length, but "
          "the training loader has no size; give a sized loader, or set warmup_batches = 0 / ramp_accumulate = false"));
    return ctx.state().epoch * nb + ctx.state().batch_in_epoch - 1;
  }
  void validate() const {
    if (o_.warmup_batches < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::accumulate::NominalBatch",
          policytrain::detail::format("warmup_batches {}; expected >= 0 (0: no ramp)", o_.warmup_batches)));
    if (o_.nominal < 0 || (o_.nominal > 0 && o_.batch <= 0) || o_.steps < 1)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::accumulate::NominalBatch",
          policytrain::detail::format("nominal {}, batch {}, steps {}; expected nominal >= 0, "
                                      "batch > 0 when nominal > 0 (the loader's batch size), steps >= 1",
                                      o_.nominal, o_.batch, o_.steps)));
  }
  Options o_;
  int64_t world_ = 1;
  std::vector<double> base_wd_;
  detail::WindowMean mean_;
};

}  // namespace policytrain::accumulate
