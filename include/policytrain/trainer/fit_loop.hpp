#pragma once
/// \file
/// fit's loop compiled once: the epochs (resume mid-epoch, max_steps, a stop at a step boundary, validation at
/// epoch ends or every N steps, the stop agreed over the ranks) as one non-template function, run_fit, which asks
/// for every step that depends on the Trainer's policies, its task or its loaders through a FitDriver (virtual
/// calls; Loops<T>::Driver implements them for one Trainer and one pair of loaders). The loop's control flow is
/// then code that a user's file no longer generates and optimises for each composition (separate compilation,
/// detail/config.hpp); the hooks themselves stay templates. Trainer::evaluate's pass over its batches keeps its
/// bookkeeping here too (EvalPass).
/// Part of the Trainer (docs/trainer.md, "File map"); include <policytrain/trainer.hpp>.
#include <cstdint>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/core/context.hpp>
#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/state.hpp>
#include <policytrain/detail/config.hpp>
#if POLICYTRAIN_DEFINE
#  include <algorithm>
#  include <chrono>
#  include <cmath>
#  include <cstddef>
#  include <stdexcept>
#  include <string>
#  include <unordered_map>
#  include <utility>

#  include <policytrain/detail/format.hpp>
#endif

namespace policytrain::detail {

/// What run_fit asks of one fit: the Trainer's counters and loop flags (read and written in place, as the Context
/// reads them), and the steps that depend on the Trainer's type or the loaders' as virtual calls.
class FitDriver {
 public:
  /// The Trainer's fields the loop reads and writes (Context::epoch_batches, epoch_cut, is_last_micro_step,
  /// step_validated read them).
  struct Fields {
    TrainState& state;
    int64_t& epoch_batches;
    int64_t& resume_batches;  ///< micro-batches the next epoch skips
    bool& epoch_cut;
    bool& last_micro_step;
    bool& step_validated;
  };
  FitDriver(Fields f, const FitOptions& options, bool has_val) : f_(f), options_(options), has_val_(has_val) {}
  FitDriver(const FitDriver&) = delete;
  FitDriver& operator=(const FitDriver&) = delete;

  /// The fields and settings run_fit works on.
  ///@{
  const Fields& fields() const { return f_; }
  const FitOptions& options() const { return options_; }
  bool has_val() const { return has_val_; }
  ///@}

  /// The Trainer's hooks and services (each: the Trainer's member of that name).
  ///@{
  virtual void on_fit_begin() = 0;
  virtual void on_fit_end() = 0;
  virtual void on_epoch_begin() = 0;
  virtual bool on_epoch_end() = 0;
  virtual bool on_validation_end(const Metrics& m) = 0;
  virtual void on_step_end() = 0;
  virtual bool agree_any(bool b) = 0;
  ///@}
  /// The module in training mode.
  virtual void train_mode() = 0;
  /// Evaluates the validation data (at most FitOptions::limit_val_batches batches); only called when has_val().
  virtual Metrics evaluate() = 0;
  /// On CUDA, waits for the queued work (Loops::wait_for_device).
  virtual void wait_for_device() = 0;
  /// The optimizer step of a window: before_step, the step inside the around_step hooks, and its bookkeeping.
  virtual void optimizer_step() = 0;
  /// At an epoch's start: gives the training data the epoch (its set_epoch) and returns its batches per epoch
  /// (-1: unknown).
  virtual int64_t begin_epoch() = 0;
  /// A mid-epoch resume on another world size: reshards the data (Loops::reshard_resumed_epoch).
  virtual void reshard_resumed_epoch() = 0;
  /// The training data's iterator at the epoch's batch_in_epoch (already trained batches passed over); released
  /// by end_batches() where the loop's own iterator went out of scope.
  ///@{
  virtual void start_batches() = 0;
  virtual bool batches_left() = 0;
  virtual void next_batch() = 0;
  virtual void end_batches() = 0;
  ///@}
  /// One micro-step on the current batch (Loops::train_micro_step); returns whether it ended an optimizer step, so
  /// that the step's end (a due validation, on_step_end) runs.
  virtual bool train_micro_step() = 0;
  /// At the end of fit, before on_fit_end: FitResult's world size and token counts (`tokens`: this rank's, of this
  /// fit).
  virtual void count_result(FitResult& result, int64_t tokens) = 0;

 protected:
  ~FitDriver() = default;

