#pragma once
/// \file
/// callbacks::Ema — an exponential moving average of the model's parameters and floating-point buffers, used for
/// evaluation: Ultralytics' ModelEMA. After every optimizer step that was taken (not after a skipped one) the
/// average moves towards the model with the ramped decay d_t = decay * (1 - exp(-t / tau)) for the t-th update:
///     ema = d_t * ema + (1 - d_t) * live
/// for every parameter and, with `average_buffers` (default, as ModelEMA, which averages every floating-point
/// entry of the state_dict), every floating-point buffer (batch-norm running mean and variance). Integer buffers
/// (num_batches_tracked) are not averaged: evaluation uses the live ones. With average_buffers = false, evaluation
/// pairs the EMA weights with the live statistics.
/// Under data parallelism each rank's batch norm moves its statistics with its own batch, so each rank's average of
/// them differs. The average's buffers follow the model's: where the parallel policy broadcasts rank 0's buffers
/// (DataParallelOptions::broadcast_buffers, DDP's rule, at every stage of ShardedDataParallel), rank 0's average of
/// them is broadcast before every evaluation with the average (one collective of the buffers), so every rank
/// evaluates rank 0's, the one a checkpoint keeps, best.pt and final.pt hold, and a resume restores on every rank;
/// a resumed run validates bit for bit as the uninterrupted one. With broadcast_buffers = false every rank keeps
/// and evaluates its own, as its buffers.
/// Tied parameters (one tensor registered under two names) are averaged and swapped once
/// (policytrain::unique_named_parameters); ModelEMA, iterating the state_dict, would update a tied tensor twice.
/// Hooks: on_fit_begin (first copy), after_step (update), around_evaluate (the EMA weights are swapped in for
/// the evaluation and swapped back, also when it throws), around_evaluated_weights (the same swap around a
/// checkpoint policy's record of the weights that scored: best.ckpt's evaluated section, best.pt), on_weights_loaded
/// (the average becomes a copy of weights loaded as the evaluated ones, so that `evaluate` evaluates them),
/// before_save / after_save (stage 3: the whole average gathered for a checkpoint, and let go). Stateful: the average and the update count go into
/// checkpoints. Requires nothing else; put it after callbacks::DivergenceRollback so a rolled-back step is not averaged.
/// Under stage 3 of parallel::ShardedDataParallel (fully sharded parameters, freed between steps) the average follows
/// the tensors the optimizer steps: each rank averages its own dim-0 rows of every parameter (the shards, total / N
/// of the average per rank), with the same decay, ramp and `every`. For an evaluation the rows are swapped into the
/// shards and the units' all-gather computes with the average (the groups gathered at that point gather again, and
/// every group is freed after the swap back); a consolidated checkpoint's save gathers the whole average on every
/// rank (before_save, a collective) for the state and the evaluated weights (best.pt), in an unsharded run's format;
/// a sharded one (checkpoint::Disk::Options::sharded) gathers nothing: each rank writes its rows (state_rows), and
/// best.pt and final.pt are gathered onto rank 0 from the shards with the rows swapped in (around_evaluated_weights).
/// A resume at any world size takes its rows; at fit end, once the module is whole again, the average is gathered
/// whole (an evaluation after fit uses it as at other stages).
/// With `every` = k > 1 the average moves only at every k-th step taken, by the decay of that step raised to the
/// k-th power (airbench's EMA every 5 steps): d_t^k is the decay k updates of d_t would apply to the average, so the
/// ramp and the averaging horizon stay those of every=1, while the steps in between are sampled, not averaged.
/// Under step::CudaGraph the update is not captured: it runs eagerly after the replay, on the host's schedule, so
/// its launches (and the ramp's host arithmetic) are paid at every step; `every` divides them by k.
/// Cost: one copy of the parameters and floating-point buffers, four foreach kernels per k steps taken; when
/// `enabled` is false, a branch per hook.
#include <cmath>
#include <concepts>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_mul.h>
#include <fmt/format.h>
#include <torch/nn/module.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/dim0_shard.hpp>

