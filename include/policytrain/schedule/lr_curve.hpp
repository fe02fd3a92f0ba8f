#pragma once
/// \file
/// The curves of schedule::Lr as plain functions of the options, the run's horizon and the step: warmup length,
/// one-cycle's point, lr_factor (the main schedule's factor at step t). No state, no optimizer: what lr.hpp's policy
/// evaluates at every step, and what the parity tests (tests/parity/schedules.py) check. Part of
/// <policytrain/schedule/lr.hpp>.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include <policytrain/detail/config.hpp>
#include <policytrain/schedule/lr_options.hpp>

namespace policytrain::schedule {

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

}  // namespace policytrain::schedule
