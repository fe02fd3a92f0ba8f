#pragma once
/// \file
/// schedule::LrOptions and its enumerations (Kind, Unit, DecayEnd, WarmupMode, Anneal, ThresholdMode): the settings
/// of schedule::Lr (lr.hpp, which includes this header), and the parsing of a kind's name. Part of <policytrain/schedule/lr.hpp>.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

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
/// What a resumed run does when its rebuilt optimizer asks for other base lrs (or momenta) than the checkpoint's
/// schedule holds, or its fit gives another horizon (LrOptions::on_resume). Either way the difference is said.
enum class OnResume {
  keep,  ///< continue the checkpoint's schedule: its base lrs, momenta and horizon (the run as it was planned)
  take   ///< take this run's: the optimizer's lrs and momenta, this fit's horizon, at the step reached (nanoGPT's get_lr)
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
  throw std::invalid_argument(policytrain::detail::error_message(
      "policytrain::schedule",
      policytrain::detail::format("unknown schedule '{}'; expected one of constant, "
                                  "step, multistep, exponential, linear, cosine, onecycle, poly, wsd, plateau",
                                  s)));
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
  // resume
  /// A resume whose optimizer asks for other base lrs or momenta than the checkpoint's schedule, or whose fit gives
  /// another horizon (without total_steps, which is always taken): continue the checkpoint's schedule (keep), or take
  /// the new values at the step reached (take). The kind, warmup, lrf and the other options are always this run's.
  OnResume on_resume = OnResume::keep;
  std::FILE* log = stderr;         ///< where a resume's kept or taken values are said (main rank; nullptr: nowhere)
};

}  // namespace policytrain::schedule