namespace policytrain::callbacks {

/// An exponential moving average of the model's parameters, used for evaluation (see the file comment).
class Ema {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::Ema";
  /// Settings of Ema: the decay and its ramp.
  struct Options {
    /// false: no average (a branch per hook).
    bool enabled = true;
    double decay = 0.9999;  ///< the decay the ramp approaches
    double tau = 2000;      ///< ramp length in updates (0: the constant decay from the first update)
    /// Average the floating-point buffers too (Ultralytics' ModelEMA); false: evaluation uses the live buffers.
    bool average_buffers = true;
    /// Move the average every `every` steps taken (>= 1), by decay_at(t)^every (see the file comment).
    int64_t every = 1;
  };

  Ema() = default;
  /// Throws std::invalid_argument for a decay outside [0, 1) or tau < 0.
  explicit Ema(Options o);
  /// Copied and moved as its members are, out of line (with the other non-template members): the implicit ones
  /// were generated in every file that builds a Trainer with an Ema (about 2.5 KB of code).
  ///@{
  Ema(const Ema&);
  Ema(Ema&&) noexcept;
  Ema& operator=(const Ema&);
  Ema& operator=(Ema&&) noexcept;
  ~Ema();
  ///@}

  /// Whether the average is kept.
  bool enabled() const { return o_.enabled; }
  /// The settings.
  const Options& options() const { return o_; }
  /// Optimizer steps taken so far (with every > 1 the average moved at every `every`-th of them).
  int64_t updates() const { return updates_; }
  /// The decay of the t-th update.
  double decay_at(int64_t t) const { return o_.tau > 0 ? o_.decay * (1.0 - std::exp(-static_cast<double>(t) / o_.tau)) : o_.decay; }
  /// The averaged parameters, in the module's parameter order, each tied tensor once (empty before the first fit);
  /// during a fit at stage 3, this rank's dim-0 rows of each (sharded()).
  const std::vector<torch::Tensor>& average() const { return shadow_; }
  /// Whether the average holds this rank's rows of the parameters (stage 3, during a fit) rather than whole tensors.
  bool sharded() const { return sharded_; }
  /// The averaged floating-point buffers, in the module's buffer order (empty with average_buffers = false).
  const std::vector<torch::Tensor>& buffer_average() const { return buffer_shadow_; }

  /// Copies the parameters as the first average (at stage 3, this rank's rows of them).
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    if (!o_.enabled) return;
    bind_for(ctx);
  }

  /// After a step that was taken: moves the average towards the weights with the decay of that update (at every
  /// `every`-th step taken, by that decay to the power `every`).
  template <class Ctx>
  void after_step(Ctx& ctx, bool stepped) {
    if (!o_.enabled || !stepped) return;
    if (shadow_.empty()) bind_for(ctx);
    ++updates_;
    if (updates_ % o_.every != 0) return;
    const double d = std::pow(decay_at(updates_), static_cast<double>(o_.every));
    torch::NoGradGuard g;
    at::_foreach_mul_(shadow_, d);
    at::_foreach_add_(shadow_, params_, 1.0 - d);
    if (!buffer_shadow_.empty()) {
      at::_foreach_mul_(buffer_shadow_, d);
      at::_foreach_add_(buffer_shadow_, buffers_, 1.0 - d);
    }
  }

