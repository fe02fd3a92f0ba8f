#pragma once
/// \file
/// schedule::Lr — the learning rate of every param group as a function of the optimizer step: constant, step,
/// multi-step, exponential, linear, cosine, one-cycle, polynomial, warmup-stable-decay or reduce-on-plateau (a
/// run-time `Kind`), each with an optional linear warmup that may also ramp the momentum and give bias groups their
/// own starting lr (the Ultralytics behaviour).
///
/// The lr of group g at step t (t = optimizer steps that updated the weights so far) is
///   target_g(t) = base_g × lr_factor(options, horizon, t) × plateau factor,
/// and during the warmup (t < W) it rises linearly from start_g to the target:
///   lr_g(t) = start_g + (target_g(t) − start_g) × t / W,  start_g = warmup_bias_lr for a bias group,
///   else warmup_start_factor × base_g.
/// lr_factor() is the closed form of each kind (below, on absolute steps, so milestones mean what they say and
/// the decay kinds end at `lrf` on the last step); base_g is group g's lr when the first fit began.
///
/// Stepping: after_step advances t only when the step updated the weights (`stepped`), never per micro-batch;
/// reduce-on-plateau reads a validation metric at on_validation_end. state_dict holds t, the base values and the
/// plateau's state, so a resumed run (same epochs, data and accumulation) continues the exact sequence; the horizon
/// is recomputed at the first epoch of every fit, so a later fit with more epochs stretches the decay.
/// Hooks: on_fit_begin, on_epoch_begin, after_step, on_validation_end; state.
/// Requires: an optimizer whose options are SGD, Adam, AdamW or RMSprop to ramp the momentum (any optimizer for the
/// lr). The horizon (total steps, steps per epoch) comes from the fit — epochs × ceil(batches / accumulate), capped
/// by max_steps — unless `total_steps` is given; a loader without a size needs `total_steps` for the kinds that
/// decay over the run. Cost: a few scalar writes per optimizer step and group.
/// Example: examples/fashion_mnist/flags_schedule.hpp, tests/unit/test_schedule.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/state_dict.hpp>

namespace policytrain::schedule {

/// The learning-rate schedules schedule::Lr implements (see the file comment for each formula).
enum class Kind { constant, step, multistep, exponential, linear, cosine, onecycle, poly, wsd, plateau };
/// The unit of `step_size`, `milestones` and the exponential decay.
enum class Unit { steps, epochs };

/// The schedule's name ("constant", "cosine", ...), as kind_from_string reads it.
constexpr std::string_view to_string(Kind k) {
  constexpr std::string_view names[] = {"constant", "step", "multistep", "exponential", "linear",
                                        "cosine", "onecycle", "poly", "wsd", "plateau"};
  return names[static_cast<int>(k)];
}
/// The Kind named `s` (as to_string writes it); throws std::invalid_argument listing the names.
inline Kind kind_from_string(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(Kind::plateau); ++i)
    if (to_string(static_cast<Kind>(i)) == s) return static_cast<Kind>(i);
  throw std::invalid_argument(fmt::format("policytrain::schedule: unknown schedule '{}'; expected one of constant, "
                                          "step, multistep, exponential, linear, cosine, onecycle, poly, wsd, plateau", s));
}