 private:
  Fields f_;
  const FitOptions& options_;
  bool has_val_;
};

/// fit from its on_fit_begin hooks to its on_fit_end hooks (Loops::fit checks the settings first).
POLICYTRAIN_DECL FitResult run_fit(FitDriver& d)
#if POLICYTRAIN_DEFINE
{
  TrainState& s = d.fields().state;
  const FitDriver::Fields& f = d.fields();
  const FitOptions& options = d.options();
  FitResult result;
  auto reached_max_steps = [&] { return options.max_steps >= 0 && s.global_step >= options.max_steps; };
  // One validation (a step's, an epoch's start): the evaluation, the on_validation_end hooks, and a stop they ask
  // for agreed over the ranks (it takes effect after this step). Returns its wall time.
  auto validate = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    Metrics m = d.evaluate();
    const bool stop = d.on_validation_end(m);
    result.validation.push_back(std::move(m));
    result.validation_steps.push_back(s.global_step);
    if (d.agree_any(stop)) {
      s.stop_requested = true;
      result.stopped_early = !reached_max_steps();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  d.on_fit_begin();
  const int64_t start_epoch = s.epoch;
  const int64_t tokens0 = s.tokens_seen;
  const int64_t epochs = options.epoch_limit();
  // The end of every optimizer step: its validation when one is due (val_every_steps, at the global steps that are
  // its multiples, so that a resumed run validates where the uninterrupted one does, whatever interval it had),
  // then the on_step_end hooks, which see it (Context::step_validated: a checkpoint policy saves last and best).
  double val_seconds = 0;  // of the step validations in the current epoch: not training time
  auto end_step = [&] {
    if (d.has_val() && options.val_every_steps > 0 && s.global_step % options.val_every_steps == 0) {
      f.step_validated = true;
      d.wait_for_device();
      val_seconds += validate();
    }
    d.on_step_end();
    f.step_validated = false;
  };
  // nanoGPT's evaluation at iteration 0: once, at the run's start (not again at a resume).
  if (d.has_val() && options.eval_on_start && s.global_step == 0 && s.batch_in_epoch == 0 && s.epoch == 0) validate();
  // The training data's iterator lives for one epoch's body, as a local of the loop would.
  struct Batches {
    FitDriver& d;
    ~Batches() { d.end_batches(); }
  };
  // A finished epoch leaves batch_in_epoch at 0: a state taken between epochs resumes at the next one's start.
  for (; s.epoch < epochs && !s.stop_requested && !reached_max_steps(); ++s.epoch, s.batch_in_epoch = 0) {
    const int64_t n = d.begin_epoch();
    f.epoch_batches = options.limit_train_batches >= 0 && (n < 0 || options.limit_train_batches < n)
                          ? options.limit_train_batches : n;
    s.batch_in_epoch = std::exchange(f.resume_batches, 0);
    if (s.batch_in_epoch > 0) d.reshard_resumed_epoch();
    d.train_mode();
    d.on_epoch_begin();
    const auto t0 = std::chrono::steady_clock::now();
    val_seconds = 0;
    const int64_t seen0 = s.samples_seen;
    const Batches batches{d};
    d.start_batches();
    bool cut = false;
    f.epoch_cut = false;
    for (; d.batches_left(); d.next_batch()) {
      if (f.epoch_batches >= 0 && s.batch_in_epoch >= f.epoch_batches) break;
      if (d.train_micro_step()) end_step();
      if (s.stop_at_step && s.micro_step == 0) break;  // after the step: handled below the loop
      // A stop agreed at a step's validation (val_every_steps), or the run's last step: the epoch ends here.
      if (s.micro_step == 0 && ((options.val_every_steps > 0 && s.stop_requested) || reached_max_steps())) {
        s.stop_requested = true;
        // Cut before the epoch's last batch: the epoch is not finished, and the next fit resumes it.
        if (f.epoch_batches >= 0) {
          cut = s.batch_in_epoch < f.epoch_batches;
        } else {
          d.next_batch();
          cut = d.batches_left();
        }
        f.epoch_cut = cut;
        break;
      }
    }
    // A run by steps over data without a batch would pass over it for ever.
    if (options.by_steps() && s.batch_in_epoch == 0)
      throw std::invalid_argument(error_message(
          "policytrain::Trainer::fit",
          format("epoch {} of the training data yielded no batch, and the run is by steps (max_steps {}): it would "
                 "pass over the data for ever", s.epoch, options.max_steps),
          {}, "give training data with at least one batch"));
    // A stop at a step boundary (callbacks::Preemption): the epoch ends here, unvalidated, and resumes at the
    // next batch (the checkpoint policy's fit end saves it mid-epoch); no epoch-end hook runs, so a resumed run
    // validates and ends this epoch once, as the uninterrupted one does.
    if (s.stop_at_step) {
      s.stop_requested = true;
      f.epoch_cut = true;
      result.stopped_at_step = true;
      d.wait_for_device();
      result.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - val_seconds;
      result.samples_seen += s.samples_seen - seen0;
      result.epochs_run = s.epoch - start_epoch;
      f.resume_batches = s.batch_in_epoch;
      break;
    }
    // A window left open at the end of an epoch (unknown epoch length, or max_steps mid-window) is
    // stepped with the samples it has, normalised by their count.
    if (s.micro_step > 0) {
      f.last_micro_step = true;
      d.optimizer_step();
      end_step();
    }
    d.wait_for_device();
    result.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - val_seconds;
    result.samples_seen += s.samples_seen - seen0;
    bool stop = false;
    if (d.has_val() && options.val_every_steps <= 0) {
      Metrics m = d.evaluate();
      stop = d.on_validation_end(m) || stop;
      result.validation.push_back(std::move(m));
      result.validation_steps.push_back(s.global_step);
    }
    stop = d.on_epoch_end() || stop;
    if (d.agree_any(stop)) {
      s.stop_requested = true;
      result.stopped_early = s.epoch + 1 < epochs;
    }
    result.epochs_run = s.epoch + 1 - start_epoch;
    if (cut) {
      // The state stays inside the epoch (epoch, batch_in_epoch), as a mid-epoch checkpoint records it, so
      // that the next fit continues with the batch after the last one trained.
      f.resume_batches = s.batch_in_epoch;
      break;
    }
  }
  d.count_result(result, s.tokens_seen - tokens0);
  d.on_fit_end();
  result.global_steps = s.global_step;
  result.skipped_steps = s.skipped_steps;
  return result;
}
#else
;
#endif

/// A tensor listed twice in the optimizer would be updated twice per step: refuse it, naming the cause (twice in
/// one group: tied weights, Module::parameters() repeats a shared tensor; in two groups: the groups' split).
POLICYTRAIN_DECL void check_unique_parameters(torch::optim::Optimizer& optimizer, torch::nn::Module& module)
#if POLICYTRAIN_DEFINE
{
  std::unordered_map<const void*, size_t> seen;  // each tensor's first param group
  const auto& groups = optimizer.param_groups();
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (const auto& p : groups[gi].params())
      if (const auto [it, fresh] = seen.emplace(p.unsafeGetTensorImpl(), gi); !fresh) {
        std::string name = "(a tensor not in the module)";
        for (const auto& q : module.named_parameters(true))
          if (q.value().unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) { name = q.key(); break; }
        // In two groups: the groups were built wrong (a decay/no-decay split that lists a tensor in both), not
        // tied weights.
        if (it->second != gi)
          throw std::invalid_argument(error_message(
              "policytrain::Trainer",
              format("the parameter '{}' is in param groups {} and {} of the optimizer, so every step would update "
                     "it twice, once with each group's settings",
                     name, it->second, gi),
              {}, "put each tensor in one group (split the module's named_parameters() once, e.g. by dim() for "
                  "decay and no-decay)"));
        throw std::invalid_argument(error_message(
            "policytrain::Trainer",
            format("the optimizer holds the parameter '{}' more than once (tied weights: "
                           "torch::nn::Module::parameters() lists a shared tensor once per module that registers "
                           "it), so every step would update it twice",
                           name),
            {}, "build the optimizer from policytrain::unique_parameters(module)"));
      }
}
#else
;
#endif

/// Refuses settings that cannot mean anything, by name, before any step. `has_val`: fit was given validation
/// data; `task_tokens`, `task_flops`: the task declares tokens(batch), flops_per_token().
POLICYTRAIN_DECL void check_fit_options(const FitOptions& o, bool has_val, bool task_tokens, bool task_flops)
#if POLICYTRAIN_DEFINE
{
  auto refuse = [](const std::string& what, const std::string& fix) {
    throw std::invalid_argument(error_message("policytrain::Trainer::fit", what, {}, fix));
  };
  if (o.val_every_steps < 0)
    refuse(format("FitOptions::val_every_steps is {}", o.val_every_steps),
           "give a positive number of optimizer steps, or 0 to validate at each epoch's end");
  if (!has_val && (o.val_every_steps > 0 || o.eval_on_start))
    refuse(format("FitOptions::{} is set but fit was given no validation data",
                  o.val_every_steps > 0 ? "val_every_steps" : "eval_on_start"),
           "call fit(train, val, options), or leave it unset");
  if (o.epochs < -1)
    refuse(format("FitOptions::epochs is {}", o.epochs),
           "give a count of epochs, or -1 (one epoch; with max_steps, as many as the steps take)");
  if (o.items_per_sample < 0)
    refuse(format("FitOptions::items_per_sample is {}", o.items_per_sample),
           "give the tokens of one sample (a language model's block size), or 0 to count none");
  if (task_tokens && o.items_per_sample > 0)
    refuse(format("FitOptions::items_per_sample is {} and the task declares tokens(batch), which counts them",
                  o.items_per_sample),
           "leave items_per_sample at 0 (the task's count is used)");
  if (!(o.peak_flops >= 0) || !std::isfinite(o.peak_flops))
    refuse(format("FitOptions::peak_flops is {}", o.peak_flops),
           "give the peak FLOP/s of one device (e.g. 312e12), or 0 to report no MFU");
  if (o.peak_flops > 0 && !task_flops)
    refuse(format("FitOptions::peak_flops is {:g} but the task declares no flops_per_token(), so no MFU can be "
                  "computed", o.peak_flops),
           "add `double flops_per_token() const` to the task (nanoGPT's estimate: 6 N + 12 L H Q T), or leave "
           "peak_flops at 0");
  if (o.peak_flops > 0 && !task_tokens && o.items_per_sample == 0)
    refuse(format("FitOptions::peak_flops is {:g} but no tokens are counted, so no MFU can be computed",
                  o.peak_flops),
           "add `int64_t tokens(const policytrain::Batch&) const` to the task, or set FitOptions::items_per_sample");
}
#else
;
#endif

/// An optimizer step's bookkeeping before its after_step hooks: the lr each group used (Context::step_lr, before a
/// schedule's after_step sets the next step's), the step counted and, when `stepped` is false, counted as skipped.
POLICYTRAIN_DECL void count_step(torch::optim::Optimizer& optimizer, std::vector<double>& step_lrs, TrainState& s,
                                 bool stepped)
#if POLICYTRAIN_DEFINE
{
  const auto& groups = optimizer.param_groups();
  step_lrs.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) step_lrs[g] = groups[g].options().get_lr();
  ++s.global_step;
  if (!stepped) ++s.skipped_steps;
}
#else
;
#endif

/// One pass of Trainer::evaluate over its batches, compiled once: every batch's metrics accumulated (the task's
/// epoch-level metrics updated too), the padding a sharded loader repeats at the end of a rank's shard left out.
class EvalPass {
 public:
  /// `epoch`: the task's epoch-level metrics, reset here (nullptr: none).
  explicit EvalPass(MetricCollection* epoch);
  /// Cuts `b` to the `keep` samples of the shard still to come (keep < 0: no padding, `b` whole) and counts them
  /// off; false when nothing of it is kept (the batch is skipped).
  static bool trim(Batch& b, int64_t& keep);
  /// Adds a batch's prediction.
  void add(const Prediction& p, const Batch& b);
  /// The batches' sums (the parallel policy reduces them over the ranks before result()).
  MetricsAccumulator& accumulator() { return acc_; }

 private:
  MetricsAccumulator acc_;
  MetricCollection* epoch_;
};

#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL EvalPass::EvalPass(MetricCollection* epoch) : epoch_(epoch) {
  if (epoch_) epoch_->reset();
}

POLICYTRAIN_DECL bool EvalPass::trim(Batch& b, int64_t& keep) {
  if (keep < 0) return true;
  if (b.size() > keep) b = Batch{b.x.slice(0, 0, keep), b.y.slice(0, 0, keep)};
  keep -= b.size();
  return b.size() > 0;
}

POLICYTRAIN_DECL void EvalPass::add(const Prediction& p, const Batch& b) {
  acc_.add(p.loss, p.output, b.y, p.metrics);
  if (epoch_) epoch_->update(p.output, b.y);
}
#endif

}  // namespace policytrain::detail