  /// Runs `evaluate` with the EMA weights swapped in (at stage 3: into the shards, which the units gather); under
  /// a parallel policy that broadcasts rank 0's buffers, with rank 0's average of them (a collective).
  template <class Ctx, class F>
  Metrics around_evaluate(Ctx& ctx, F&& evaluate) {
    if (!o_.enabled || shadow_.empty()) return evaluate();
    buffers_from_rank0(ctx);
    if constexpr (requires { ctx.template policy<Category::parallel>().shards_changed(); })
      if (sharded_) {
        auto& par = ctx.template policy<Category::parallel>();
        // The parallel policy's around_evaluate, outside this one, gathered the root from the trained shards: the
        // groups gathered now gather again from the average. After the swap back every group is freed (local), so
        // that training gathers the trained shards again; also when the evaluation throws (no collective then).
        struct Swap {
          Ema& e;
          decltype(par)& p;
          Swap(Ema& e, decltype(par)& p) : e(e), p(p) { e.swap(); }
          ~Swap() {
            e.swap();
            p.reshard();
          }
        } swap(*this, par);
        par.shards_changed();
        return evaluate();
      }
    return with_weights(ctx.module(), std::forward<F>(evaluate));
  }

  /// At stage 3, on every rank before a checkpoint serialises the state (after the parallel policy gathered the
  /// module): the whole average, all-gathered from every rank's rows (a collective), for state_dict() and
  /// around_evaluated_weights until after_save.
  /// A sharded checkpoint's save (the parallel policy's sharded_save()) gathers nothing: each rank writes its rows
  /// (state_rows).
  template <class Ctx>
  void before_save(Ctx& ctx) {
    if (!o_.enabled || !sharded_) return;
    if constexpr (requires(torch::Tensor t) { ctx.template policy<Category::parallel>().gather_rows(t, t); }) {
      auto& par = ctx.template policy<Category::parallel>();
      if constexpr (requires { par.sharded_save(); })
        if (par.sharded_save()) return;
      gathered_.clear();
      for (size_t i = 0; i < shadow_.size(); ++i) gathered_.push_back(par.gather_rows(fulls_[i], shadow_[i]));
    }
  }
  /// After the save: the whole average let go again.
  template <class Ctx>
  void after_save(Ctx&) {
    gathered_.clear();
  }

  /// Runs `fn` with the EMA weights swapped in, for a checkpoint policy recording the evaluated weights; returns
  /// "callbacks::Ema", or "" (and runs `fn` on the live weights) when there is no average.
  template <class Ctx, class F>
  std::string around_evaluated_weights(Ctx& ctx, F&& fn) {
    if (!o_.enabled || shadow_.empty()) {
      fn();
      return "";
    }
    if (sharded_ && gathered_.size() != fulls_.size()) {
      // Stage 3 outside a consolidated save (a sharded save's best.pt, final.pt before fit end gathers the model):
      // the rows swapped into the shards as for an evaluation, which the export gathers onto rank 0
      // (ShardedDataParallel::gather_to_main). On every rank.
      if constexpr (requires { ctx.template policy<Category::parallel>().shards_changed(); }) {
        (void)around_evaluate(ctx, [&] {
          fn();
          return Metrics();
        });
        return std::string(name);
      }
    }
    if (sharded_) {
      // Stage 3, inside a consolidated save: the module is whole (the parallel policy gathered it), the average too
      // (before_save).
      torch::NoGradGuard g;
      struct Swap {
        Ema& e;
        explicit Swap(Ema& e) : e(e) { e.swap_whole(); }
        ~Swap() { e.swap_whole(); }
      } swap(*this);
      fn();
      return std::string(name);
    }
    with_weights(ctx.module(), std::forward<F>(fn));
    return std::string(name);
  }

  /// Stage 3 in a sharded checkpoint's save (before_save gathered nothing): the entries of state_dict() that hold
  /// this rank's rows of a parameter's average ("average/<name>"), each with the parameter's name in the model, so
  /// that each rank writes its own rows as it does the parameters' (checkpoint::Disk); empty otherwise (state_dict()
  /// holds whole tensors).
  std::vector<std::pair<std::string, std::string>> state_rows() const;