/// Settings of schedule::Lr: the kind, its parameters, warmup and plateau.
struct LrOptions {
  /// Which schedule.
  Kind kind = Kind::constant;
  int64_t total_steps = 0;         ///< optimizer steps of the run (0: epochs × steps per epoch of the fit)
  double lrf = 0.01;               ///< final factor (linear, cosine, onecycle, poly, wsd); floor of plateau
  // step, multistep, exponential
  Unit unit = Unit::steps;         ///< unit of step_size, milestones and the exponential decay
  double step_size = 1;            ///< step: multiply by gamma every step_size units
  std::vector<double> milestones{};  ///< multistep: multiply by gamma at each milestone (units, ascending)
  double gamma = 0.1;              ///< step, multistep: factor per decay; exponential: factor per unit
  // onecycle
  double pct_start = 0;            ///< fraction of the run rising from 1/div_factor to 1 (0: cosine from 1 to lrf)
  double div_factor = 25;          ///< onecycle starts at 1/div_factor
  // poly
  double power = 1;                ///< poly: exponent of (1 − progress)
  // wsd
  double decay_fraction = 0.2;     ///< wsd: the last fraction of the run decays (linearly) from 1 to lrf
  // plateau
  std::string monitor = "loss";    ///< plateau: the validation metric (Metrics::get)
  bool maximize = false;           ///< plateau: true when a larger metric is better
  int64_t patience = 10;           ///< plateau: validations without improvement before a reduction
  double factor = 0.1;             ///< plateau: multiply by this at a reduction (never below lrf)
  double threshold = 1e-4;         ///< plateau: relative improvement that counts
  int64_t cooldown = 0;            ///< plateau: validations after a reduction during which none is counted
  // warmup
  int64_t warmup_steps = 0;        ///< linear warmup length in optimizer steps
  double warmup_epochs = 0;        ///< or in epochs (rounded to steps); give one of the two
  double warmup_start_factor = 0;  ///< warmup starts at this × base lr
  double warmup_momentum = -1;     ///< ≥ 0: momentum (SGD) / beta1 (Adam) rises from this to its base value
  double warmup_bias_lr = -1;      ///< ≥ 0: the groups in bias_groups start the warmup at this lr
  std::vector<size_t> bias_groups{};  ///< param groups holding biases (Ultralytics: its group 0)
};

/// Steps of the run as the schedule sees them.
struct Horizon {
  int64_t total_steps = 0;      ///< T
  int64_t steps_per_epoch = 0;  ///< 0 when unknown
};

/// Warmup length in steps.
inline int64_t warmup_steps(const LrOptions& o, const Horizon& h) {
  if (o.warmup_steps > 0) return o.warmup_steps;
  return static_cast<int64_t>(std::llround(o.warmup_epochs * static_cast<double>(h.steps_per_epoch)));
}

/// One unit of step_size / milestones / exponential decay, in steps.
inline double unit_steps(const LrOptions& o, const Horizon& h) {
  return o.unit == Unit::epochs ? static_cast<double>(h.steps_per_epoch) : 1.0;
}

/// The closed-form factor of `o.kind` at step t (1 for constant and plateau; the warmup is applied on top):
///   step         gamma^floor(t / (step_size · u))
///   multistep    gamma^(number of milestones m with m · u ≤ t)
///   exponential  gamma^(t / u)
///   linear       1 − (1 − lrf) · p                      p = min(t / T, 1)
///   cosine       lrf + (1 − lrf) · (1 + cos(π p)) / 2
///   onecycle     p < s: 1/d + (1 − 1/d) · (1 − cos(π p / s)) / 2, else cosine from 1 to lrf over (p − s) / (1 − s)
///   poly         lrf + (1 − lrf) · (1 − p)^power
///   wsd          1 until T − D, then 1 − (1 − lrf) · min((t − (T − D)) / D, 1)      D = round(decay_fraction · T)
/// with u the unit in steps (1, or steps per epoch), s = pct_start, d = div_factor.
inline double lr_factor(const LrOptions& o, const Horizon& h, int64_t t) {
  const double T = static_cast<double>(std::max<int64_t>(h.total_steps, 1));
  const double p = std::min(static_cast<double>(t) / T, 1.0);
  const double u = unit_steps(o, h);
  const double lrf = o.lrf;
  constexpr double pi = std::numbers::pi;
  switch (o.kind) {
    case Kind::constant:
    case Kind::plateau:
      return 1.0;
    case Kind::step:
      return std::pow(o.gamma, std::floor(static_cast<double>(t) / (o.step_size * u)));
    case Kind::multistep: {
      int n = 0;
      for (double m : o.milestones) n += m * u <= static_cast<double>(t) ? 1 : 0;
      return std::pow(o.gamma, n);
    }
    case Kind::exponential:
      return std::pow(o.gamma, static_cast<double>(t) / u);
    case Kind::linear:
      return 1.0 - (1.0 - lrf) * p;
    case Kind::cosine:
      return lrf + (1.0 - lrf) * (1.0 + std::cos(pi * p)) / 2.0;
    case Kind::onecycle: {
      const double s = o.pct_start;
      if (p < s) {
        const double lo = 1.0 / o.div_factor;
        return lo + (1.0 - lo) * (1.0 - std::cos(pi * p / s)) / 2.0;
      }
      const double q = s < 1 ? (p - s) / (1.0 - s) : 1.0;
      return lrf + (1.0 - lrf) * (1.0 + std::cos(pi * q)) / 2.0;
    }
    case Kind::poly:
      return lrf + (1.0 - lrf) * std::pow(1.0 - p, o.power);
    case Kind::wsd: {
      const double D = std::max(1.0, static_cast<double>(std::llround(o.decay_fraction * T)));
      const double q = std::clamp((static_cast<double>(t) - (T - D)) / D, 0.0, 1.0);
      return 1.0 - (1.0 - lrf) * q;
    }
  }
  return 1.0;
}

