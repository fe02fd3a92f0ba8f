#pragma once
/// \file
/// callbacks::DivergenceRollback — when the loss turns non-finite or spikes, puts the model and optimizer
/// back to the last good state (kept in memory), lowers the learning rate by `lr_factor`, and goes on with
/// the next batch, at most `max_rollbacks` times (then DivergenceError). dlib's dnn_trainer does the same.
/// A snapshot (weights, optimizer moments) is taken at fit begin and every `snapshot_every` steps whose loss
/// was good. A spike is a loss above `spike_factor` times its running mean (after `warmup_steps` steps).
/// Counters, data position and other policies' state go on; a schedule that wants to honour the lower lr
/// exposes `void scale_lr(double)`, which is called with the factor (schedule::Lr does: the lower lr then lasts
/// for the rest of the run, tests/unit/test_schedule_reference.cpp).
/// Hooks: on_fit_begin, after_step. Works with the precision policy's NonFinite::rollback (or
/// `NonFinite::skip`, `NonFinite::ignore`; under NonFinite::error a non-finite loss throws first, so only spikes
/// are rolled back, and without spike detection the combination is refused at fit begin). Put it before
/// callbacks::Ema in the Trainer's arguments. Cost: one read of the loss per step (a device sync on CUDA), and
/// a copy of weights and optimizer state per snapshot; when `enabled` is false, a branch per hook.
/// Under stage 3 of parallel::ShardedDataParallel (parameters sharded on dim 0, freed between steps) a snapshot holds
/// what the rank owns: its shard of every parameter (the tensors the optimizer steps), the buffers and the shards'
/// optimizer state, total / N of the weights per rank; a rollback writes them back and the units that are gathered
/// gather again (ShardedDataParallel::shards_changed, a collective at the point where every rank rolls back).
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <vector>
#include <string>

#include <fmt/format.h>

#include <policytrain/checkpoint/archive.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/precision/fp32.hpp>

namespace policytrain::callbacks {

/// Thrown when the loss diverges again after `max_rollbacks` rollbacks.
struct DivergenceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Rolls the model and optimizer back to the last good state when the loss diverges (see the file comment).
class DivergenceRollback {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::DivergenceRollback";
  /// Settings of DivergenceRollback: lr factor, rollback limit, snapshot interval, spike detection.
  struct Options {
    /// false: never roll back (a branch per hook).
    bool enabled = true;
    double lr_factor = 0.5;       ///< each rollback multiplies every param group's lr by this
    int64_t max_rollbacks = 3;    ///< then DivergenceError
    int64_t snapshot_every = 50;  ///< steps between snapshots of the last good state
    double spike_factor = 0;      ///< a loss above this times its running mean is a spike (0: non-finite only)
    int64_t warmup_steps = 20;    ///< steps before spikes are looked for
    double smoothing = 0.98;      ///< of the running mean of the loss
    std::FILE* log = stderr;      ///< where rollbacks are reported (main rank; nullptr: nowhere)
  };