  /// The module now holds weights loaded as the evaluated ones (checkpoint::load_weights(trainer, file)): the
  /// average becomes their copy, so that `evaluate` evaluates them (the update count is kept).
  template <class Ctx>
  void on_weights_loaded(Ctx& ctx) {
    if (!o_.enabled) return;
    pending_.clear();
    pending_buffers_.clear();
    shadow_.clear();
    buffer_shadow_.clear();
    bind_for(ctx);
  }

  /// Runs `fn` with the EMA weights in `m` (the module the average was taken of), then puts the trained
  /// weights back, also when `fn` throws.
  template <class F>
  decltype(auto) with_weights(torch::nn::Module& m, F&& fn) {
    if (shadow_.empty()) bind(m);
    struct Swap {
      Ema& e;
      explicit Swap(Ema& e) : e(e) { e.swap(); }
      ~Swap() { e.swap(); }
    } swap(*this);
    return fn();
  }

  /// The update count and the average, by parameter name ("average/<name>") and buffer name ("buffer/<name>").
  StateDict state_dict() const;
  /// Restores the count and the average; the average is matched to the module's parameters (and floating-point
  /// buffers) by name at the next fit (on_fit_begin), which throws when they differ.
  void load_state_dict(const StateDict& d);

 private:
  /// bind() with the shards the parallel policy steps in place of the module's parameters (stage 3 during a fit;
  /// none otherwise), and, at stage 3, the average gathered whole at fit end.
  template <class Ctx>
  void bind_for(Ctx& ctx) {
    std::vector<torch::Tensor> shards;
    int64_t rank = 0, world = 1;
    if constexpr (requires(torch::Tensor t) { ctx.template policy<Category::parallel>().gather_rows(t, t); })
      if (ctx.parameters_sharded()) {
        auto& par = ctx.template policy<Category::parallel>();
        for (const auto& [n, p] : unique_named_parameters(ctx.module())) shards.push_back(par.shard(p));
        rank = par.rank();
        world = par.world_size();
        par.on_unsharded([this, &par] {
          if (!sharded_) return;
          std::vector<torch::Tensor> whole;
          for (size_t i = 0; i < shadow_.size(); ++i) whole.push_back(par.gather_rows(fulls_[i], shadow_[i]));
          shadow_ = std::move(whole);
          params_ = fulls_;
          sharded_ = false;
        });
      }
    bind(ctx.module(), std::move(shards), rank, world);
  }
  /// Takes the module's parameters (each tensor once) and floating-point buffers; the average starts as their
  /// copy (or as a loaded average). With `shards` (one per parameter, this rank's dim-0 rows of it among `world`
  /// ranks), the average is of the shards: rows of the parameters, of a whole average kept from an earlier fit,
  /// or of a loaded one.
  void bind(torch::nn::Module& m, std::vector<torch::Tensor> shards = {}, int64_t rank = 0, int64_t world = 1);
  static std::vector<torch::Tensor> match(const std::vector<std::string>& names, const std::vector<torch::Tensor>& live,
                                          std::map<std::string, torch::Tensor>& pending, const char* what);
  void adopt_pending() {
    auto s = match(names_, fulls_, pending_, "parameter");
    if (sharded_)
      for (auto& t : s) t = parallel::dim0_piece(t, rank_, world_).clone();
    auto b = match(buffer_names_, buffers_, pending_buffers_, "buffer");
    shadow_ = std::move(s);
    buffer_shadow_ = std::move(b);
  }
  static void swap(std::vector<torch::Tensor>& live, std::vector<torch::Tensor>& shadow) {
    for (size_t i = 0; i < shadow.size(); ++i) {
      auto tmp = live[i].detach().clone();
      live[i].detach().copy_(shadow[i]);
      shadow[i].copy_(tmp);
    }
  }
  void swap() {
    torch::NoGradGuard g;
    swap(params_, shadow_);
    swap(buffers_, buffer_shadow_);
  }
  /// Stage 3 inside a save: the module's whole parameters and the whole average exchanged (and the buffers).
  void swap_whole() {
    torch::NoGradGuard g;
    swap(fulls_, gathered_);
    swap(buffers_, buffer_shadow_);
  }

