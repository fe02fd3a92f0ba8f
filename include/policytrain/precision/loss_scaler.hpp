#pragma once
/// \file
/// precision::LossScaler — dynamic loss scaling with the semantics of PyTorch's `torch.amp.GradScaler`.
///
/// Per optimizer step: `scale(loss)` multiplies each micro-batch's loss by the scale S before backward;
/// `unscale(opt)` multiplies every gradient by 1/S once and records whether any is inf/NaN
/// (`at::_amp_foreach_non_finite_check_and_unscale_`, one call per device and dtype); `step(opt)` calls
/// `opt.step()` only when every gradient was finite; `update()` then adjusts S
/// (`at::_amp_update_scale_`):
///   - a non-finite gradient: S *= backoff_factor, growth tracker = 0;
///   - otherwise tracker += 1, and when it reaches growth_interval: S *= growth_factor (kept only if finite),
///     tracker = 0.
/// Defaults as GradScaler: S = 2^16, growth 2, backoff 0.5, interval 2000.
///
/// Used by precision::Autocast (before_step: unscale, step: step, after_step: update); usable alone with one
/// optimizer. Cost per step: one multiply per loss, one fused pass over the gradients, one read of the
/// inf flag per device (a device sync on CUDA, as in GradScaler) in step(); none in step_on_device(), which hands
/// the flag to a fused optimizer's kernel instead (GradScaler's path for `_step_supports_amp_scaling`).
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <fmt/format.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <policytrain/core/parameters.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/optim/fused_common.hpp>

namespace policytrain::precision {

/// Dynamic loss scaling with the semantics of PyTorch's GradScaler (see the file comment).
class LossScaler {
 public:
  /// Settings of LossScaler: the initial scale, and how it grows and backs off.
  struct Options {
    double init_scale = 65536.0;    ///< the first scale, 2^16
    double growth_factor = 2.0;     ///< applied after growth_interval consecutive finite steps; > 1
    double backoff_factor = 0.5;    ///< applied on a step with a non-finite gradient; in (0, 1)
    int64_t growth_interval = 2000; ///< consecutive finite steps before growing; > 0
  };

  LossScaler() : LossScaler(Options{}) {}
  /// Throws std::invalid_argument for options outside the ranges given on each field.
  explicit LossScaler(Options o) : o_(o) { validate(o_); }

  /// The settings.
  const Options& options() const { return o_; }

  /// `loss * S`. The scale lives on the device of the first loss it scales.
  torch::Tensor scale(const torch::Tensor& loss) {
    if (!scale_.defined()) lazy_init(loss.device());
    return loss * (scale_.device() == loss.device() ? scale_ : scale_.to(loss.device(), /*non_blocking=*/true));
  }

  /// Divides the gradients of `opt`'s parameters by S in place and records non-finite ones. Once per step:
  /// a second call before update() is an error, as in GradScaler.
  void unscale(torch::optim::Optimizer& opt);

  /// After unscale(), when each rank holds only its own partition's gradients (parallel::ShardedDataParallel at
  /// stage 2): replaces this process's inf flag by its maximum over the ranks through `reduce(tensor)` (a
  /// collective; every rank calls it, one without any gradient too), so that every rank skips the same steps and
  /// updates the scale alike, as one process checking every gradient would.
  template <class Reduce>
  void agree_found_inf(Reduce&& reduce) {
    require_scale("agree_found_inf");
    torch::Tensor f = found_inf_.empty() ? torch::zeros({}, torch::dtype(torch::kFloat).device(scale_.device()))
                                         : combined_found_inf().gt(0).to(torch::kFloat);
    reduce(f);
    if (found_inf_.empty()) {
      found_inf_.push_back({f, scale_.to(torch::kDouble).reciprocal().to(torch::kFloat)});
    } else {
      found_inf_.front().found_inf.copy_(f);
      for (size_t i = 1; i < found_inf_.size(); ++i) found_inf_[i].found_inf.zero_();
    }
    checked_ = true;
  }

  /// Unscales (when unscale() was not called this step), then steps `opt` unless a gradient was inf/NaN.
  /// Returns whether it stepped.
  bool step(torch::optim::Optimizer& opt);

