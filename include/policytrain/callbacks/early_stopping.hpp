#pragma once
/// \file
/// callbacks::EarlyStopping — stops training when a validation metric has not improved for `patience`
/// validations (an improvement beats the best by more than `min_delta`; a validation is an epoch's end, or every
/// FitOptions::val_every_steps steps, when messages name steps), when it is not finite, when it is
/// better than `stopping_threshold` (good enough) or worse than `divergence_threshold` (hopeless), with the
/// semantics of PyTorch Lightning's EarlyStopping. Reports the best value and epoch in TrainState
/// (best_metric, best_epoch); the Trainer's FitResult::stopped_early tells whether it stopped.
/// Hooks: on_validation_end (returns true to stop). Stateful (best, epoch, wait count) for checkpoints.
/// Requires a validation set (`fit(train, val)`). Cost: nothing per step; when `enabled` is false, a branch.
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include <policytrain/core/metrics.hpp>
#include <policytrain/core/monitor.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::callbacks {

/// Stops training when a validation metric stops improving, is not finite, or crosses a threshold (see the file comment).
class EarlyStopping {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::EarlyStopping";
  /// Settings of EarlyStopping: the metric, patience and thresholds.
  struct Options {
    /// false: never stop (a branch per validation).
    bool enabled = true;
    /// Metric ("loss", "accuracy", ...), mode, min_delta. `= Monitor()`: see checkpoint::Disk::Options::monitor.
    Monitor monitor = Monitor();
    int64_t patience = 3;                       ///< validations without improvement before stopping
    bool check_finite = true;                   ///< stop at once on a NaN or infinite metric
    std::optional<double> stopping_threshold{};   ///< stop once the metric is better than this
    std::optional<double> divergence_threshold{}; ///< stop once the metric is worse than this
    std::FILE* log = stderr;                    ///< where the reason is printed (main rank; nullptr: nowhere)
  };

  EarlyStopping() = default;
  /// Throws std::invalid_argument for patience < 1.
  explicit EarlyStopping(Options o);
  /// Copied and moved as its members are, out of line: the implicit members were generated in every file that
  /// builds a Trainer with an EarlyStopping.
  ///@{
  EarlyStopping(const EarlyStopping&);
  EarlyStopping(EarlyStopping&&) noexcept;
  EarlyStopping& operator=(const EarlyStopping&);
  EarlyStopping& operator=(EarlyStopping&&) noexcept;
  ~EarlyStopping();
  ///@}

  /// The settings.
  const Options& options() const { return o_; }
  /// The metric watched (checked against the task's metrics when fit begins); empty when disabled.
  std::string monitored_metric() const { return o_.enabled ? o_.monitor.metric : std::string(); }
  /// Best value of the metric so far (NaN before the first validation).
  double best() const { return best_; }
  /// Epoch of the best value (-1 before the first validation).
  int64_t best_epoch() const { return best_epoch_; }
  /// Validations since the last improvement.
  int64_t wait() const { return wait_; }
  /// The global step of the validation with the best value (-1 before the first validation).
  int64_t best_step() const { return best_step_; }
  /// The epoch at which it asked to stop (-1: it did not), and why.
  int64_t stopped_epoch() const { return stopped_epoch_; }
  /// The global step at which it asked to stop (-1: it did not).
  int64_t stopped_step() const { return stopped_step_; }
  /// Why it asked to stop (empty: it did not).
  const std::string& reason() const { return reason_; }

