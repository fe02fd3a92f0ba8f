#pragma once
/// \file
/// schedule::Lr — the learning rate (and momentum) of every param group as a function of the optimizer step:
/// constant, step, multi-step, exponential, linear, cosine, one-cycle, polynomial, warmup-stable-decay or
/// reduce-on-plateau (a run-time `Kind`), each with an optional linear warmup that may also ramp the momentum and
/// give bias groups their own starting lr. By default every kind with a PyTorch counterpart gives exactly the
/// lr and momentum sequence of torch.optim.lr_scheduler stepped once per optimizer step (StepLR, MultiStepLR,
/// ExponentialLR, LinearLR, CosineAnnealingLR, PolynomialLR, OneCycleLR, ReduceLROnPlateau, and the warmup as
/// SequentialLR([LinearLR, main], [W])); docs/schedules.md gives the mapping of every option, and
/// tests/parity/schedules.py checks it against PyTorch itself.
///
/// The lr of group g at step t (t = optimizer steps attempted so far, skipped ones included, as PyTorch counts):
///   warmup_mode sequential (default, PyTorch's SequentialLR): while t < W, lr = start_g + (base_g − start_g) t / W;
///     afterwards lr = base_g × lr_factor(options, horizon shortened by W, t − W);
///   warmup_mode interpolate (Ultralytics): lr = start_g + (target − start_g) t / W while t < W, target =
///     base_g × lr_factor(options, horizon, t) afterwards too;
/// times the plateau factor of the group and the persistent scale (scale_lr(), which DivergenceRollback calls).
/// start_g = warmup_bias_lr for a bias group, else warmup_start_factor × base_g; base_g is group g's lr when the
/// first fit began.
///
/// Stepping: after_step advances t once per optimizer step (never per micro-batch), skipped or not unless
/// `count_skipped_steps` is false; reduce-on-plateau reads a validation metric at on_validation_end. state_dict
/// holds t, the base values, the scale, the plateau's state and the horizon, so a resumed run continues the exact
/// sequence. The horizon is the run's: resolved at its first fit's first epoch and kept by later fits and resumes,
/// so that a run stopped by max_steps and resumed with a larger budget finishes the cycle it started
/// (`horizon_per_fit = true` resolves it again at every fit instead: a later fit stretches the decay; an explicit
/// `total_steps` is always the horizon).
/// Hooks: on_fit_begin, on_epoch_begin, after_step, on_validation_end; state.
/// Requires: an optimizer whose options are SGD, Adam, AdamW or RMSprop to cycle or ramp the momentum (onecycle
/// cycles it by default, as PyTorch does; set cycle_momentum = false for another optimizer). The horizon (total
/// steps, steps per epoch) comes from the fit — epochs × ceil(batches / accumulate), capped by max_steps — unless
/// `total_steps` is given; a loader without a size needs `total_steps` for the kinds that decay over the run.
/// Cost: a few scalar writes per optimizer step and group.
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
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::schedule {

/// The learning-rate schedules schedule::Lr implements (see the file comment for each formula).
enum class Kind { constant, step, multistep, exponential, linear, cosine, onecycle, poly, wsd, plateau };
/// The unit of `step_size`, `milestones` and the exponential decay.
enum class Unit { steps, epochs };
/// Where the decaying kinds (linear, cosine, poly, wsd) reach `lrf`.
enum class DecayEnd {
  last_step,  ///< on the last step of the run, T − 1 (PyTorch's total_iters / T_max = T − 1); the default
  after_run   ///< one step after it, T (total_iters / T_max = T: the last step is taken one decrement above lrf)
};
/// How a warmup composes with the schedule.
enum class WarmupMode {
  sequential,  ///< PyTorch's SequentialLR([LinearLR(start, 1, W), main], milestones=[W]): the schedule starts at W
  interpolate  ///< Ultralytics: interpolates towards the schedule's value at the absolute step (np.interp)
};
/// OneCycleLR's anneal_strategy.
enum class Anneal { cos, linear };
/// ReduceLROnPlateau's threshold_mode: a relative or an absolute improvement counts.
enum class ThresholdMode { rel, abs };

/// The schedule's name ("constant", "cosine", ...), as kind_from_string reads it.
constexpr std::string_view to_string(Kind k) {
  constexpr std::string_view names[] = {"constant", "step", "multistep", "exponential", "linear",
                                        "cosine", "onecycle", "poly", "wsd", "plateau"};
  return names[static_cast<int>(k)];
}
/// The Kind named `s` (as to_string writes it); throws std::invalid_argument listing the names.
POLICYTRAIN_DECL Kind kind_from_string(std::string_view s)
#if POLICYTRAIN_DEFINE
{
  for (int i = 0; i <= static_cast<int>(Kind::plateau); ++i)
    if (to_string(static_cast<Kind>(i)) == s) return static_cast<Kind>(i);
  throw std::invalid_argument(policytrain::detail::format("policytrain::schedule: unknown schedule '{}'; expected one of constant, "
                                          "step, multistep, exponential, linear, cosine, onecycle, poly, wsd, plateau", s));
}
#else
;
#endif

/// Settings of schedule::Lr: the kind, its parameters, warmup and plateau.
struct LrOptions {
  /// Which schedule.
  Kind kind = Kind::constant;
  int64_t total_steps = 0;         ///< optimizer steps of the run (0: epochs × steps per epoch of the fit)
  /// false: the horizon of the run's first fit (saved in state_dict) holds for every later fit and resume, whatever
  /// their epochs and max_steps; true: each fit resolves its own from its epochs and max_steps (a later fit or a
  /// resume with a larger budget stretches the decay over the new length).
  bool horizon_per_fit = false;
  double lrf = 0.01;               ///< final factor (linear, cosine, onecycle, poly, wsd); floor of plateau
  DecayEnd decay_end = DecayEnd::last_step;  ///< linear, cosine, poly, wsd: reach lrf on the last step, or after it
  /// Whether a skipped step (non-finite gradients) advances the schedule. true: PyTorch's and Lightning's
  /// behaviour (scheduler.step() follows every attempted optimizer.step()); false: only steps that updated weights.
  bool count_skipped_steps = true;
  // step, multistep, exponential
  Unit unit = Unit::steps;         ///< unit of step_size, milestones and the exponential decay
  double step_size = 1;            ///< step: multiply by gamma every step_size units
  std::vector<double> milestones{};  ///< multistep: multiply by gamma at each milestone (units, ascending)
  double gamma = 0.1;              ///< step, multistep: factor per decay; exponential: factor per unit
  // onecycle (PyTorch's OneCycleLR with max_lr = the group's lr and final_div_factor = 1 / (lrf × div_factor))
  double pct_start = 0.3;          ///< fraction of the run rising from 1/div_factor to 1
  double div_factor = 25;          ///< onecycle starts at 1/div_factor
  Anneal anneal = Anneal::cos;     ///< onecycle: cosine or linear annealing
  bool three_phase = false;        ///< onecycle: rise, symmetric fall to 1/div_factor, then down to lrf
  bool cycle_momentum = true;      ///< onecycle: momentum (SGD, RMSprop) / beta1 (Adam, AdamW) moves inversely to lr
  double base_momentum = 0.85;     ///< onecycle: the momentum at the lr's peak
  double max_momentum = 0.95;      ///< onecycle: the momentum at the start and the end
  // poly
  double power = 1;                ///< poly: exponent of (1 − progress)
  // wsd
  double decay_fraction = 0.2;     ///< wsd: the last fraction of the run decays (linearly) from 1 to lrf
  // plateau
  std::string monitor = "loss";    ///< plateau: the validation metric (Metrics::get)
  bool maximize = false;           ///< plateau: true when a larger metric is better
  int64_t patience = 10;           ///< plateau: validations without improvement before a reduction
  double factor = 0.1;             ///< plateau: multiply by this at a reduction (never below lrf)
  double threshold = 1e-4;         ///< plateau: improvement that counts (relative or absolute)
  ThresholdMode threshold_mode = ThresholdMode::rel;  ///< plateau: how threshold is read
  int64_t cooldown = 0;            ///< plateau: validations after a reduction during which none is counted
  double plateau_eps = 1e-8;       ///< plateau: a reduction smaller than this (in lr) is not made
  // warmup
  int64_t warmup_steps = 0;        ///< linear warmup length in optimizer steps
  double warmup_epochs = 0;        ///< or in epochs (rounded to steps); give one of the two
  WarmupMode warmup_mode = WarmupMode::sequential;  ///< how the warmup composes with the schedule
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

/// The length L over which the decaying kinds go from 1 to lrf: T − 1 (DecayEnd::last_step) or T, at least 1.
inline double decay_length(const LrOptions& o, const Horizon& h) {
  const int64_t T = std::max<int64_t>(h.total_steps, 1);
  return static_cast<double>(std::max<int64_t>(o.decay_end == DecayEnd::last_step ? T - 1 : T, 1));
}

/// OneCycleLR's _annealing_cos / _annealing_linear: from `start` to `end` as pct goes from 0 to 1.
inline double anneal(Anneal a, double start, double end, double pct) {
  if (a == Anneal::cos) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
  return (end - start) * pct + start;
}

/// A point of the one-cycle schedule: the lr as a factor of the group's max lr, and the momentum.
struct OneCyclePoint {
  double lr_factor;  ///< lr / max_lr
  double momentum;   ///< the momentum (or beta1) when it is cycled
};
/// PyTorch's OneCycleLR.get_lr at step t of a run of `total` steps (phases end at pct_start·T − 1, [2·pct_start·T
/// − 2,] T − 1; the lr anneals 1/div_factor → 1 → lrf, the momentum max → base → max). Beyond the run it holds the
/// last step's values (PyTorch raises).
POLICYTRAIN_DECL OneCyclePoint onecycle_at(const LrOptions& o, int64_t total, int64_t t)
#if POLICYTRAIN_DEFINE
{
  const int64_t Ti = std::max<int64_t>(total, 1);
  const double T = static_cast<double>(Ti);
  const double step = static_cast<double>(std::clamp<int64_t>(t, 0, Ti - 1));
  struct Phase { double end_step, lr0, lr1, m0, m1; };
  const double init = 1.0 / o.div_factor, hi = o.max_momentum, lo = o.base_momentum;
  const Phase two[] = {{o.pct_start * T - 1, init, 1.0, hi, lo}, {T - 1, 1.0, o.lrf, lo, hi}};
  const Phase three[] = {{o.pct_start * T - 1, init, 1.0, hi, lo},
                         {2 * o.pct_start * T - 2, 1.0, init, lo, hi},
                         {T - 1, init, o.lrf, hi, hi}};
  const Phase* phases = o.three_phase ? three : two;
  const int n = o.three_phase ? 3 : 2;
  double start = 0;
  for (int i = 0; i < n; ++i) {
    const Phase& ph = phases[i];
    if (step <= ph.end_step || i == n - 1) {
      // PyTorch divides by zero (and raises) when a phase is empty; the phase's end is the sensible value.
      const double pct = ph.end_step == start ? 1.0 : (step - start) / (ph.end_step - start);
      return {anneal(o.anneal, ph.lr0, ph.lr1, pct), anneal(o.anneal, ph.m0, ph.m1, pct)};
    }
    start = ph.end_step;
  }
  return {o.lrf, hi};
}
#else
;
#endif

/// The closed-form factor of `o.kind` at step t of horizon h (1 for constant and plateau; the warmup is applied
/// on top); each is PyTorch's scheduler (right) stepped once per optimizer step:
///   step         gamma^floor(t / (step_size · u))                            StepLR(step_size · u)
///   multistep    gamma^(number of milestones m with m · u ≤ t)               MultiStepLR(m · u)
///   exponential  gamma^(t / u)                                               ExponentialLR(gamma^(1/u))
///   linear       1 − (1 − lrf) · p                      p = min(t / L, 1)    LinearLR(1, lrf, total_iters=L)
///   cosine       lrf + (1 − lrf) · (1 + cos(π p)) / 2                        CosineAnnealingLR(L, lrf · base)
///   onecycle     onecycle_at(o, T, t).lr_factor                              OneCycleLR(total_steps=T)
///   poly         lrf + (1 − lrf) · (1 − p)^power                             PolynomialLR(L, power) when lrf = 0
///   wsd          1 until L − D, then 1 − (1 − lrf) · min((t − (L − D)) / D, 1)   D = max(1, round(decay_fraction · T))
/// with u the unit in steps (1, or steps per epoch), L = decay_length (T − 1 by default: lrf on the last step).
POLICYTRAIN_DECL double lr_factor(const LrOptions& o, const Horizon& h, int64_t t)
#if POLICYTRAIN_DEFINE
{
  const double T = static_cast<double>(std::max<int64_t>(h.total_steps, 1));
  const double L = decay_length(o, h);
  const double p = std::min(static_cast<double>(t) / L, 1.0);
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
    case Kind::onecycle:
      return onecycle_at(o, h.total_steps, t).lr_factor;
    case Kind::poly:
      return lrf + (1.0 - lrf) * std::pow(1.0 - p, o.power);
    case Kind::wsd: {
      const double D = std::max(1.0, static_cast<double>(std::llround(o.decay_fraction * T)));
      const double q = std::clamp((static_cast<double>(t) - (L - D)) / D, 0.0, 1.0);
      return 1.0 - (1.0 - lrf) * q;
    }
  }
  return 1.0;
}
#else
;
#endif

/// Whether `k` decays over the run, and so needs the total number of steps.
constexpr bool needs_total_steps(Kind k) {
  return k == Kind::linear || k == Kind::cosine || k == Kind::onecycle || k == Kind::poly || k == Kind::wsd;
}

/// The momentum an optimizer's options use (SGD, RMSprop: momentum; Adam, AdamW: beta1); NaN for other types.
POLICYTRAIN_DECL double momentum_of(const torch::optim::OptimizerOptions& o)
#if POLICYTRAIN_DEFINE
{
  if (auto* p = dynamic_cast<const torch::optim::SGDOptions*>(&o)) return p->momentum();
  if (auto* p = dynamic_cast<const torch::optim::AdamWOptions*>(&o)) return std::get<0>(p->betas());
  if (auto* p = dynamic_cast<const torch::optim::AdamOptions*>(&o)) return std::get<0>(p->betas());
  if (auto* p = dynamic_cast<const torch::optim::RMSpropOptions*>(&o)) return p->momentum();
  return std::numeric_limits<double>::quiet_NaN();
}
#else
;
#endif
/// Sets the momentum (SGD, RMSprop) or beta1 (Adam, AdamW) of an optimizer's options; other types are left as they are.
POLICYTRAIN_DECL void set_momentum(torch::optim::OptimizerOptions& o, double m)
#if POLICYTRAIN_DEFINE
{
  if (auto* p = dynamic_cast<torch::optim::SGDOptions*>(&o)) p->momentum(m);
  else if (auto* p = dynamic_cast<torch::optim::AdamWOptions*>(&o)) p->betas({m, std::get<1>(p->betas())});
  else if (auto* p = dynamic_cast<torch::optim::AdamOptions*>(&o)) p->betas({m, std::get<1>(p->betas())});
  else if (auto* p = dynamic_cast<torch::optim::RMSpropOptions*>(&o)) p->momentum(m);
}
#else
;
#endif

/// The schedule policy (see the file comment).
class Lr {
 public:
  /// Category: schedule (at most one per Trainer).
  static constexpr Category category = Category::schedule;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "schedule::Lr";

  Lr() = default;
  /// Throws std::invalid_argument for inconsistent options.
  explicit Lr(LrOptions o) : o_(std::move(o)) {
    validate();
    best_ = worst();
  }

  /// The metric a plateau schedule watches (checked against the task's metrics when fit begins); empty otherwise.
  std::string monitored_metric() const { return o_.kind == Kind::plateau ? o_.monitor : std::string(); }
  /// The settings.
  const LrOptions& options() const { return o_; }
  /// Optimizer steps taken under the schedule (the t of the formulas).
  int64_t step() const { return t_; }
  /// The run's steps as the schedule sees them (resolved at the first fit's first epoch; see horizon_per_fit).
  const Horizon& horizon() const { return h_; }
  /// The plateau's current factor of param group g (1 for the other kinds).
  double plateau_factor(size_t g = 0) const { return g < plateau_factor_.size() ? plateau_factor_[g] : 1.0; }
  /// The persistent factor on every lr: the product of the scale_lr() calls (1 by default).
  double lr_scale() const { return lr_scale_; }
  /// Multiplies every lr from now on by `factor`, for good (callbacks::DivergenceRollback calls it when it lowers
  /// the lr, so that the schedule's next value does not undo the lowering). The optimizer is updated at the next
  /// step (the caller has already scaled the current lr).
  void scale_lr(double factor) {
    if (!(factor > 0))
      throw std::invalid_argument(policytrain::detail::format("{}: scale_lr({}); expected a factor > 0", name, factor));
    lr_scale_ *= factor;
  }

  /// The lr group g gets at step t (needs the bases and the horizon; see the file comment).
  double lr_at(size_t g, int64_t t) const {
    const double base = base_lr_.at(g);
    const int64_t W = warmup_steps(o_, h_);
    const double start = is_bias_group(g) && o_.warmup_bias_lr >= 0 ? o_.warmup_bias_lr : o_.warmup_start_factor * base;
    double lr = 0;
    if (o_.warmup_mode == WarmupMode::sequential) {
      lr = t < W ? start + (base - start) * static_cast<double>(t) / static_cast<double>(W)
                 : base * lr_factor(o_, main_horizon(), t - W);
    } else {
      const double target = base * lr_factor(o_, h_, t);
      lr = t < W ? start + (target - start) * static_cast<double>(t) / static_cast<double>(W) : target;
    }
    return lr * plateau_factor(g) * lr_scale_;
  }
  /// The momentum (SGD, RMSprop) or beta1 (Adam, AdamW) group g gets at step t; NaN when the schedule leaves it.
  double momentum_at(size_t g, int64_t t) const {
    const bool cycled = o_.kind == Kind::onecycle && o_.cycle_momentum;
    if (!cycled && o_.warmup_momentum < 0) return std::numeric_limits<double>::quiet_NaN();
    const int64_t W = warmup_steps(o_, h_);
    double own = base_momentum_.at(g);
    if (cycled)
      own = o_.warmup_mode == WarmupMode::sequential ? onecycle_at(o_, main_horizon().total_steps, std::max<int64_t>(t - W, 0)).momentum
                                                     : onecycle_at(o_, h_.total_steps, t).momentum;
    if (o_.warmup_momentum >= 0 && t < W)
      return o_.warmup_momentum + (own - o_.warmup_momentum) * static_cast<double>(t) / static_cast<double>(W);
    return own;
  }

  /// Records the base lr and momentum of each param group the first time it is seen (re-read at every fit, so a
  /// group added to the optimizer between two fits joins the schedule at its own lr, at the schedule's current
  /// step) and checks them against the options.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    resolved_ = false;  // at the first epoch: the run's horizon, or this fit's with horizon_per_fit
    auto& groups = ctx.optimizer().param_groups();
    if (groups.size() < base_lr_.size())
      throw std::invalid_argument(policytrain::detail::format(
          "policytrain::{}: the optimizer has {} param groups but the schedule's state has {} (an optimizer loses no "
          "group between fits, so this state came from another optimizer); load a state saved with this optimizer, "
          "or give the schedule a fresh state", name, groups.size(), base_lr_.size()));
    for (size_t g = base_lr_.size(); g < groups.size(); ++g) {
      base_lr_.push_back(groups[g].options().get_lr());
      base_momentum_.push_back(momentum_of(groups[g].options()));
    }
    // A group that joins starts unreduced by a plateau, as PyTorch's ReduceLROnPlateau leaves a group it has not
    // reduced yet.
    if (plateau_factor_.size() < base_lr_.size()) plateau_factor_.resize(base_lr_.size(), 1.0);
    for (size_t g = 0; g < groups.size(); ++g) {
      if (!std::isnan(base_momentum_[g])) continue;
      if (o_.warmup_momentum >= 0)
        throw std::invalid_argument(policytrain::detail::format("{}: warmup_momentum is set but param group {}'s optimizer has no "
                                                "momentum (SGD, RMSprop) or beta1 (Adam, AdamW); unset warmup_momentum",
                                                name, g));
      if (o_.kind == Kind::onecycle && o_.cycle_momentum)
        throw std::invalid_argument(policytrain::detail::format("{}: onecycle cycles the momentum (cycle_momentum, as PyTorch's "
                                                "OneCycleLR) but param group {}'s optimizer has no momentum (SGD, "
                                                "RMSprop) or beta1 (Adam, AdamW); set cycle_momentum = false", name, g));
    }
    for (size_t g : o_.bias_groups)
      if (g >= groups.size())
        throw std::invalid_argument(policytrain::detail::format("{}: bias group {} but the optimizer has {} param groups", name, g,
                                                groups.size()));
  }

  /// Resolves the horizon on the first epoch, then sets every group's lr (and momentum).
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    if (!resolved_) resolve(ctx);
    apply(ctx);
  }

  /// After an optimizer step: advances t (unless the step was skipped and count_skipped_steps is false) and
  /// sets the lr (and momentum) of the next step.
  template <class Ctx>
  void after_step(Ctx& ctx, bool stepped) {
    if (!stepped && !o_.count_skipped_steps) return;
    ++t_;
    apply(ctx);
  }

  /// Plateau: PyTorch's ReduceLROnPlateau.step(metric) — tracks the best value of the monitored metric and, after
  /// more than `patience` validations without an improvement beyond `threshold`, multiplies every group's lr by
  /// `factor` (not below lrf × its base, and not by less than plateau_eps), then ignores `cooldown` validations.
  template <class Ctx>
  void on_validation_end(Ctx& ctx, const Metrics& m) {
    if (o_.kind != Kind::plateau) return;
    const double v = m.get(o_.monitor);
    if (is_better(v)) {
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
      if (plateau_factor_.size() < base_lr_.size()) plateau_factor_.resize(base_lr_.size(), 1.0);
      for (size_t g = 0; g < base_lr_.size(); ++g) {
        const double old_lr = base_lr_[g] * plateau_factor_[g];
        const double new_lr = std::max(old_lr * o_.factor, o_.lrf * base_lr_[g]);
        if (old_lr - new_lr > o_.plateau_eps) plateau_factor_[g] = new_lr / base_lr_[g];
      }
      cooldown_left_ = o_.cooldown;
      bad_ = 0;
    }
    if (resolved_) apply(ctx);
  }

  /// Step, base lr and momentum of every group, the persistent scale and the plateau's state.
  StateDict state_dict() const;
  /// Restores what state_dict() saved (a state from before per-group plateau factors and lr_scale: every group
  /// gets "plateau/factor", the scale is 1).
  void load_state_dict(const StateDict& d);

 private:
  bool is_bias_group(size_t g) const {
    return std::find(o_.bias_groups.begin(), o_.bias_groups.end(), g) != o_.bias_groups.end();
  }
  /// The horizon the schedule itself runs over: the whole run, or with a sequential warmup what follows it.
  Horizon main_horizon() const {
    if (o_.warmup_mode != WarmupMode::sequential) return h_;
    return {std::max<int64_t>(h_.total_steps - warmup_steps(o_, h_), 1), h_.steps_per_epoch};
  }
  double worst() const {
    return o_.maximize ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  /// ReduceLROnPlateau._is_better.
  bool is_better(double v) const {
    const bool rel = o_.threshold_mode == ThresholdMode::rel;
    if (o_.maximize) return rel ? v > best_ * (o_.threshold + 1.0) : v > best_ + o_.threshold;
    return rel ? v < best_ * (1.0 - o_.threshold) : v < best_ - o_.threshold;
  }

  void validate() const;
  /// The horizon from the fit: steps per epoch = ceil(batches / accumulate), total = epochs × that, capped by
  /// max_steps; total_steps overrides the total.
  template <class Ctx>
  void resolve(Ctx& ctx) {
    if (!o_.horizon_per_fit && o_.total_steps == 0 && recorded_) {
      resolved_ = true;  // the run's horizon, from its first fit (or the state it was resumed from)
      return;
    }
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
      throw std::invalid_argument(policytrain::detail::format("{}: the schedule counts in epochs but the training data does not say "
                                              "how many batches an epoch has; give the lengths in steps", name));
    if (h_.total_steps <= 0 && needs_total_steps(o_.kind))
      throw std::invalid_argument(policytrain::detail::format("{}: the '{}' schedule decays over the run but its length is unknown "
                                              "(the training data has no size); set LrOptions::total_steps",
                                              name, to_string(o_.kind)));
    resolved_ = true;
    recorded_ = true;
  }

  template <class Ctx>
  void apply(Ctx& ctx) {
    auto& groups = ctx.optimizer().param_groups();
    for (size_t g = 0; g < groups.size() && g < base_lr_.size(); ++g) {
      auto& opts = groups[g].options();
      opts.set_lr(lr_at(g, t_));
      const double m = momentum_at(g, t_);
      if (!std::isnan(m)) set_momentum(opts, m);
    }
  }

  LrOptions o_;
  Horizon h_;
  bool resolved_ = false;
  bool recorded_ = false;  // h_ holds the run's horizon (resolved once, or restored by load_state_dict)
  int64_t t_ = 0;
  std::vector<double> base_lr_, base_momentum_, plateau_factor_;
  double lr_scale_ = 1;
  double best_ = std::numeric_limits<double>::infinity();
  int64_t bad_ = 0, cooldown_left_ = 0;
};

