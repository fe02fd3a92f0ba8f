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
#include <cstdio>
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
#include <policytrain/schedule/lr_curve.hpp>
#include <policytrain/schedule/lr_options.hpp>
#include <policytrain/schedule/momentum.hpp>

namespace policytrain::schedule {

/// The schedule policy (see the file comment).
class Lr {
 public:
  /// Category: schedule (at most one per Trainer).
  static constexpr Category category = Category::schedule;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "schedule::Lr";

  Lr() = default;
  /// Throws std::invalid_argument for inconsistent options.
  explicit Lr(LrOptions o);
  /// Copied and moved as its members are, out of line: the implicit members were generated in every file that
  /// builds a Trainer with an Lr.
  ///@{
  Lr(const Lr&);
  Lr(Lr&&) noexcept;
  Lr& operator=(const Lr&);
  Lr& operator=(Lr&&) noexcept;
  ~Lr();
  ///@}

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
      throw std::invalid_argument(policytrain::detail::error_message(
          name, policytrain::detail::format("scale_lr({}); expected a factor > 0", factor)));
    lr_scale_ *= factor;
  }

  /// The lr group g gets at step t (needs the bases and the horizon; see the file comment).
  double lr_at(size_t g, int64_t t) const;
  /// Whether the schedule sets the momentum (SGD, RMSprop) or beta1 (Adam, AdamW): onecycle's cycle, or a momentum
  /// warmup.
  bool schedules_momentum() const { return (o_.kind == Kind::onecycle && o_.cycle_momentum) || o_.warmup_momentum >= 0; }
  /// The momentum (SGD, RMSprop) or beta1 (Adam, AdamW) group g gets at step t; NaN when the schedule leaves it.
  double momentum_at(size_t g, int64_t t) const;

  /// Records the base lr and momentum of each param group the first time it is seen (re-read at every fit, so a
  /// group added to the optimizer between two fits joins the schedule at its own lr, at the schedule's current
  /// step) and checks them against the options.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    begin_fit(ctx.optimizer());
  }

  /// Resolves the horizon on the first epoch, then sets every group's lr (and momentum).
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    if (!resolved_) resolve_first_epoch(fit_horizon(ctx), ctx.is_main());
    apply(ctx.optimizer());
  }

  /// After an optimizer step: advances t (unless the step was skipped and count_skipped_steps is false) and
  /// sets the lr (and momentum) of the next step.
  template <class Ctx>
  void after_step(Ctx& ctx, bool stepped) {
    if (!stepped && !o_.count_skipped_steps) return;
    ++t_;
    apply(ctx.optimizer());
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
    if (resolved_) apply(ctx.optimizer());
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
  static std::string joined(const std::vector<std::string>& v);
  /// A resume (load_state_dict after on_fit_begin): the checkpoint's base lrs and momenta against what this run's
  /// optimizer asked for; kept or taken (on_resume), and said.
  void reconcile(std::vector<std::string>& said);

  /// The horizon this fit gives: steps per epoch = ceil(batches / accumulate), total = epochs × that, capped by
  /// max_steps (a run by steps: max_steps); total_steps overrides the total.
  template <class Ctx>
  Horizon fit_horizon(Ctx& ctx) const {
    Horizon h;
    int64_t acc = 1;
    if constexpr (requires { ctx.template policy<Category::accumulation>().accumulate(); })
      acc = ctx.template policy<Category::accumulation>().accumulate();
    const int64_t batches = ctx.epoch_batches();
    h.steps_per_epoch = batches > 0 ? (batches + acc - 1) / acc : 0;
    if (o_.total_steps > 0) h.total_steps = o_.total_steps;
    else if (ctx.options().by_steps()) h.total_steps = ctx.options().max_steps;
    else {
      h.total_steps = h.steps_per_epoch * ctx.options().epoch_limit();
      if (ctx.options().max_steps >= 0) h.total_steps = std::min(h.total_steps, ctx.options().max_steps);
    }
    return h;
  }

  /// At fit begin: records this run's optimizer's lrs and momenta and the groups that join (on_fit_begin).
  void begin_fit(torch::optim::Optimizer& optimizer);
  /// At the fit's first epoch: reconciles a resume, resolves the horizon (`fit`: this fit's, fit_horizon) and says
  /// what it changed on the main process (on_epoch_begin).
  void resolve_first_epoch(const Horizon& fit, bool is_main);
  /// The horizon: the run's (its first fit's, or the checkpoint's), or this fit's (`f`, see fit_horizon); a later
  /// fit or a resume whose own differs says which it runs over (`said`).
  void resolve(const Horizon& f, bool is_main, std::vector<std::string>& said);
  /// Sets every group's lr (and momentum) for step t_.
  void apply(torch::optim::Optimizer& optimizer);

  LrOptions o_;
  Horizon h_;
  bool resolved_ = false;
  bool recorded_ = false;  // h_ holds the run's horizon (resolved once, or restored by load_state_dict)
  bool resumed_ = false;   // a state was loaded since this fit began (a resume): reconciled at the first epoch
  std::vector<double> asked_lr_, asked_momentum_;  // this run's optimizer's, at fit begin (before a resume)
  int64_t t_ = 0;
  std::vector<double> base_lr_, base_momentum_, plateau_factor_;
  double lr_scale_ = 1;
  double best_ = std::numeric_limits<double>::infinity();
  int64_t bad_ = 0, cooldown_left_ = 0;
};

