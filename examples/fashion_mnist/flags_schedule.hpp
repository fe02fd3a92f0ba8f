#pragma once
// The example's learning-rate schedule flags: --schedule KIND, its parameters, and the warmup.
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <policytrain/schedule/lr.hpp>

namespace fmnist {

struct ScheduleFlags {
  std::string kind = "onecycle";  // the demo's default: 5 epochs of AdamW + one-cycle reach 0.92
  std::string unit = "epoch";
  std::string plateau_mode = "min";
  std::string threshold_mode = "rel";
  std::string anneal = "cos";
  std::string decay_end = "last_step";
  std::string warmup_mode = "sequential";
  policytrain::schedule::LrOptions o;

  void add(CLI::App& app) {
    app.add_option("--schedule", kind, "Learning-rate schedule (stepped per optimizer step)")
        ->check(CLI::IsMember({"constant", "step", "multistep", "exponential", "linear", "cosine", "onecycle", "poly",
                               "wsd", "plateau"}))
        ->capture_default_str();
    app.add_option("--lrf", o.lrf, "Final lr factor (linear, cosine, onecycle, poly, wsd); floor of plateau")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    app.add_option("--total-steps", o.total_steps, "Optimizer steps of the run (0: epochs x batches / accumulate)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--schedule-unit", unit, "Unit of --step-size, --milestones and exponential's --gamma")
        ->check(CLI::IsMember({"epoch", "step"}))->capture_default_str();
    app.add_option("--step-size", o.step_size, "step: multiply the lr by --gamma every this many units")
        ->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--milestones", o.milestones, "multistep: multiply the lr by --gamma at these units (ascending; default: none)")
        ->delimiter(',');
    app.add_option("--gamma", o.gamma, "step, multistep: decay factor; exponential: factor per unit")
        ->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--decay-end", decay_end,
                   "linear, cosine, poly, wsd: reach lrf on the last step (PyTorch total_iters = T-1) or after it (T)")
        ->check(CLI::IsMember({"last_step", "after_run"}))->capture_default_str();
    app.add_option("--count-skipped-steps", o.count_skipped_steps,
                   "Whether a skipped step (non-finite gradients) advances the schedule, as in PyTorch")
        ->capture_default_str();
    app.add_option("--pct-start", o.pct_start, "onecycle: fraction of the run rising from 1/--div-factor (PyTorch's pct_start)")
        ->check(CLI::Range(0.0, 0.99))->capture_default_str();
    app.add_option("--div-factor", o.div_factor, "onecycle: the rise starts at lr / this")->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--anneal", anneal, "onecycle: anneal_strategy")->check(CLI::IsMember({"cos", "linear"}))
        ->capture_default_str();
    app.add_option("--three-phase", o.three_phase, "onecycle: PyTorch's three_phase")->capture_default_str();
    app.add_option("--cycle-momentum", o.cycle_momentum,
                   "onecycle: cycle SGD momentum / Adam beta1 between --max-momentum and --base-momentum")
        ->capture_default_str();
    app.add_option("--base-momentum", o.base_momentum, "onecycle: momentum at the lr's peak")
        ->check(CLI::Range(0.0, 0.999))->capture_default_str();
    app.add_option("--max-momentum", o.max_momentum, "onecycle: momentum at the start and the end")
        ->check(CLI::Range(0.0, 0.999))->capture_default_str();
    app.add_option("--power", o.power, "poly: exponent")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--decay-fraction", o.decay_fraction, "wsd: last fraction of the run that decays to lrf")
        ->check(CLI::Range(0.01, 1.0))->capture_default_str();
    app.add_option("--plateau-monitor", o.monitor, "plateau: validation metric (loss, accuracy)")->capture_default_str();
    app.add_option("--plateau-mode", plateau_mode, "plateau: whether the metric should go down or up")
        ->check(CLI::IsMember({"min", "max"}))->capture_default_str();
    app.add_option("--plateau-patience", o.patience, "plateau: validations without improvement before reducing")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    app.add_option("--plateau-factor", o.factor, "plateau: multiply the lr by this")->check(CLI::Range(0.001, 0.999))
        ->capture_default_str();
    app.add_option("--plateau-threshold", o.threshold, "plateau: improvement that counts")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    app.add_option("--plateau-threshold-mode", threshold_mode, "plateau: relative or absolute threshold")
        ->check(CLI::IsMember({"rel", "abs"}))->capture_default_str();
    app.add_option("--plateau-cooldown", o.cooldown, "plateau: validations ignored after a reduction")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    auto* we = app.add_option("--warmup-epochs", o.warmup_epochs, "Linear warmup length in epochs")
                   ->check(CLI::NonNegativeNumber);
    app.add_option("--warmup-steps", o.warmup_steps, "Linear warmup length in optimizer steps")
        ->check(CLI::NonNegativeNumber)->excludes(we);
    app.add_option("--warmup-start-factor", o.warmup_start_factor, "Warmup starts at lr x this")
        ->check(CLI::Range(0.0, 1.0))->capture_default_str();
    app.add_option("--warmup-mode", warmup_mode,
                   "sequential: PyTorch's SequentialLR (the schedule starts after the warmup); interpolate: Ultralytics")
        ->check(CLI::IsMember({"sequential", "interpolate"}))->capture_default_str();
    app.add_option("--warmup-momentum", o.warmup_momentum,
                   "Warmup ramps SGD momentum / Adam beta1 from this to its value (-1: off)")
        ->check(CLI::Range(-1.0, 1.0))->capture_default_str();
  }