  /// Unscales (when unscale() was not called this step), then steps a fused optimizer (`fused` is `opt` seen as
  /// optim::FusedGradScaling) with this step's inf flag as its `found_inf`: the kernel skips the update on the
  /// device when a gradient was inf/NaN, as GradScaler does for an optimizer with `_step_supports_amp_scaling`.
  /// Nothing is read back: the skip is counted on the device and reaches skipped_steps() at collect_skips().
  /// The optimizer's own grad_scale/found_inf must be unset (they are set for this call only).
  void step_on_device(torch::optim::Optimizer& opt, optim::FusedGradScaling& fused);

  /// Reads the skips step_on_device() counted on the device (one host read), adds them to skipped_steps(), and
  /// returns how many there were since the last call.
  int64_t collect_skips() {
    if (!pending_skips_.defined()) return 0;
    const int64_t n = pending_skips_.item<int64_t>();
    pending_skips_.zero_();
    skipped_ += n;
    return n;
  }

  /// Updates the scale from this step's inf checks (all devices combined); readies the next step.
  void update();

  /// Allocates what a captured step writes but would otherwise allocate inside the capture (the device skip
  /// counter), so that it lives outside the graph's memory pool. Called by the precision policy's prepare_capture.
  void prepare_capture(const torch::Device& device) {
    if (!pending_skips_.defined()) pending_skips_ = torch::zeros({}, torch::dtype(torch::kLong).device(device));
  }
  /// Records that a replayed CUDA graph ran this step's unscale and step on the device (their host code did not
  /// run), so that update() follows as after step(). Throws when no step was ever checked (nothing was captured).
  void replayed() {
    if (found_inf_.empty())
      throw std::logic_error(
          policytrain::detail::error_message("policytrain::precision::LossScaler::replayed",
                                             "no step was ever unscaled; a replayed "
                                             "graph must have captured unscale() and step_on_device()"));
    checked_ = true;
    stage_ = Stage::stepped;
  }

  /// Abandons the current step: forgets its inf checks and readies the next one, leaving the scale and the
  /// growth tracker unchanged (no update). For a step interrupted by an exception (out of memory inside
  /// optimizer.step()), whose gradients the caller discards; GradScaler has no such call, its per-step state
  /// is per optimizer and lives until update().
  void discard_step() {
    checked_ = false;
    stage_ = Stage::ready;
  }

  /// The current scale (the initial one before the first scale()); reads it from the device.
  double scale_value() const { return scale_.defined() ? scale_.item<double>() : o_.init_scale; }
  /// Consecutive finite steps since the scale last changed.
  int64_t growth_tracker() const { return tracker_.defined() ? tracker_.item<int64_t>() : init_tracker_; }
  /// Steps skipped because a gradient was inf/NaN (those skipped on the device are read from it).
  int64_t skipped_steps() const {
    return skipped_ + (pending_skips_.defined() ? pending_skips_.item<int64_t>() : 0);
  }
  /// Whether the last unscale() found an inf/NaN gradient (false before any unscale in this step).
  bool found_inf() const {
    if (!checked_) return false;
    double inf = 0;
    for (const auto& d : found_inf_) inf += d.found_inf.item<double>();
    return inf != 0;
  }

  /// Scale, growth tracker, skip count and the options (GradScaler's state_dict also carries the options).
  StateDict state_dict() const;
  /// Restores the scale, its settings, the growth tracker and the skip count; throws for invalid settings.
  void load_state_dict(const StateDict& d);

 private:
  enum class Stage { ready, unscaled, stepped };
  struct PerDevice {
    torch::Tensor found_inf, inv_scale;
  };

  static void validate(const Options& o);
  void lazy_init(torch::Device device);
  /// This step's inf flags, all devices summed, on the scale's device.
  torch::Tensor combined_found_inf() const;
  void require_scale(const char* what) const;