// Lr's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL Lr::Lr(LrOptions o) : o_(std::move(o)) {
  validate();
  best_ = worst();
}
POLICYTRAIN_DECL Lr::Lr(const Lr&) = default;
POLICYTRAIN_DECL Lr::Lr(Lr&&) noexcept = default;
POLICYTRAIN_DECL Lr& Lr::operator=(const Lr&) = default;
POLICYTRAIN_DECL Lr& Lr::operator=(Lr&&) noexcept = default;
POLICYTRAIN_DECL Lr::~Lr() = default;

POLICYTRAIN_DECL void Lr::begin_fit(torch::optim::Optimizer& optimizer) {
  resolved_ = false;  // at the first epoch: the run's horizon, or this fit's with horizon_per_fit
  auto& groups = optimizer.param_groups();
  // What this run's optimizer asks for, before a checkpoint policy's resume (later in the hook order) loads the
  // checkpoint's optimizer and schedule over it: compared at the first epoch (OnResume).
  asked_lr_.clear();
  asked_momentum_.clear();
  for (const auto& g : groups) {
    asked_lr_.push_back(g.options().get_lr());
    asked_momentum_.push_back(momentum_of(g.options()));
  }
  resumed_ = false;
  if (groups.size() < base_lr_.size())
    throw std::invalid_argument(policytrain::detail::error_message(
        policytrain::detail::format("policytrain::{}", name),
        policytrain::detail::format(
            "the optimizer has {} param groups but the schedule's state has {} (an optimizer loses no "
            "group between fits, so this state came from another optimizer); load a state saved with this optimizer, "
            "or give the schedule a fresh state",
            groups.size(), base_lr_.size())));
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
      throw std::invalid_argument(policytrain::detail::error_message(
          name, policytrain::detail::format("warmup_momentum is set but param group {}'s optimizer has no "
                                            "momentum (SGD, RMSprop) or beta1 (Adam, AdamW); unset warmup_momentum",
                                            g)));
    if (o_.kind == Kind::onecycle && o_.cycle_momentum)
      throw std::invalid_argument(policytrain::detail::error_message(
          name, policytrain::detail::format("onecycle cycles the momentum (cycle_momentum, as PyTorch's "
                                            "OneCycleLR) but param group {}'s optimizer has no momentum (SGD, "
                                            "RMSprop) or beta1 (Adam, AdamW); set cycle_momentum = false",
                                            g)));
  }
  for (size_t g : o_.bias_groups)
    if (g >= groups.size())
      throw std::invalid_argument(policytrain::detail::error_message(
          name,
          policytrain::detail::format("bias group {} but the optimizer has {} param groups", g, groups.size())));
}

POLICYTRAIN_DECL void Lr::resolve_first_epoch(const Horizon& fit, bool is_main) {
  std::vector<std::string> said;
  if (resumed_) reconcile(said);
  resolve(fit, is_main, said);
  if (!said.empty() && o_.log && is_main) {
    std::string lrs;
    for (size_t g = 0; g < base_lr_.size(); ++g)
      lrs += policytrain::detail::format("{}{:.6g}", g ? ", " : "", lr_at(g, t_));
    std::fprintf(o_.log, "policytrain::schedule::Lr: %s at step %lld: %s; the next step's lr: %s%s\n",
                 resumed_ ? "resumed" : "a later fit", static_cast<long long>(t_), joined(said).c_str(), lrs.c_str(),
                 o_.on_resume == OnResume::keep
                     ? " (LrOptions::on_resume = OnResume::take takes this run's values instead)"
                     : " (LrOptions::on_resume = OnResume::keep continues the checkpoint's instead)");
    std::fflush(o_.log);
  }
  resumed_ = false;
  asked_lr_.clear();
}