  DivergenceRollback() = default;
  /// Throws std::invalid_argument for lr_factor outside (0, 1] or snapshot_every < 1.
  explicit DivergenceRollback(Options o) : o_(o) {
    if (!(o_.lr_factor > 0 && o_.lr_factor <= 1))
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::callbacks::DivergenceRollback",
          policytrain::detail::format("lr_factor is {}, expected in (0, 1]", o_.lr_factor)));
    if (o_.snapshot_every < 1)
      throw std::invalid_argument(policytrain::detail::error_message("policytrain::callbacks::DivergenceRollback",
                                                                     "snapshot_every must be >= 1"));
  }

  /// Rollbacks so far.
  int64_t rollbacks() const { return rollbacks_; }
  /// Bytes of the weights and buffers the last snapshot copied (at stage 3, this rank's shards: total / N of the weights).
  int64_t snapshot_bytes() const { return last_good_.tensor_bytes(); }
  /// The global step of the snapshot a rollback returns to.
  int64_t snapshot_step() const { return snapshot_step_; }

  /// Refuses NonFinite::error without spike detection, then takes the first snapshot.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    if (!o_.enabled) return;
    bind(ctx);
    if constexpr (requires { ctx.template policy<Category::precision>().on_nonfinite; }) {
      if (ctx.template policy<Category::precision>().on_nonfinite == NonFinite::error && o_.spike_factor <= 0)
        throw std::invalid_argument(policytrain::detail::error_message(
            "policytrain::callbacks::DivergenceRollback",
            "the precision policy throws on a non-finite loss "
            "(NonFinite::error) and spike detection is off, so no rollback could happen; set the precision "
            "policy's on_nonfinite to NonFinite::rollback (or set spike_factor)"));
    }
    take(ctx);
  }

  /// Rolls back on a non-finite or spiking loss (on any rank); otherwise updates the running mean and snapshots.
  template <class Ctx>
  void after_step(Ctx& ctx, bool stepped) {
    if (!o_.enabled) return;
    const double loss = ctx.state().loss_value();
    const bool spike = o_.spike_factor > 0 && seen_ >= o_.warmup_steps && std::isfinite(mean_) &&
                       loss > o_.spike_factor * mean_;
    const bool bad = ctx.agree_any(!std::isfinite(loss) || spike);
    if (bad) {
      roll_back(ctx, loss, spike);
      return;
    }
    mean_ = seen_ == 0 ? loss : o_.smoothing * mean_ + (1 - o_.smoothing) * loss;
    ++seen_;
    if (stepped && ctx.state().global_step - snapshot_step_ >= o_.snapshot_every) take(ctx);
  }

  /// The rollback count.
  StateDict state_dict() const { return {{"rollbacks", scalar_tensor(rollbacks_)}}; }
  /// Restores what state_dict() saved.
  void load_state_dict(const StateDict& d) { rollbacks_ = state_int(d, "rollbacks"); }

 private:
  /// Stage 3 (the parallel policy shards the parameters and frees them between steps): what the rank owns, each
  /// parameter's shard (the tensor the optimizer steps) in place of the parameter, and the buffers, so that a
  /// snapshot holds total / N of the weights; otherwise nothing (the module's tensors are snapshot).
  template <class Ctx>
  void bind(Ctx& ctx) {
    owned_.clear();
    if constexpr (requires(const torch::Tensor& t) { ctx.template policy<Category::parallel>().shard(t); })
      if (ctx.parameters_sharded()) {
        auto& par = ctx.template policy<Category::parallel>();
        for (const auto& [k, t] : checkpoint::detail::named_tensors(ctx.module())) {
          auto shard = par.shard(t);
          owned_.push_back(shard.defined() ? shard : t);
        }
      }
  }

  template <class Ctx>
  void take(Ctx& ctx) {
    last_good_ = owned_.empty() ? checkpoint::Snapshot(ctx.module(), ctx.optimizer(), std::nullopt, /*with_rng=*/false)
                                : checkpoint::Snapshot(owned_, ctx.optimizer(), std::nullopt, /*with_rng=*/false);
    snapshot_step_ = ctx.state().global_step;
  }

  template <class Ctx>
  void roll_back(Ctx& ctx, double loss, bool spike) {
    const auto& s = ctx.state();
    if (rollbacks_ >= o_.max_rollbacks)
      throw DivergenceError(policytrain::detail::error_message(
          "policytrain::callbacks::DivergenceRollback",
          policytrain::detail::format("the loss is {} at epoch {}, step {} after {} rollbacks (lr {:.3g}); "
                                      "lower the learning rate, {}or allow more rollbacks",
                                      loss, s.epoch, s.global_step, rollbacks_, ctx.lr(),
                                      policytrain::detail::clip_advice(ctx))));
    ++rollbacks_;
    auto& opt = ctx.optimizer();
    std::vector<double> lrs;
    for (auto& g : opt.param_groups()) lrs.push_back(g.options().get_lr());
    if (owned_.empty()) {
      last_good_.restore(ctx.module(), opt);
    } else {
      last_good_.restore(owned_, opt);
      // The units gathered now hold the diverged weights: they gather the restored shards again (a collective; every
      // rank rolls back at this point, agree_any).
      if constexpr (requires { ctx.template policy<Category::parallel>().shards_changed(); })
        ctx.template policy<Category::parallel>().shards_changed();
    }
    for (size_t i = 0; i < lrs.size(); ++i) opt.param_groups()[i].options().set_lr(lrs[i] * o_.lr_factor);
    if constexpr (requires { ctx.template policy<Category::schedule>().scale_lr(o_.lr_factor); })
      ctx.template policy<Category::schedule>().scale_lr(o_.lr_factor);
    if (o_.log && ctx.is_main()) {
      std::fprintf(o_.log,
                   "policytrain::callbacks::DivergenceRollback: loss %g%s at epoch %lld, step %lld; rolled back to "
                   "step %lld, lr %.3g -> %.3g (rollback %lld of %lld)\n",
                   loss, spike ? policytrain::detail::format(" (a spike above {:.3g}x its mean {:.4g})", o_.spike_factor, mean_).c_str() : "",
                   static_cast<long long>(s.epoch), static_cast<long long>(s.global_step),
                   static_cast<long long>(snapshot_step_), lrs.empty() ? 0.0 : lrs[0],
                   lrs.empty() ? 0.0 : lrs[0] * o_.lr_factor, static_cast<long long>(rollbacks_),
                   static_cast<long long>(o_.max_rollbacks));
      std::fflush(o_.log);
    }
  }

  Options o_;
  checkpoint::Snapshot last_good_;
  std::vector<torch::Tensor> owned_;  ///< stage 3: the shards and buffers a snapshot copies (bind); else empty
  int64_t snapshot_step_ = 0;
  int64_t rollbacks_ = 0;
  int64_t seen_ = 0;
  double mean_ = std::numeric_limits<double>::quiet_NaN();
};

}  // namespace policytrain::callbacks