  Options o_;
  torch::Tensor scale_, tracker_;
  int64_t init_tracker_ = 0;
  int64_t skipped_ = 0;
  std::vector<PerDevice> found_inf_;  // per device, kept from step to step
  bool checked_ = false;              // whether this step's gradients were unscaled and checked
  torch::Tensor pending_skips_;  // steps skipped on the device by step_on_device(), not yet read
  Stage stage_ = Stage::ready;
};

// LossScaler's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL void LossScaler::unscale(torch::optim::Optimizer& opt) {
  if (stage_ == Stage::unscaled)
    throw std::logic_error(policytrain::detail::error_message("policytrain::precision::LossScaler::unscale",
                                                              "already called since the last update(); "
                                                              "unscale once per optimizer step"));
  if (stage_ == Stage::stepped)
    throw std::logic_error(policytrain::detail::error_message("policytrain::precision::LossScaler::unscale",
                                                              "called after step(); call update() first"));
  require_scale("unscale");
  // The reciprocal in double, as GradScaler, so that 1/S is exact for every power of two.
  const torch::Tensor inv_scale = scale_.to(torch::kDouble).reciprocal().to(torch::kFloat);

  struct Group {
    torch::Device device;
    c10::ScalarType dtype;
    std::vector<torch::Tensor> grads;
  };
  std::vector<Group> groups;
  std::vector<torch::Tensor> params;
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) params.push_back(p);
  // A parameter listed twice (tied weights) has one gradient: unscale it once.
  for (auto& p : unique_tensors(std::move(params))) {
      torch::Tensor g = p.grad();
      if (!g.defined()) continue;
      if (g.scalar_type() == torch::kHalf)
        throw std::invalid_argument(
            policytrain::detail::error_message("policytrain::precision::LossScaler::unscale",
                                               "a parameter's gradient is fp16 (the parameter is fp16); "
                                               "keep the parameters in fp32 and let autocast run the forward in fp16"));
      if (g.is_sparse()) g = g._values();
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& x) { return x.device == g.device() && x.dtype == g.scalar_type(); });
      if (it == groups.end()) groups.push_back({g.device(), g.scalar_type(), {g}});
      else it->grads.push_back(g);
    }

  // The flags live from step to step (zeroed here, not reallocated), so that a step captured into a CUDA graph
  // and the eager steps around it write the same tensors, and update() reads the one the last step wrote.
  for (auto& d : found_inf_) d.found_inf.zero_();
  for (auto& grp : groups) {
    auto it = std::find_if(found_inf_.begin(), found_inf_.end(),
                           [&](const PerDevice& x) { return x.found_inf.device() == grp.device; });
    if (it == found_inf_.end()) {
      found_inf_.push_back({torch::zeros({}, torch::dtype(torch::kFloat).device(grp.device)),
                            inv_scale.to(grp.device, /*non_blocking=*/true)});
      it = std::prev(found_inf_.end());
    } else {
      it->inv_scale.copy_(inv_scale, /*non_blocking=*/true);
    }
    at::_amp_foreach_non_finite_check_and_unscale_(grp.grads, it->found_inf, it->inv_scale);
  }
  checked_ = !groups.empty();
  stage_ = Stage::unscaled;
}

POLICYTRAIN_DECL void LossScaler::step_on_device(torch::optim::Optimizer& opt, optim::FusedGradScaling& fused) {
  if (stage_ == Stage::stepped)
    throw std::logic_error(policytrain::detail::error_message("policytrain::precision::LossScaler::step_on_device",
                                                              "already called since the last "
                                                              "update(); call update() after each step"));
  if (fused.grad_scale().defined() || fused.found_inf().defined())
    throw std::logic_error(policytrain::detail::error_message(
        "policytrain::precision::LossScaler::step_on_device",
        "the optimizer already has a "
        "grad_scale or found_inf set; clear_grad_scaling() it, the scaler sets its own"));
  if (stage_ == Stage::ready) unscale(opt);
  if (!checked_)
    throw std::logic_error(policytrain::detail::error_message(
        "policytrain::precision::LossScaler::step_on_device",
        "no gradients were checked (no "
        "parameter of the optimizer has a gradient); call backward on the scaled loss first"));
  // 0 or 1 exactly (the kernels skip on found_inf == 1), whatever the number of devices.
  const torch::Tensor skip = combined_found_inf().gt(0).to(torch::kFloat);
  fused.set_grad_scaling(torch::Tensor(), skip);
  try {
    opt.step();
  } catch (...) {
    fused.clear_grad_scaling();
    throw;
  }
  fused.clear_grad_scaling();
  if (!pending_skips_.defined()) pending_skips_ = torch::zeros({}, torch::dtype(torch::kLong).device(skip.device()));
  pending_skips_.add_(skip.to(torch::kLong));
  stage_ = Stage::stepped;
}