POLICYTRAIN_DECL void Lr::resolve(const Horizon& f, bool is_main, std::vector<std::string>& said) {
  if (!o_.horizon_per_fit && o_.total_steps == 0 && recorded_) {
    resolved_ = true;  // the run's horizon, from its first fit (or the state it was resumed from)
    if (f.total_steps > 0 && f.total_steps != h_.total_steps && needs_total_steps(o_.kind)) {
      const bool take = resumed_ && o_.on_resume == OnResume::take;
      said.push_back(policytrain::detail::format("the schedule's horizon {} steps {} (the run's was {}; this "
                                                 "fit's epochs and max_steps give {})",
                                                 take ? f.total_steps : h_.total_steps, take ? "taken" : "kept",
                                                 h_.total_steps, f.total_steps));
      if (take) h_ = f;
    }
    return;
  }
  h_ = f;
  const bool epoch_units = (o_.unit == Unit::epochs && (o_.kind == Kind::step || o_.kind == Kind::multistep ||
                                                       o_.kind == Kind::exponential)) ||
                           (o_.warmup_steps == 0 && o_.warmup_epochs > 0);
  if (h_.steps_per_epoch == 0 && epoch_units)
    throw std::invalid_argument(policytrain::detail::error_message(
        name, policytrain::detail::format("the schedule counts in epochs but the training data does not say "
                                          "how many batches an epoch has; give the lengths in steps")));
  if (h_.total_steps <= 0 && needs_total_steps(o_.kind))
    throw std::invalid_argument(policytrain::detail::error_message(
        name, policytrain::detail::format("the '{}' schedule decays over the run but its length is unknown "
                                          "(the training data has no size); set LrOptions::total_steps",
                                          to_string(o_.kind))));
  resolved_ = true;
  recorded_ = true;
  // A warmup as long as the run never reaches the base lr, and the decay never starts: said, not refused (a short
  // trial run of a long recipe is a legitimate use).
  const int64_t W = warmup_steps(o_, h_);
  if (W > 0 && h_.total_steps > 0 && W >= h_.total_steps && o_.log && is_main) {
    std::fprintf(o_.log,
                 "policytrain::schedule::Lr: the warmup of %lld steps is as long as the run (%lld steps): the lr "
                 "never reaches its base value and the '%s' schedule never starts; shorten the warmup or lengthen the "
                 "run\n",
                 static_cast<long long>(W), static_cast<long long>(h_.total_steps), std::string(to_string(o_.kind)).c_str());
    std::fflush(o_.log);
  }
}

POLICYTRAIN_DECL void Lr::apply(torch::optim::Optimizer& optimizer) {
  auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size() && g < base_lr_.size(); ++g) {
    auto& opts = groups[g].options();
    opts.set_lr(lr_at(g, t_));
    const double m = momentum_at(g, t_);
    if (!std::isnan(m)) set_momentum(opts, m);
  }
}

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
  resumed_ = !asked_lr_.empty();  // loaded after this fit began, before its first epoch: a resume
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
    throw std::invalid_argument(policytrain::detail::error_message("policytrain::schedule::Lr", what));
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

POLICYTRAIN_DECL double Lr::lr_at(size_t g, int64_t t) const {
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

POLICYTRAIN_DECL double Lr::momentum_at(size_t g, int64_t t) const {
  const bool cycled = o_.kind == Kind::onecycle && o_.cycle_momentum;
  if (!schedules_momentum()) return std::numeric_limits<double>::quiet_NaN();
  const int64_t W = warmup_steps(o_, h_);
  double own = base_momentum_.at(g);
  if (cycled)
    own = o_.warmup_mode == WarmupMode::sequential ? onecycle_at(o_, main_horizon().total_steps, std::max<int64_t>(t - W, 0)).momentum
                                                   : onecycle_at(o_, h_.total_steps, t).momentum;
  if (o_.warmup_momentum >= 0 && t < W)
    return o_.warmup_momentum + (own - o_.warmup_momentum) * static_cast<double>(t) / static_cast<double>(W);
  return own;
}

POLICYTRAIN_DECL std::string Lr::joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

POLICYTRAIN_DECL void Lr::reconcile(std::vector<std::string>& said) {
  auto differs = [](double a, double b) { return !(std::isnan(a) && std::isnan(b)) && std::abs(a - b) > 1e-12 * std::max(std::abs(a), std::abs(b)); };
  const bool take = o_.on_resume == OnResume::take;
  for (size_t g = 0; g < base_lr_.size() && g < asked_lr_.size(); ++g) {
    if (differs(base_lr_[g], asked_lr_[g])) {
      said.push_back(policytrain::detail::format("param group {}: base lr {:.6g} {} (the checkpoint's schedule had "
                                                 "{:.6g}; this run's optimizer asks {:.6g})",
                                                 g, take ? asked_lr_[g] : base_lr_[g], take ? "taken" : "kept",
                                                 base_lr_[g], asked_lr_[g]));
      if (take) base_lr_[g] = asked_lr_[g];
    }
    // The momentum only where this schedule sets it (onecycle's cycle, a momentum warmup): otherwise the
    // optimizer keeps the one the checkpoint's load gave it, which the checkpoint policy reconciles and says
    // (checkpoint::Disk::Options::hyperparameters); "taken" here would not be true.
    if (schedules_momentum() && differs(base_momentum_[g], asked_momentum_[g])) {
      said.push_back(policytrain::detail::format("param group {}: base momentum {:.6g} {} (the checkpoint's {:.6g}; "
                                                 "this run's {:.6g})",
                                                 g, take ? asked_momentum_[g] : base_momentum_[g],
                                                 take ? "taken" : "kept", base_momentum_[g], asked_momentum_[g]));
      if (take) base_momentum_[g] = asked_momentum_[g];
    }
  }
}
#endif

}  // namespace policytrain::schedule