/// Whether `k` decays over the run, and so needs the total number of steps.
constexpr bool needs_total_steps(Kind k) {
  return k == Kind::linear || k == Kind::cosine || k == Kind::onecycle || k == Kind::poly || k == Kind::wsd;
}

/// The momentum an optimizer's options use (SGD, RMSprop: momentum; Adam, AdamW: beta1); NaN for other types.
inline double momentum_of(const torch::optim::OptimizerOptions& o) {
  if (auto* p = dynamic_cast<const torch::optim::SGDOptions*>(&o)) return p->momentum();
  if (auto* p = dynamic_cast<const torch::optim::AdamWOptions*>(&o)) return std::get<0>(p->betas());
  if (auto* p = dynamic_cast<const torch::optim::AdamOptions*>(&o)) return std::get<0>(p->betas());
  if (auto* p = dynamic_cast<const torch::optim::RMSpropOptions*>(&o)) return p->momentum();
  return std::numeric_limits<double>::quiet_NaN();
}
/// Sets the momentum (SGD, RMSprop) or beta1 (Adam, AdamW) of an optimizer's options; other types are left as they are.
inline void set_momentum(torch::optim::OptimizerOptions& o, double m) {
  if (auto* p = dynamic_cast<torch::optim::SGDOptions*>(&o)) p->momentum(m);
  else if (auto* p = dynamic_cast<torch::optim::AdamWOptions*>(&o)) p->betas({m, std::get<1>(p->betas())});
  else if (auto* p = dynamic_cast<torch::optim::AdamOptions*>(&o)) p->betas({m, std::get<1>(p->betas())});
  else if (auto* p = dynamic_cast<torch::optim::RMSpropOptions*>(&o)) p->momentum(m);
}

/// The schedule policy (see the file comment).
class Lr {
 public:
  /// Category: schedule (at most one per Trainer).
  static constexpr Category category = Category::schedule;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "schedule::Lr";

  Lr() = default;
  /// Throws std::invalid_argument for inconsistent options.
  explicit Lr(LrOptions o) : o_(std::move(o)) { validate(); }

  /// The settings.
  const LrOptions& options() const { return o_; }
  /// Optimizer steps taken under the schedule (the t of the formulas).
  int64_t step() const { return t_; }
  /// The run's steps as the schedule sees them (resolved at the first epoch).
  const Horizon& horizon() const { return h_; }
  /// The plateau's current factor (1 for the other kinds).
  double plateau_factor() const { return plateau_factor_; }
  /// The lr group g gets at step t (the closed form with the warmup; needs the bases and the horizon).
  double lr_at(size_t g, int64_t t) const {
    const double base = base_lr_.at(g);
    const double target = base * lr_factor(o_, h_, t) * plateau_factor_;
    const int64_t W = warmup_steps(o_, h_);
    if (t >= W) return target;
    const double start = is_bias_group(g) && o_.warmup_bias_lr >= 0 ? o_.warmup_bias_lr : o_.warmup_start_factor * base;
    return start + (target - start) * static_cast<double>(t) / static_cast<double>(W);
  }