  /// DDP's broadcast_buffers applied to the average: where the parallel policy makes every rank's buffers rank 0's
  /// before an evaluation (DataParallelOptions::broadcast_buffers), the buffers' average becomes rank 0's as well (a
  /// collective). Each rank's batch norm moves its running statistics with its own batch, so each rank's average of
  /// them drifts from rank 0's between evaluations, as each rank's buffers do between DDP's broadcasts; what is
  /// evaluated, then, is rank 0's average, the one a checkpoint keeps, best.pt and final.pt hold, and a resume
  /// restores on every rank: a resumed run validates bit for bit as the uninterrupted one.
  template <class Ctx>
  void buffers_from_rank0(Ctx& ctx) {
    if constexpr (requires {
                    { ctx.template policy<Category::parallel>().active() } -> std::convertible_to<bool>;
                    { ctx.template policy<Category::parallel>().options().broadcast_buffers } -> std::convertible_to<bool>;
                    ctx.template policy<Category::parallel>().process_group().broadcast_coalesced(buffer_shadow_, 0, "");
                  }) {
      auto& par = ctx.template policy<Category::parallel>();
      if (buffer_shadow_.empty() || !par.active() || !par.options().broadcast_buffers) return;
      torch::NoGradGuard g;
      par.process_group().broadcast_coalesced(buffer_shadow_, 0, "broadcast of rank 0's average of the buffers (callbacks::Ema)");
    }
  }

  Options o_;
  int64_t updates_ = 0;
  std::vector<std::string> names_;
  std::vector<std::string> buffer_names_;
  std::vector<torch::Tensor> params_, shadow_, buffers_, buffer_shadow_;
  std::vector<torch::Tensor> fulls_;     ///< the module's parameters (params_ holds their shards when sharded_)
  std::vector<torch::Tensor> gathered_;  ///< stage 3: the whole average during a save (before_save to after_save)
  bool sharded_ = false;                 ///< shadow_ holds this rank's rows of the parameters (stage 3 in a fit)
  int64_t rank_ = 0, world_ = 1;         ///< whose rows, among how many ranks
  std::map<std::string, torch::Tensor> pending_, pending_buffers_;
};

// Ema's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL Ema::Ema(const Ema&) = default;
POLICYTRAIN_DECL Ema::Ema(Ema&&) noexcept = default;
POLICYTRAIN_DECL Ema& Ema::operator=(const Ema&) = default;
POLICYTRAIN_DECL Ema& Ema::operator=(Ema&&) noexcept = default;
POLICYTRAIN_DECL Ema::~Ema() = default;

POLICYTRAIN_DECL std::vector<std::pair<std::string, std::string>> Ema::state_rows() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (!o_.enabled || !sharded_ || gathered_.size() == shadow_.size()) return out;
  for (const auto& n : names_) out.emplace_back("average/" + n, n);
  return out;
}

POLICYTRAIN_DECL StateDict Ema::state_dict() const {
  StateDict d{{"updates", scalar_tensor(updates_)}};
  // Stage 3 in a save: the whole average (before_save), so the checkpoint holds what an unsharded run's does.
  const auto& avg = gathered_.size() == shadow_.size() && !gathered_.empty() ? gathered_ : shadow_;
  for (size_t i = 0; i < avg.size(); ++i) d.emplace("average/" + names_[i], avg[i]);
  for (size_t i = 0; i < buffer_shadow_.size(); ++i) d.emplace("buffer/" + buffer_names_[i], buffer_shadow_[i]);
  return d;
}

POLICYTRAIN_DECL void Ema::load_state_dict(const StateDict& d) {
  updates_ = state_int(d, "updates");
  pending_.clear();
  pending_buffers_.clear();
  for (const auto& [k, v] : sub_state(d, "average/")) pending_.emplace(k, v.detach().clone());
  for (const auto& [k, v] : sub_state(d, "buffer/")) pending_buffers_.emplace(k, v.detach().clone());
  if (!pending_.empty() && !params_.empty()) adopt_pending();
}

