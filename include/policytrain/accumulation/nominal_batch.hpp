#pragma once
/// \file
/// accumulate::NominalBatch — accumulates micro-batches up to a nominal batch, accumulate =
/// max(round(nominal / batch), 1), and multiplies every param group's weight decay by batch * accumulate / nominal
/// at on_fit_begin (the Ultralytics rule; under data parallelism `batch` is the global batch, the loader's batch
/// times the world size), from the value the group had at the first fit. The loss normalisation
/// and the trailing window are those of accumulate::Steps (accumulation/steps.hpp). With nominal = 0 it is
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
      throw std::logic_error("policytrain::accumulate::NominalBatch::set_accumulate: the window follows from the "
                             "nominal batch; call set_batch, or use nominal = 0");
    o_.steps = n;
    validate();
  }

  /// Scales every param group's weight decay by weight_decay_factor(), from the value the group had at the first
  /// fit (kept in the state, so a resumed or repeated fit never compounds the factor).
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    if constexpr (requires { ctx.template policy<Category::parallel>().world_size(); })
      world_ = std::max<int64_t>(1, ctx.template policy<Category::parallel>().world_size());
    if (o_.nominal <= 0 || !o_.scale_weight_decay) return;
    auto& groups = ctx.optimizer().param_groups();
    if (base_wd_.empty())
      for (auto& g : groups) base_wd_.push_back(weight_decay_of(g.options(), name));
    if (base_wd_.size() != groups.size())
      throw std::invalid_argument(fmt::format("{}: the optimizer has {} param groups but the state has {}; "
                                              "resume with the optimizer the state was saved with",
                                              name, groups.size(), base_wd_.size()));
    const double f = weight_decay_factor();
    for (size_t i = 0; i < groups.size(); ++i) set_weight_decay(groups[i].options(), base_wd_[i] * f, name);
  }

  /// Multiplies the micro-batch's mean loss by its share of the window (see accumulate::Steps).
  template <class Ctx>
  torch::Tensor transform_loss(Ctx& ctx, torch::Tensor loss) {
    return mean_.transform_loss(ctx, std::move(loss), accumulate());
  }
  /// Steps once the window holds accumulate() micro-batches.
  template <class Ctx>
  bool should_step(Ctx& ctx) { return ctx.state().micro_step >= accumulate(); }
  /// Rescales the gradients of an uneven window to the mean over its samples.
  template <class Ctx>
  void before_step(Ctx& ctx) { mean_.before_step(ctx); }

  /// The groups' base weight decay.
  StateDict state_dict() const {
    StateDict d{{"groups", scalar_tensor(static_cast<int64_t>(base_wd_.size()))}};
    for (size_t i = 0; i < base_wd_.size(); ++i) d.emplace(fmt::format("base_weight_decay/{}", i), scalar_tensor(base_wd_[i]));
    return d;
  }
  /// Restores what state_dict() saved.
  void load_state_dict(const StateDict& d) {
    const int64_t n = state_int(d, "groups");
    base_wd_.clear();
    for (int64_t i = 0; i < n; ++i) base_wd_.push_back(state_double(d, fmt::format("base_weight_decay/{}", i)));
  }

 private:
  void validate() const {
    if (o_.nominal < 0 || (o_.nominal > 0 && o_.batch <= 0) || o_.steps < 1)
      throw std::invalid_argument(fmt::format(
          "policytrain::accumulate::NominalBatch: nominal {}, batch {}, steps {}; expected nominal >= 0, "
          "batch > 0 when nominal > 0 (the loader's batch size), steps >= 1",
          o_.nominal, o_.batch, o_.steps));
  }
  Options o_;
  int64_t world_ = 1;
  std::vector<double> base_wd_;
  detail::WindowMean mean_;
};

}  // namespace policytrain::accumulate