  /// Records the base lr and momentum of each param group (once) and checks them against the options.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    resolved_ = false;  // the horizon follows each fit's options (a resumed run passes the same ones)
    auto& groups = ctx.optimizer().param_groups();
    if (base_lr_.empty()) {
      for (auto& g : groups) {
        base_lr_.push_back(g.options().get_lr());
        base_momentum_.push_back(momentum_of(g.options()));
      }
    }
    if (base_lr_.size() != groups.size())
      throw std::invalid_argument(fmt::format("{}: the optimizer has {} param groups but the schedule has {}; resume "
                                              "with the optimizer the state was saved with", name, groups.size(),
                                              base_lr_.size()));
    if (o_.warmup_momentum >= 0)
      for (size_t g = 0; g < groups.size(); ++g)
        if (std::isnan(base_momentum_[g]))
          throw std::invalid_argument(fmt::format("{}: warmup_momentum is set but param group {}'s optimizer has no "
                                                  "momentum (SGD, RMSprop) or beta1 (Adam, AdamW); unset warmup_momentum",
                                                  name, g));
    for (size_t g : o_.bias_groups)
      if (g >= groups.size())
        throw std::invalid_argument(fmt::format("{}: bias group {} but the optimizer has {} param groups", name, g,
                                                groups.size()));
  }

  /// Resolves the horizon on the first epoch, then sets every group's lr (and momentum).
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    if (!resolved_) resolve(ctx);
    apply(ctx);
  }

  /// After a step that was taken: advances t and sets the lr (and momentum).
  template <class Ctx>
  void after_step(Ctx& ctx, bool stepped) {
    if (!stepped) return;
    ++t_;
    apply(ctx);
  }

  /// Plateau: tracks the monitored metric and lowers the factor after `patience` epochs without improvement.
  template <class Ctx>
  void on_validation_end(Ctx& ctx, const Metrics& m) {
    if (o_.kind != Kind::plateau) return;
    const double v = m.get(o_.monitor);
    // PyTorch's ReduceLROnPlateau, relative threshold: better means beyond best by `threshold` of best.
    const bool better = std::isnan(best_) || (o_.maximize ? v > best_ * (1.0 + o_.threshold) : v < best_ * (1.0 - o_.threshold));
    if (better) {
      best_ = v;
      bad_ = 0;
    } else {
      ++bad_;
    }
    if (cooldown_left_ > 0) {
      --cooldown_left_;
      bad_ = 0;
    }
    if (bad_ > o_.patience) {
      plateau_factor_ = std::max(plateau_factor_ * o_.factor, o_.lrf);
      cooldown_left_ = o_.cooldown;
      bad_ = 0;
    }
    if (resolved_) apply(ctx);
  }

  /// Step, base lr and momentum of every group, and the plateau's state.
  StateDict state_dict() const {
    StateDict d{{"step", scalar_tensor(t_)},
                {"groups", scalar_tensor(static_cast<int64_t>(base_lr_.size()))},
                {"plateau/factor", scalar_tensor(plateau_factor_)},
                {"plateau/best", scalar_tensor(best_)},
                {"plateau/bad", scalar_tensor(bad_)},
                {"plateau/cooldown_left", scalar_tensor(cooldown_left_)}};
    for (size_t g = 0; g < base_lr_.size(); ++g) {
      d.emplace(fmt::format("base_lr/{}", g), scalar_tensor(base_lr_[g]));
      d.emplace(fmt::format("base_momentum/{}", g), scalar_tensor(base_momentum_[g]));
    }
    return d;
  }
  /// Restores what state_dict() saved.
  void load_state_dict(const StateDict& d) {
    t_ = state_int(d, "step");
    plateau_factor_ = state_double(d, "plateau/factor");
    best_ = state_double(d, "plateau/best");
    bad_ = state_int(d, "plateau/bad");
    cooldown_left_ = state_int(d, "plateau/cooldown_left");
    const int64_t n = state_int(d, "groups");
    base_lr_.clear();
    base_momentum_.clear();
    for (int64_t g = 0; g < n; ++g) {
      base_lr_.push_back(state_double(d, fmt::format("base_lr/{}", g)));
      base_momentum_.push_back(state_double(d, fmt::format("base_momentum/{}", g)));
    }
  }

 private:
  bool is_bias_group(size_t g) const {
    return std::find(o_.bias_groups.begin(), o_.bias_groups.end(), g) != o_.bias_groups.end();
  }

  void validate() const {
    auto bad = [](const std::string& what) {
      throw std::invalid_argument("policytrain::schedule::Lr: " + what);
    };
    if (o_.warmup_steps > 0 && o_.warmup_epochs > 0)
      bad(fmt::format("warmup_steps {} and warmup_epochs {} are both set; give one of them", o_.warmup_steps, o_.warmup_epochs));
    if (o_.warmup_steps < 0 || o_.warmup_epochs < 0) bad("the warmup length is negative; expected >= 0");
    if (o_.lrf < 0) bad(fmt::format("lrf is {}; expected >= 0", o_.lrf));
    if (o_.kind == Kind::step && o_.step_size <= 0) bad(fmt::format("step_size is {}; expected > 0", o_.step_size));
    if (o_.kind == Kind::multistep && !std::is_sorted(o_.milestones.begin(), o_.milestones.end()))
      bad("milestones are not in ascending order; sort them");
    if (o_.kind == Kind::onecycle && (o_.pct_start < 0 || o_.pct_start >= 1 || o_.div_factor <= 0))
      bad(fmt::format("pct_start {} and div_factor {}; expected 0 <= pct_start < 1 and div_factor > 0", o_.pct_start, o_.div_factor));
    if (o_.kind == Kind::wsd && (o_.decay_fraction <= 0 || o_.decay_fraction > 1))
      bad(fmt::format("decay_fraction is {}; expected 0 < decay_fraction <= 1", o_.decay_fraction));
    if (o_.kind == Kind::plateau && (o_.factor <= 0 || o_.factor >= 1 || o_.patience < 0 || o_.cooldown < 0))
      bad(fmt::format("plateau factor {}, patience {}, cooldown {}; expected 0 < factor < 1, patience >= 0, cooldown >= 0",
                      o_.factor, o_.patience, o_.cooldown));
  }

  /// The horizon from the fit: steps per epoch = ceil(batches / accumulate), total = epochs × that, capped by
  /// max_steps; total_steps overrides the total.
  template <class Ctx>
  void resolve(Ctx& ctx) {
    int64_t acc = 1;
    if constexpr (requires { ctx.template policy<Category::accumulation>().accumulate(); })
      acc = ctx.template policy<Category::accumulation>().accumulate();
    const int64_t batches = ctx.epoch_batches();
    h_.steps_per_epoch = batches > 0 ? (batches + acc - 1) / acc : 0;
    if (o_.total_steps > 0) {
      h_.total_steps = o_.total_steps;
    } else {
      h_.total_steps = h_.steps_per_epoch * ctx.options().epochs;
      if (ctx.options().max_steps >= 0) h_.total_steps = std::min(h_.total_steps, ctx.options().max_steps);
    }
    const bool epoch_units = (o_.unit == Unit::epochs && (o_.kind == Kind::step || o_.kind == Kind::multistep ||
                                                         o_.kind == Kind::exponential)) ||
                             (o_.warmup_steps == 0 && o_.warmup_epochs > 0);
    if (h_.steps_per_epoch == 0 && epoch_units)
      throw std::invalid_argument(fmt::format("{}: the schedule counts in epochs but the training data does not say "
                                              "how many batches an epoch has; give the lengths in steps", name));
    if (h_.total_steps <= 0 && needs_total_steps(o_.kind))
      throw std::invalid_argument(fmt::format("{}: the '{}' schedule decays over the run but its length is unknown "
                                              "(the training data has no size); set LrOptions::total_steps",
                                              name, to_string(o_.kind)));
    resolved_ = true;
  }

  template <class Ctx>
  void apply(Ctx& ctx) {
    auto& groups = ctx.optimizer().param_groups();
    const int64_t W = warmup_steps(o_, h_);
    for (size_t g = 0; g < groups.size() && g < base_lr_.size(); ++g) {
      auto& opts = groups[g].options();
      opts.set_lr(lr_at(g, t_));
      if (o_.warmup_momentum >= 0) {
        const double m = t_ >= W ? base_momentum_[g]
                                 : o_.warmup_momentum + (base_momentum_[g] - o_.warmup_momentum) *
                                                            static_cast<double>(t_) / static_cast<double>(W);
        set_momentum(opts, m);
      }
    }
  }

  LrOptions o_;
  Horizon h_;
  bool resolved_ = false;
  int64_t t_ = 0;
  std::vector<double> base_lr_, base_momentum_;
  double plateau_factor_ = 1;
  double best_ = std::numeric_limits<double>::quiet_NaN();
  int64_t bad_ = 0, cooldown_left_ = 0;
};

}  // namespace policytrain::schedule