// Lr's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL StateDict Lr::state_dict() const {
  StateDict d{{"step", scalar_tensor(t_)},
              {"groups", scalar_tensor(static_cast<int64_t>(base_lr_.size()))},
              {"lr_scale", scalar_tensor(lr_scale_)},
              {"plateau/factor", scalar_tensor(plateau_factor(0))},
              {"plateau/best", scalar_tensor(best_)},
              {"plateau/bad", scalar_tensor(bad_)},
              {"plateau/cooldown_left", scalar_tensor(cooldown_left_)}};
  for (size_t g = 0; g < base_lr_.size(); ++g) {
    d.emplace(policytrain::detail::format("base_lr/{}", g), scalar_tensor(base_lr_[g]));
    d.emplace(policytrain::detail::format("base_momentum/{}", g), scalar_tensor(base_momentum_[g]));
    d.emplace(policytrain::detail::format("plateau/factor/{}", g), scalar_tensor(plateau_factor(g)));
  }
  // Only once resolved, so that a fresh schedule's state (what a resume compares the file against) does not ask a
  // file written before the horizon was saved for it.
  if (recorded_) {
    d.emplace("horizon/total_steps", scalar_tensor(h_.total_steps));
    d.emplace("horizon/steps_per_epoch", scalar_tensor(h_.steps_per_epoch));
  }
  return d;
}