POLICYTRAIN_DECL StateDict LossScaler::state_dict() const {
  return {{"scale", scalar_tensor(scale_value())},
          {"growth_factor", scalar_tensor(o_.growth_factor)},
          {"backoff_factor", scalar_tensor(o_.backoff_factor)},
          {"growth_interval", scalar_tensor(o_.growth_interval)},
          {"growth_tracker", scalar_tensor(growth_tracker())},
          {"skipped_steps", scalar_tensor(skipped_steps())}};
}

POLICYTRAIN_DECL void LossScaler::load_state_dict(const StateDict& d) {
  Options o{state_double(d, "scale"), state_double(d, "growth_factor"), state_double(d, "backoff_factor"),
            state_int(d, "growth_interval")};
  validate(o);
  o_ = o;
  init_tracker_ = state_int(d, "growth_tracker");
  skipped_ = state_int(d, "skipped_steps");
  if (pending_skips_.defined()) pending_skips_.zero_();
  if (scale_.defined()) {
    scale_.fill_(o_.init_scale);
    tracker_.fill_(init_tracker_);
  }
  checked_ = false;
  stage_ = Stage::ready;
}

POLICYTRAIN_DECL bool LossScaler::step(torch::optim::Optimizer& opt) {
  if (stage_ == Stage::stepped)
    throw std::logic_error(policytrain::detail::error_message("policytrain::precision::LossScaler::step",
                                                              "already called since the last update(); "
                                                              "call update() after each step"));
  if (stage_ == Stage::ready) unscale(opt);
  if (!checked_)
    throw std::logic_error(policytrain::detail::error_message(
        "policytrain::precision::LossScaler::step",
        "no gradients were checked (no parameter of "
        "the optimizer has a gradient); call backward on the scaled loss before stepping"));
  double inf = 0;
  for (const auto& d : found_inf_) inf += d.found_inf.item<double>();
  const bool stepped = inf == 0;
  if (stepped) opt.step();
  else ++skipped_;
  stage_ = Stage::stepped;
  return stepped;
}

POLICYTRAIN_DECL void LossScaler::update() {
  require_scale("update");
  if (!checked_)
    throw std::logic_error(policytrain::detail::error_message("policytrain::precision::LossScaler::update",
                                                              "no inf checks were recorded; "
                                                              "call unscale() or step() before update()"));
  const torch::Tensor combined = combined_found_inf();
  at::_amp_update_scale_(scale_, tracker_, combined, o_.growth_factor, o_.backoff_factor, o_.growth_interval);
  checked_ = false;
  stage_ = Stage::ready;
}

POLICYTRAIN_DECL void LossScaler::validate(const Options& o) {
  if (!(o.init_scale > 0) || !(o.growth_factor > 1.0) || !(o.backoff_factor > 0 && o.backoff_factor < 1.0) ||
      o.growth_interval <= 0)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::precision::LossScaler",
        policytrain::detail::format(
            "options init_scale {}, growth_factor {}, backoff_factor {}, "
            "growth_interval {} are invalid; expected init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, "
            "growth_interval > 0",
            o.init_scale, o.growth_factor, o.backoff_factor, o.growth_interval)));
}

POLICYTRAIN_DECL void LossScaler::lazy_init(torch::Device device) {
  // GradScaler's dtypes: the update kernel requires a float32 scale and an int32 tracker.
  scale_ = torch::full({}, o_.init_scale, torch::dtype(torch::kFloat).device(device));
  tracker_ = torch::full({}, init_tracker_, torch::dtype(torch::kInt).device(device));
}

POLICYTRAIN_DECL torch::Tensor LossScaler::combined_found_inf() const {
  torch::Tensor combined = found_inf_.front().found_inf.to(scale_.device(), /*non_blocking=*/true);
  for (size_t i = 1; i < found_inf_.size(); ++i) combined = combined + found_inf_[i].found_inf.to(scale_.device(), true);
  return combined;
}

POLICYTRAIN_DECL void LossScaler::require_scale(const char* what) const {
  if (!scale_.defined())
    throw std::logic_error(policytrain::detail::error_message(
        policytrain::detail::format("policytrain::precision::LossScaler::{}", what),
        policytrain::detail::format("the scale was never used; "
                                    "call scale(loss) and backward on its result first")));
}
#endif

}  // namespace policytrain::precision
