#pragma once
/// \file
/// The contract between the Trainer and its policies, beside core/hooks.hpp: `FitOptions` and `FitResult` (what
/// `fit` takes and returns) and `Context` (what a hook sees). Nothing here knows any policy: core/ is the
/// contract, and the Trainer (policytrain/trainer.hpp) is built on it together with the categories' defaults.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/state.hpp>
#include <policytrain/core/state_dict.hpp>

namespace policytrain {

/// Run-time settings of one `fit`. Two shapes of run: by epochs (`epochs`, validation at each epoch's end) and by
/// steps (`max_steps` alone: the loader is passed over as many times as the steps need, or never ends; validation
/// every `val_every_steps` optimizer steps). Steps are the run's clock in both: a resumed run continues from the
/// step reached, whatever its new intervals or length (docs/trainer.md, "Training by steps").
struct FitOptions {
  /// Epochs to train, counted from epoch 0 (so a resumed run continues). -1 (the default): one epoch, or, when
  /// `max_steps` is set, as many as the steps take: the run is by steps (Lightning's `max_epochs=None` with
  /// `max_steps`).
  int64_t epochs = -1;
  int64_t max_steps = -1;            ///< stop after this many optimizer steps (-1: no limit)
  int64_t limit_train_batches = -1;  ///< micro-batches per epoch at most (-1: all)
  int64_t limit_val_batches = -1;    ///< evaluation batches at most (-1: all)
  /// Validate every this many optimizer steps, at the global steps that are its multiples, instead of at each
  /// epoch's end (0: at each epoch's end). Lightning's `val_check_interval=N` with `check_val_every_n_epoch=None`,
  /// counted in optimizer steps (Lightning counts batches: the same without accumulation). A step's validation runs
  /// after its after_step hooks and before its on_step_end hooks, where a checkpoint policy saves last and best.
  int64_t val_every_steps = 0;
  /// Validate once before the first step when the run is at step 0 (nanoGPT's evaluation at iteration 0): it sets
  /// the value to beat, and nothing is saved (the weights are the initial ones). A resumed run does not repeat it.
  bool eval_on_start = false;
  /// Tokens (or any items) per sample, for a task that does not declare `tokens(batch)` (core/hooks.hpp,
  /// DeclaresTokens): each micro-batch of n samples counts n x items_per_sample tokens (a language model's block
  /// size). 0 (the default): no tokens are counted, and nothing is spent on them. Refused with a task that declares
  /// tokens(batch), which is exact where this is a constant.
  int64_t items_per_sample = 0;
  /// The peak FLOP/s of one device (e.g. 989e12 for an H100's bf16 dense tensor cores, nanoGPT's A100 figure
  /// 312e12): with a task that declares `flops_per_token()`, FitResult::mfu and the logs report the model FLOPs
  /// utilisation. 0 (the default): none is reported.
  double peak_flops = 0;

  /// The epoch count `fit` runs to: `epochs`, or its default's meaning (1, or no limit when `max_steps` is set).
  int64_t epoch_limit() const {
    if (epochs >= 0) return epochs;
    return max_steps >= 0 ? std::numeric_limits<int64_t>::max() : 1;
  }
  /// Whether the run's length is given in steps only (`max_steps` set, `epochs` left at -1): progress, logs and
  /// messages then speak in steps.
  bool by_steps() const { return epochs < 0 && max_steps >= 0; }
};

/// What `fit` returns.
struct FitResult {
  /// Epochs trained by this call.
  int64_t epochs_run = 0;
  /// Optimizer steps attempted since the start of training (a resumed run counts its earlier ones).
  int64_t global_steps = 0;
  /// Of them, steps skipped on a non-finite loss or gradient.
  int64_t skipped_steps = 0;
  /// Training samples consumed by this call.
  int64_t samples_seen = 0;
  /// Whether a policy stopped training before the run's end (its last epoch, or max_steps in a run by steps).
  bool stopped_early = false;
  /// Whether a hook stopped training at a step boundary inside an epoch (TrainState::stop_at_step, set by
  /// callbacks::Preemption): the epoch was cut there, not validated, and a checkpoint policy saved it mid-epoch.
  bool stopped_at_step = false;
  double train_seconds = 0;          ///< wall time in the training loops (evaluation excluded)
  std::vector<Metrics> validation;   ///< one entry per validation of this call, in order
  /// The global step each entry of `validation` was taken at (0 for eval_on_start; an epoch's end's step).
  std::vector<int64_t> validation_steps;
  /// Training throughput of this call (samples_seen / train_seconds).
  double samples_per_second() const { return train_seconds > 0 ? samples_seen / train_seconds : 0.0; }