POLICYTRAIN_DECL void Lr::load_state_dict(const StateDict& d) {
  t_ = state_int(d, "step");
  lr_scale_ = d.count("lr_scale") ? state_double(d, "lr_scale") : 1.0;
  best_ = state_double(d, "plateau/best");
  if (std::isnan(best_)) best_ = worst();  // written by a version that started from NaN
  bad_ = state_int(d, "plateau/bad");
  cooldown_left_ = state_int(d, "plateau/cooldown_left");
  // The run's horizon; a state without one (written before it was saved, or before the first epoch) resolves it
  // from the next fit.
  recorded_ = d.count("horizon/total_steps") > 0 && d.count("horizon/steps_per_epoch") > 0;
  if (recorded_) h_ = {state_int(d, "horizon/total_steps"), state_int(d, "horizon/steps_per_epoch")};
  const int64_t n = state_int(d, "groups");
  base_lr_.clear();
  base_momentum_.clear();
  plateau_factor_.clear();
  for (int64_t g = 0; g < n; ++g) {
    base_lr_.push_back(state_double(d, policytrain::detail::format("base_lr/{}", g)));
    base_momentum_.push_back(state_double(d, policytrain::detail::format("base_momentum/{}", g)));
    const std::string pf = policytrain::detail::format("plateau/factor/{}", g);
    plateau_factor_.push_back(state_double(d, d.count(pf) ? pf : std::string("plateau/factor")));
  }
}