  /// Updates best and wait, reports them in TrainState; returns true to stop the fit.
  template <class Ctx>
  bool on_validation_end(Ctx& ctx, const Metrics& m) {
    if (!o_.enabled) return false;
    const double v = m.get(o_.monitor.metric);
    const int64_t epoch = ctx.state().epoch;
    const int64_t step = ctx.state().global_step;
    // A run validated every N steps counts validations and names steps; an epoch-validated one, epochs.
    const bool steps = ctx.options().val_every_steps > 0;
    const auto& mon = o_.monitor;
    std::string why;
    if (mon.improves(v, best_)) {
      best_ = v;
      best_epoch_ = epoch;
      best_step_ = step;
      wait_ = 0;
    } else if (std::isfinite(v)) {
      ++wait_;
    }
    if (o_.check_finite && !std::isfinite(v))
      why = policytrain::detail::format("{} is {}", mon.metric, v);
    else if (o_.stopping_threshold && mon.better(v, *o_.stopping_threshold))
      why = policytrain::detail::format("{} {:.6g} reached the stopping threshold {:.6g}", mon.metric, v, *o_.stopping_threshold);
    else if (o_.divergence_threshold && mon.worse(v, *o_.divergence_threshold))
      why = policytrain::detail::format("{} {:.6g} is beyond the divergence threshold {:.6g}", mon.metric, v, *o_.divergence_threshold);
    else if (wait_ >= o_.patience && steps)
      why = policytrain::detail::format("{} did not improve for {} validations (best {:.6g} at step {})", mon.metric, wait_, best_, best_step_);
    else if (wait_ >= o_.patience)
      why = policytrain::detail::format("{} did not improve for {} epochs (best {:.6g} at epoch {})", mon.metric, wait_, best_, best_epoch_);
    ctx.state().best_metric = best_;
    ctx.state().best_epoch = best_epoch_;
    ctx.state().best_step = best_step_;
    if (why.empty()) return false;
    stopped_epoch_ = epoch;
    stopped_step_ = step;
    reason_ = why;
    if (o_.log && ctx.is_main()) {
      std::fprintf(o_.log, "policytrain::callbacks::EarlyStopping: stopping after %s %lld: %s\n", steps ? "step" : "epoch",
                   static_cast<long long>(steps ? step : epoch), why.c_str());
      std::fflush(o_.log);
    }
    return true;
  }

  /// Best value, its epoch and the wait count.
  StateDict state_dict() const;
  /// Restores what state_dict() saved.
  void load_state_dict(const StateDict& d);

 private:
  Options o_;
  double best_ = std::numeric_limits<double>::quiet_NaN();
  int64_t best_epoch_ = -1;
  int64_t best_step_ = -1;
  int64_t wait_ = 0;
  int64_t stopped_epoch_ = -1;
  int64_t stopped_step_ = -1;
  std::string reason_;
};

// EarlyStopping's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL EarlyStopping::EarlyStopping(const EarlyStopping&) = default;
POLICYTRAIN_DECL EarlyStopping::EarlyStopping(EarlyStopping&&) noexcept = default;
POLICYTRAIN_DECL EarlyStopping& EarlyStopping::operator=(const EarlyStopping&) = default;
POLICYTRAIN_DECL EarlyStopping& EarlyStopping::operator=(EarlyStopping&&) noexcept = default;
POLICYTRAIN_DECL EarlyStopping::~EarlyStopping() = default;
POLICYTRAIN_DECL StateDict EarlyStopping::state_dict() const {
  return {{"best", scalar_tensor(best_)}, {"best_epoch", scalar_tensor(best_epoch_)}, {"best_step", scalar_tensor(best_step_)},
          {"wait", scalar_tensor(wait_)}};
}

POLICYTRAIN_DECL void EarlyStopping::load_state_dict(const StateDict& d) {
  best_ = state_double(d, "best");
  best_epoch_ = state_int(d, "best_epoch");
  wait_ = state_int(d, "wait");
  best_step_ = d.count("best_step") ? state_int(d, "best_step") : -1;  // written since training by steps
}

POLICYTRAIN_DECL EarlyStopping::EarlyStopping(Options o) : o_(std::move(o)) {
  if (o_.patience < 1)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::callbacks::EarlyStopping",
        policytrain::detail::format("patience is {}, expected >= 1", o_.patience)));
}
#endif

}  // namespace policytrain::callbacks