  /// Tokens trained by this call on this rank (the task's tokens(batch) of every micro-batch, or samples x
  /// FitOptions::items_per_sample); 0 when neither is given.
  int64_t tokens_seen = 0;
  /// Tokens trained by this call on every rank together: tokens_seen summed over the ranks at the end of fit (a
  /// collective through the parallel policy; on one process, tokens_seen). 0 when no tokens are counted.
  int64_t tokens_seen_all_ranks = 0;
  /// The processes that trained together (the parallel policy's world_size()).
  int64_t world_size = 1;
  /// The task's flops_per_token() (0 when it declares none), and FitOptions::peak_flops (per device).
  ///@{
  double flops_per_token = 0, peak_flops = 0;
  ///@}
  /// Training throughput in tokens of this call, summed over the ranks: tokens_seen_all_ranks / train_seconds (the
  /// ranks train in lockstep: every optimizer step waits for all of them). 0 when no tokens are counted.
  double tokens_per_second() const { return train_seconds > 0 ? tokens_seen_all_ranks / train_seconds : 0.0; }
  /// Model FLOPs utilisation (nanoGPT's estimate_mfu, PaLM's appendix B): flops_per_token x tokens_per_second() /
  /// (peak_flops x world_size), the fraction of the devices' peak the model's own arithmetic used. 0 unless the task
  /// declares flops_per_token() and FitOptions::peak_flops is set.
  double mfu() const {
    const double peak = peak_flops * static_cast<double>(world_size);
    return flops_per_token > 0 && peak > 0 ? flops_per_token * tokens_per_second() / peak : 0.0;
  }
};

/// What a hook sees: the task, optimizer, state and the other policies. Hooks read and write through it.
template <class TrainerT>
class Context {
 public:
  /// A context over trainer `t` (the Trainer builds its own; policies receive it).
  explicit Context(TrainerT& t) : t_(&t) {}
  /// The user's task.
  auto& task() { return t_->task(); }
  /// The task's module.
  torch::nn::Module& module() { return t_->module(); }
  /// The optimizer being stepped.
  torch::optim::Optimizer& optimizer() { return t_->optimizer(); }
  /// The run's counters (writable: a hook may request a stop).
  TrainState& state() { return t_->state(); }
  /// The options of the current fit.
  const FitOptions& options() const { return t_->options(); }
  /// The policy of category C (its default when none was given).
  template <Category C>
  auto& policy() { return t_->template policy<C>(); }
  /// A policy or callback by type (a compile error when the Trainer has none of that type).
  template <class P>
  P& get() { return t_->template get<P>(); }
  /// Whether the Trainer composes a policy or callback of type P.
  template <class P>
  static constexpr bool has() { return TrainerT::template has<P>(); }
  /// Micro-batches in this epoch, or -1 when the loader does not say.
  int64_t epoch_batches() const { return t_->epoch_batches_; }
  /// Whether the current epoch ends before its last batch (a max_steps stop): a checkpoint at its end is a
  /// mid-epoch one, which resumes at the batch after the last one trained. Known for every loader, a loader of
  /// unknown length included.
  bool epoch_cut() const { return t_->epoch_cut_; }
  /// Whether the optimizer step now ending was validated (FitOptions::val_every_steps): true from that validation's
  /// on_validation_end hooks to the step's on_step_end hooks, where a checkpoint policy saves last and best.
  bool step_validated() const { return t_->step_validated_; }
  /// Whether the current micro-batch ends an accumulation window (an optimizer step follows its backward).
  bool is_last_micro_step() const { return t_->last_micro_step_; }
  /// Whether this process logs, prints and writes files (rank 0 under data parallelism).
  bool is_main() { return t_->is_main(); }
  /// True on every rank when `b` is true on any rank (identity on one process).
  bool agree_any(bool b) { return t_->agree_any(b); }
  /// The smallest `v` over the ranks, on every rank (identity on one process): a collective, as agree_any.
  int64_t agree_min(int64_t v) { return t_->agree_min(v); }
  /// Whether each rank keeps only its own partition's gradients after the backward (parallel::ShardedDataParallel
  /// at stage 2): a hook that computes a statistic over every gradient (a total norm, an inf check) then computes
  /// its rank's part and reduces it with reduce_gradient_statistic, on every rank (a collective).
  bool gradients_sharded() { return t_->gradients_sharded(); }
  /// Whether the optimizer steps shards of the parameters (stage 3): each rank's gradients are its shards', in the
  /// optimizer's param groups; the module's parameters have none.
  bool parameters_sharded() { return t_->parameters_sharded(); }
  /// Reduces `t` in place over the ranks (sum or max) when gradients are sharded; otherwise leaves it as it is.
  void reduce_gradient_statistic(torch::Tensor& t, GradientReduce op) { t_->reduce_gradient_statistic(t, op); }
  /// Reads every check a policy keeps pending on the device (flush_checks hooks: the precision policy's
  /// non-finite loss check), throwing what it finds. A policy that persists the run calls it first.
  void flush_checks() { t_->flush_checks(); }
  /// Calls every policy's before_checkpoint(ctx, epoch_end) hook (callbacks::MetricsLog flushes its rows). A checkpoint
  /// policy calls it before it writes a checkpoint, so that files a policy keeps beside it cover the checkpoint's step.
  void before_checkpoint(bool epoch_end) { t_->before_checkpoint(epoch_end); }
  /// On every rank, before a checkpoint policy serialises the optimizer: the policies' before_save hooks (a sharded
  /// optimizer gathers its whole state on the main rank; a collective, so every rank calls it at the same save).
  void before_save() { t_->before_save(); }
  /// On every rank, once the optimizer is serialised: the policies' after_save hooks.
  void after_save() { t_->after_save(); }
  /// Whether the step running now is being captured into a graph by a step policy (step::CudaGraph), or replayed
  /// by its emulation: hooks inside the step take their device-only path (no host read, no per-step host state).
  bool capturing() { return t_->capturing(); }
  /// Under a step policy: a 0-dim int64 tensor on the device holding the global step of the step running now,
  /// written before every replay, so that captured device work can name its step. Undefined otherwise.
  const torch::Tensor& step_tensor() { return t_->step_tensor(); }
  /// Calls every policy's prepare_capture(ctx) (a step policy does, before it captures): each allocates the
  /// device buffers its captured work writes, so that they live outside the graph's memory pool.
  void prepare_capture() { t_->prepare_capture(); }
  /// Calls every policy's on_replay(ctx) (a step policy does, after each replay of the captured step).
  void replayed() { t_->on_replay(); }
  /// Every policy's graph_refusal(ctx) that is not empty: why the policy, as configured, cannot be captured.
  std::vector<std::string> graph_refusals() { return t_->graph_refusals(); }
  /// Runs `f()` with the weights the evaluation uses in the module (every around_evaluated_weights hook, the first
  /// policy outermost) and returns their name: "model" for the live weights, else the swapping policies' names
  /// joined by '+' ("callbacks::Ema").
  template <class F>
  std::string with_evaluated_weights(F&& f) { return t_->with_evaluated_weights(static_cast<F&&>(f)); }
  /// Tells the policies that evaluated weights were loaded into the module (their on_weights_loaded hooks).
  void weights_loaded() { t_->weights_loaded(); }
  /// Calls `f(policy)` for every policy and callback of the Trainer, in hook order (Trainer::for_each_policy).
  template <class F>
  void for_each_policy(F&& f) { t_->for_each_policy(static_cast<F&&>(f)); }
  /// The learning rate of param group `g`.
  double lr(size_t g = 0) { return optimizer().param_groups().at(g).options().get_lr(); }
  /// The learning rate param group `g` had in the latest optimizer step (lr() before the first): what a log of that
  /// step shows, since a schedule's after_step has set the next step's lr by the time another after_step runs.
  double step_lr(size_t g = 0) { return t_->step_lr(g); }
  /// The names of the validation's single-number metrics, "loss" first (Trainer::scalar_metric_names): what a
  /// monitor may watch and what a log has a column for.
  std::vector<std::string> metric_names() { return t_->scalar_metric_names(); }
  /// The device of the module's parameters (batches are moved there).
  torch::Device device() const { return t_->device(); }
  /// Whether this fit counts tokens (the task declares tokens(batch), or FitOptions::items_per_sample is set):
  /// TrainState::tokens_seen and window_tokens grow, and loggers add their tokens/s.
  bool counts_tokens() const { return t_->counts_tokens(); }
  /// The task's FLOPs per token (its flops_per_token()), or 0 when it declares none.
  double flops_per_token() { return t_->flops_per_token(); }
  /// The Trainer's counters and every stateful policy's state (Trainer::state_dict), for checkpoint policies.
  StateDict state_dict() const { return t_->state_dict(); }
  /// Restores them (Trainer::load_state_dict); a mid-epoch state makes the next epoch skip the batches it had consumed.
  void load_state_dict(const StateDict& d) { t_->load_state_dict(d); }

 private:
  TrainerT* t_;
};

}  // namespace policytrain