POLICYTRAIN_DECL void Lr::validate() const {
  auto bad = [](const std::string& what) {
    throw std::invalid_argument("policytrain::schedule::Lr: " + what);
  };
  if (o_.warmup_steps > 0 && o_.warmup_epochs > 0)
    bad(policytrain::detail::format("warmup_steps {} and warmup_epochs {} are both set; give one of them", o_.warmup_steps, o_.warmup_epochs));
  if (o_.warmup_steps < 0 || o_.warmup_epochs < 0) bad("the warmup length is negative; expected >= 0");
  if (o_.lrf < 0) bad(policytrain::detail::format("lrf is {}; expected >= 0", o_.lrf));
  if (o_.kind == Kind::step && o_.step_size <= 0) bad(policytrain::detail::format("step_size is {}; expected > 0", o_.step_size));
  if (o_.kind == Kind::multistep && !std::is_sorted(o_.milestones.begin(), o_.milestones.end()))
    bad("milestones are not in ascending order; sort them");
  if (o_.kind == Kind::onecycle && (o_.pct_start < 0 || o_.pct_start >= 1 || o_.div_factor <= 0))
    bad(policytrain::detail::format("pct_start {} and div_factor {}; expected 0 <= pct_start < 1 and div_factor > 0", o_.pct_start, o_.div_factor));
  if (o_.kind == Kind::onecycle && o_.three_phase && o_.pct_start > 0.5)
    bad(policytrain::detail::format("three_phase with pct_start {}: the rise and the fall would overlap; expected pct_start <= 0.5",
                    o_.pct_start));
  if (o_.kind == Kind::onecycle && o_.cycle_momentum &&
      !(o_.base_momentum >= 0 && o_.base_momentum <= o_.max_momentum && o_.max_momentum < 1))
    bad(policytrain::detail::format("base_momentum {} and max_momentum {}; expected 0 <= base_momentum <= max_momentum < 1",
                    o_.base_momentum, o_.max_momentum));
  if (o_.kind == Kind::wsd && (o_.decay_fraction <= 0 || o_.decay_fraction > 1))
    bad(policytrain::detail::format("decay_fraction is {}; expected 0 < decay_fraction <= 1", o_.decay_fraction));
  if (o_.kind == Kind::plateau && (o_.factor <= 0 || o_.factor >= 1 || o_.patience < 0 || o_.cooldown < 0))
    bad(policytrain::detail::format("plateau factor {}, patience {}, cooldown {}; expected 0 < factor < 1, patience >= 0, cooldown >= 0",
                    o_.factor, o_.patience, o_.cooldown));
  if (o_.kind == Kind::plateau && (o_.threshold < 0 || o_.plateau_eps < 0))
    bad(policytrain::detail::format("plateau threshold {} and plateau_eps {}; expected both >= 0", o_.threshold, o_.plateau_eps));
}
#endif

}  // namespace policytrain::schedule