POLICYTRAIN_DECL void Ema::bind(torch::nn::Module& m, std::vector<torch::Tensor> shards, int64_t rank, int64_t world) {
  params_.clear();
  fulls_.clear();
  names_.clear();
  buffers_.clear();
  buffer_names_.clear();
  for (auto& [name, p] : unique_named_parameters(m)) {
    names_.push_back(name);
    fulls_.push_back(p);
  }
  if (o_.average_buffers)
    for (auto& [name, b] : unique_named_buffers(m))
      if (b.is_floating_point()) {
        buffer_names_.push_back(name);
        buffers_.push_back(b);
      }
  const bool rows = !shards.empty();
  // What the average holds now: this rank's rows (an earlier bind of this fit), or whole tensors (an earlier fit's,
  // gathered at its end, or a run without stage 3).
  const bool had_rows = sharded_;
  params_ = rows ? std::move(shards) : fulls_;
  sharded_ = rows;
  rank_ = rank;
  world_ = world;
  const auto same_shapes = [](const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].sizes() != b[i].sizes()) return false;
    return true;
  };
  torch::NoGradGuard g;
  if (!pending_.empty()) {
    adopt_pending();
  } else if (rows && !had_rows && same_shapes(shadow_, fulls_) && buffer_shadow_.size() == buffers_.size()) {
    for (auto& s : shadow_) s = parallel::dim0_piece(s, rank, world).clone();  // an earlier fit's whole average
  } else if (rows != had_rows || !same_shapes(shadow_, params_) || buffer_shadow_.size() != buffers_.size()) {
    shadow_.clear();
    buffer_shadow_.clear();
    for (const auto& p : fulls_)
      shadow_.push_back(rows ? parallel::dim0_piece(p.detach(), rank, world).clone() : p.detach().clone());
    for (const auto& b : buffers_) buffer_shadow_.push_back(b.detach().clone());
  }
}

POLICYTRAIN_DECL std::vector<torch::Tensor> Ema::match(const std::vector<std::string>& names, const std::vector<torch::Tensor>& live,
                                        std::map<std::string, torch::Tensor>& pending, const char* what) {
  std::vector<torch::Tensor> s;
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = pending.find(names[i]);
    if (it == pending.end() || it->second.sizes() != live[i].sizes())
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::callbacks::Ema",
          policytrain::detail::format("the loaded average {} {} '{}' of this model; load the state of the same "
                                      "model{}",
                                      it == pending.end() ? "lacks the" : "has another shape for the", what, names[i],
                                      std::string_view(what) == "buffer"
                                          ? " (a state saved with average_buffers = false needs it false)"
                                          : "")));
    s.push_back(it->second.to(live[i].device(), live[i].scalar_type()));
  }
  if (pending.size() != names.size())
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::callbacks::Ema",
        policytrain::detail::format(
            "the loaded average has {} {}s, this model {}; load the state of the same model{}", pending.size(), what,
            names.size(),
            std::string_view(what) == "buffer" ? " (a state saved with average_buffers = true needs it true)" : "")));
  pending.clear();
  return s;
}

POLICYTRAIN_DECL Ema::Ema(Options o) : o_(o) {
  if (!(o_.decay >= 0 && o_.decay < 1))
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::callbacks::Ema",
        policytrain::detail::format("decay is {}, expected 0 <= decay < 1", o_.decay)));
  if (o_.tau < 0)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::callbacks::Ema", policytrain::detail::format("tau is {}, expected >= 0", o_.tau)));
  if (o_.every < 1)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::callbacks::Ema",
        policytrain::detail::format("every is {}", o_.every), ">= 1",
        "set every = 1 to move the average at every step taken"));
}
#endif

}  // namespace policytrain::callbacks