  policytrain::schedule::Lr make() const {
    auto opts = o;
    opts.kind = policytrain::schedule::kind_from_string(kind);
    opts.unit = unit == "epoch" ? policytrain::schedule::Unit::epochs : policytrain::schedule::Unit::steps;
    opts.maximize = plateau_mode == "max";
    opts.threshold_mode = threshold_mode == "abs" ? policytrain::schedule::ThresholdMode::abs
                                                  : policytrain::schedule::ThresholdMode::rel;
    opts.anneal = anneal == "linear" ? policytrain::schedule::Anneal::linear : policytrain::schedule::Anneal::cos;
    opts.decay_end = decay_end == "after_run" ? policytrain::schedule::DecayEnd::after_run
                                              : policytrain::schedule::DecayEnd::last_step;
    opts.warmup_mode = warmup_mode == "interpolate" ? policytrain::schedule::WarmupMode::interpolate
                                                    : policytrain::schedule::WarmupMode::sequential;
    return policytrain::schedule::Lr(std::move(opts));
  }

  nlohmann::json describe() const {
    nlohmann::json j{{"name", "schedule::Lr"}, {"kind", kind}, {"lrf", o.lrf},
                     {"count_skipped_steps", o.count_skipped_steps}};
    if (kind == "linear" || kind == "cosine" || kind == "poly" || kind == "wsd") j["decay_end"] = decay_end;
    if (o.total_steps > 0) j["total_steps"] = o.total_steps;
    if (kind == "step") j.update({{"step_size", o.step_size}, {"gamma", o.gamma}, {"unit", unit}});
    if (kind == "multistep") j.update({{"milestones", o.milestones}, {"gamma", o.gamma}, {"unit", unit}});
    if (kind == "exponential") j.update({{"gamma", o.gamma}, {"unit", unit}});
    if (kind == "onecycle")
      j.update({{"pct_start", o.pct_start}, {"div_factor", o.div_factor}, {"anneal", anneal},
                {"three_phase", o.three_phase}, {"cycle_momentum", o.cycle_momentum},
                {"base_momentum", o.base_momentum}, {"max_momentum", o.max_momentum}});
    if (kind == "poly") j["power"] = o.power;
    if (kind == "wsd") j["decay_fraction"] = o.decay_fraction;
    if (kind == "plateau")
      j.update({{"monitor", o.monitor}, {"mode", plateau_mode}, {"patience", o.patience}, {"factor", o.factor},
                {"threshold", o.threshold}, {"threshold_mode", threshold_mode}, {"cooldown", o.cooldown}});
    if (o.warmup_steps > 0) j["warmup_steps"] = o.warmup_steps;
    if (o.warmup_epochs > 0) j["warmup_epochs"] = o.warmup_epochs;
    if (o.warmup_steps > 0 || o.warmup_epochs > 0) {
      j["warmup_start_factor"] = o.warmup_start_factor;
      j["warmup_mode"] = warmup_mode;
      if (o.warmup_momentum >= 0) j["warmup_momentum"] = o.warmup_momentum;
    }
    return j;
  }
};

}  // namespace fmnist
