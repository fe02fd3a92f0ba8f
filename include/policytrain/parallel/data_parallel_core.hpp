#pragma once
/// \file
/// detail::DataParallelCore — what parallel::DataParallel and parallel::ShardedDataParallel both do, composed
/// from the pieces of parallel/: the ProcessGroup, the Replica (the trainable parameters and the counters), the
/// gradient synchronisation by c10d::Reducer (ReducerSync; absent when the owner synchronises the gradients
/// itself: ShardedDataParallel at stage 2), the RankState (start check, the ranks' generator states), rank 0's
/// states and buffers broadcast as DDP's, and the services of core/parallel_services.hpp. Each policy holds one
/// and forwards its hooks to it with what it takes from the context (module, device, counters): the core knows
/// no Trainer.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/state.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/memory/recompute_use.hpp>
#include <policytrain/parallel/environment.hpp>
#include <policytrain/parallel/metrics_reduction.hpp>
#include <policytrain/parallel/options.hpp>
#include <policytrain/parallel/process_group.hpp>
#include <policytrain/parallel/rank_state.hpp>
#include <policytrain/parallel/reducer_sync.hpp>
#include <policytrain/parallel/replica.hpp>

namespace policytrain::parallel::detail {

/// How the gradients are synchronised: by c10d::Reducer, or by the policy that holds the core (ZeRO-2).
enum class GradientSync { reducer, owner };

/// The data-parallel machinery both policies share (see the file comment).
class DataParallelCore {
 public:
  /// Reads the environment now (throws on a bad one; none when `o.enabled` is false) and checks the options.
  DataParallelCore(DataParallelOptions o, GradientSync sync)
      : o_(std::move(o)),
        group_(std::make_shared<ProcessGroup>(o_.enabled ? Environment::from_env() : Environment{},
                                              ProcessGroupOptions{o_.timeout, o_.backend, o_.gloo_threads})),
        rep_(std::make_shared<Replica>()) {
    rep_->group = group_;
    (void)ReducerSync::wire_dtype_of(o_.compression);  // an unknown compression is an error under either sync
    if (sync == GradientSync::reducer) reducer_ = std::make_shared<ReducerSync>(rep_, o_);
  }

  const DataParallelOptions& options() const { return o_; }
  ProcessGroup& group() { return *group_; }
  const ProcessGroup& group() const { return *group_; }
  /// The shared parameter list and counters (a ZeRO-2 synchronisation is built from it).
  const std::shared_ptr<Replica>& replica() const { return rep_; }
  bool active() const { return group_->active(); }
  int rank() const { return group_->rank(); }
  int world_size() const { return group_->world_size(); }
  bool is_main() const { return group_->rank() == 0; }
  /// Whether the start check ran in this fit.
  bool verified() const { return rank_state_.verified(); }

  /// The counters the policies expose (see DataParallel's accessors).
  ///@{
  size_t bucket_count() const { return reducer_ ? reducer_->bucket_count() : 0; }
  int64_t allreduce_calls() const { return rep_->allreduce_calls; }
  int64_t allreduce_calls_in_hooks() const { return rep_->allreduce_calls_in_hooks; }
  int64_t allreduce_calls_last_step() const { return rep_->allreduce_calls_last_step; }
  double comm_wait_seconds() const { return rep_->comm_wait_seconds; }
  int64_t bucket_bytes() const { return rep_->bytes_last_step; }
  c10d::Reducer* reducer() const { return reducer_ ? reducer_->reducer.get() : nullptr; }
  int64_t buffer_broadcasts() const { return buffer_broadcasts_; }
  ///@}

  /// Connects, checks that every rank has the same parameters (c10d::verify_params_across_processes, as DDP),
  /// broadcasts rank 0's parameters and buffers (c10d::broadcast_coalesced), and builds the gradient
  /// synchronisation from the live parameters (DESIGN §7: a part unfrozen since the last fit takes part, and one
  /// frozen since does not).
  void fit_begin(torch::nn::Module& m, torch::Device device) {
    rank_state_.reset();
    if (!active()) return;
    if (searches_unused())
      for (const auto& item : m.named_modules())
        if (dynamic_cast<const memory::RecomputedModule*>(item.value().get()))
          refuse_recompute(item.key().empty() ? std::string("the model is a memory::Recomputed module")
                                              : policytrain::detail::format("the model holds a memory::Recomputed module '{}'", item.key()));
    group_->connect(device);
    sync_parameters(m);
    if (!rep_->params.empty())
      group_->guarded("check that every rank has the same parameters (count, shapes, dtypes)",
                      [&] { c10d::verify_params_across_processes(group_->group(), rep_->params, std::nullopt); });
    broadcast_states(m);
  }

  /// At the first epoch of a fit, after every policy's on_fit_begin (a checkpoint policy has resumed by then):
  /// rebuilds the gradient synchronisation if the parameters changed since fit begin (a policy after this one
  /// converted the layout: callbacks::PerfKnobs' channels_last), applies a resumed bucket order, runs the start
  /// check and gives this rank its own generator states back after a resume.
  void epoch_begin(torch::nn::Module& m, const TrainState& st, torch::Device device) {
    rank_state_.note_epoch_begin(st, world_size());
    if (rank_state_.verified()) return;
    if (active()) {
      sync_parameters(m);
      torch::Tensor order = std::exchange(loaded_buckets_, torch::Tensor());
      const bool learn = std::exchange(loaded_learn_, false);
      if (reducer_ && rank_state_.saved_world_size() == world_size()) {
        reducer_->apply_order(order);
        reducer_->learn_order = learn && !order.defined();  // ReducerSync::learn_static_order
      }
    }
    rank_state_.verify_start(*group_, st, m);
    rank_state_.restore_rng(*group_, device);
  }

  /// A fit that had no epoch left to run still takes part in the start check (the other ranks may have).
  void fit_end(const torch::nn::Module& m, const TrainState& st) {
    if (!rank_state_.verified()) rank_state_.verify_start(*group_, st, m);
  }

  /// On every rank before a checkpoint (a collective): the ranks' generator states, and the Reducer's rebuilt
  /// bucket order (the order a resume builds its Reducer with). A save right after the first synchronised step
  /// (a stop at step 1) comes before the Reducer's rebuild, which waits for the next forward: in training it is
  /// done now (the same collective, in the same state), so that the checkpoint has the order the uninterrupted
  /// run goes on with; a resume that started from one bucket would sum 3 or more ranks' gradients in another order
  /// (found by the Preemption harness: a stop at step 1 on 3 ranks, 1 ulp off). Not with sparse gradients: their
  /// buckets have no flat view until a backward fills them; the checkpoint gets the buckets that rebuild will
  /// compute instead (ReducerSync::pending_rebuild_order). A static graph's Reducer learns the order only from its
  /// second synchronised backward: a save after the first records that the order is pending, and the resumed run
  /// learns it from its own first backward (ReducerSync::learn_static_order; composition fuzzer seed 169497).
  void before_save(torch::Device device, bool training) {
    if (!active()) return;
    rank_state_.gather_rng(*group_, device);
    if (!reducer_) return;
    const auto& sparse = reducer_->rep->sparse;
    const bool has_sparse = std::find(sparse.begin(), sparse.end(), true) != sparse.end();
    if (training && reducer_->reducer && !has_sparse) {
      reducer_->learn_static_order();
      group_->guarded("rebuild of the gradient buckets (a broadcast of rank 0's bucket order)",
                      [&] { reducer_->reducer->rebuild_buckets(); });
    }
    if (auto order = reducer_->rebuilt_bucket_order(); order.defined()) bucket_order_ = order;
    // Sparse gradients: the buckets the pending rebuild will compute, recorded without rebuilding.
    if (training && has_sparse)
      if (auto order = reducer_->pending_rebuild_order(); order.defined()) bucket_order_ = order;
    order_pending_ = reducer_->static_order_pending();
    if (order_pending_) bucket_order_ = torch::Tensor();  // the initial buckets: no rebuilt order yet
  }

  /// Builds the gradient synchronisation's parameter list from the live trainable parameters, or rebuilds it when
  /// they changed since it was built (DESIGN §7): the set of trainable tensors (a part frozen or unfrozen between
  /// two fits) and their strides (the Reducer's bucket views copy each gradient with its parameter's layout at
  /// construction, so a layout converted afterwards would scramble the averaged gradients). Local, no
  /// collective: every rank changes its model alike. Returns whether it (re)built.
  bool sync_parameters(torch::nn::Module& m) {
    auto t = trainable(m);
    if (rep_->same_as(t)) return false;
    if (reducer_) reducer_->reset();
    rep_->release();
    rep_->assign(std::move(t));
    if (reducer_) {
      reducer_->check_parameters();
      if (!rep_->params.empty()) reducer_->build();
    }
    return true;
  }

  /// In training, around the forward: rank 0's buffers before a window's first micro-step (`micro_step` 1) when
  /// broadcast_buffers is set, as DDP before the forward that follows a synchronised one; the Reducer's bucket
  /// rebuild once it has seen a backward's order (a collective, on every rank at the same forward, as DDP's
  /// _pre_forward); the output kept for find_unused_parameters' graph search.
  template <class F>
  decltype(auto) forward(torch::nn::Module& m, int64_t micro_step, F&& fn) {
    if (!active() || !m.is_training() || !torch::GradMode::is_enabled()) return fn();
    if (o_.broadcast_buffers && micro_step == 1) broadcast_buffers(m);
    if (reducer_ && micro_step == 1) reducer_->learn_static_order();  // a window's start, as c10d's rebuild
    if (reducer_ && reducer_->reducer)
      group_->guarded("rebuild of the gradient buckets (a broadcast of rank 0's bucket order)",
                      [&] { reducer_->reducer->rebuild_buckets(); });
    const uint64_t segments = memory::recompute_segments();
    decltype(auto) out = fn();
    if (searches_unused() && memory::recompute_segments() != segments)
      refuse_recompute("the forward called memory::recompute");
    if constexpr (std::is_convertible_v<decltype(out), torch::Tensor>)
      if (reducer_) reducer_->forward_output(torch::Tensor(out));
    return out;
  }

  /// Rank 0's buffers before an evaluation (broadcast_buffers); an evaluation before the first fit joins the job
  /// first and broadcasts rank 0's parameters and buffers, as fit begin does (and DDP's constructor): every rank
  /// evaluates rank 0's model.
  template <class F>
  Metrics evaluate(torch::nn::Module& m, torch::Device device, F&& evaluate) {
    if (active() && !states_broadcast_) {
      group_->connect(device);
      broadcast_states(m);
    } else if (active() && o_.broadcast_buffers) {
      broadcast_buffers(m);
    }
    return evaluate();
  }

  /// The Reducer's backward (ReducerSync::backward); `last`: the micro-step ends its window.
  template <class F>
  void backward(bool last, F&& fn) {
    if (!active() || !reducer_) return static_cast<void>(fn());
    reducer_->backward(last, std::forward<F>(fn));
  }

  /// The Reducer's check before the optimizer step (ReducerSync::before_step).
  void before_step() {
    if (active() && reducer_) reducer_->before_step();
  }

  /// The world size, the ranks' generator states, the Reducer's bucket order, or that a static graph's is still
  /// to be learned (see before_save).
  StateDict state_dict() const {
    StateDict d;
    rank_state_.save(d, world_size());
    if (bucket_order_.defined()) d["bucket_order"] = bucket_order_;
    if (order_pending_) d["bucket_order_pending"] = torch::tensor(int64_t{1});
    return d;
  }
  /// Before a checkpoint: the position in the epoch's global order it records (RankState::note_save).
  void note_save(const TrainState& st) { rank_state_.note_save(st, world_size()); }
  /// After loading a mid-epoch checkpoint of another world size: the samples of that epoch it had trained.
  std::optional<int64_t> elastic_resume_samples() const { return rank_state_.elastic_samples(world_size()); }
  /// The loader re-sharded the resumed epoch (the start check lets the other world size pass).
  void resharded() { rank_state_.resharded(); }
  /// Restores what state_dict() saved (the generator states and bucket order wait for epoch_begin).
  void load_state_dict(const StateDict& d) {
    rank_state_.load(d);
    loaded_buckets_ = d.count("bucket_order") ? d.at("bucket_order") : torch::Tensor();
    loaded_learn_ = d.count("bucket_order_pending") > 0;
  }

  /// The services of core/parallel_services.hpp that both policies offer alike; each collective joins the job
  /// first (on `device`), since one may be asked before fit begins.
  ///@{
  bool agree_any(torch::Device device, bool b) {
    if (!active()) return b;
    group_->connect(device);
    auto t = torch::tensor({b ? 1 : 0}, torch::kInt);
    group_->all_reduce(t, c10d::ReduceOp::SUM, "agreement on a stop / save / rollback decision");
    return t.item<int>() > 0;
  }
  int64_t agree_min(torch::Device device, int64_t v) {
    if (!active()) return v;
    group_->connect(device);
    auto t = torch::tensor({v}, torch::kLong);
    group_->all_reduce(t, c10d::ReduceOp::MIN, "agreement on a smallest value (the auto batch size's micro-batch, a preemption signal)");
    return t.item<int64_t>();
  }
  void reduce_metrics(torch::Device device, MetricsAccumulator& acc) {
    if (!active()) return;
    group_->connect(device);
    parallel::reduce_metrics(*group_, acc);
  }
  void reduce_metric_states(torch::Device device, const std::vector<MetricState*>& states) {
    if (!active()) return;
    group_->connect(device);
    parallel::reduce_metric_states(*group_, states);
  }
  ///@}

 private:
  /// find_unused_parameters' graph search from the forward's output runs each step (no static graph).
  bool searches_unused() const { return o_.find_unused_parameters && !o_.static_graph; }

  /// The graph search cannot see the parameters a recomputed segment uses (their gradients come from a nested
  /// backward): c10d's Reducer would count them unused, then ready again ("Expected to mark a variable ready
  /// only once"), as PyTorch's DDP does with reentrant checkpointing.
  [[noreturn]] void refuse_recompute(const std::string& where) const {
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::DataParallel", policytrain::detail::format(
            "{}: find_unused_parameters = true (without static_graph) cannot "
        "compose with memory::recompute, and {}: the search for unused parameters follows the graph from the "
        "forward's output and cannot see the parameters a recomputed segment uses (their gradients come from a "
        "nested backward), so the Reducer would count them unused and then ready again (PyTorch's DDP fails the "
        "same way with reentrant checkpointing; its non-reentrant checkpoint needs saved-tensor hooks that "
        "LibTorch offers to Python only). Set static_graph = true in DataParallelOptions (the used parameters "
        "are then learnt in the first step, without a search; the same parameters must get gradients every "
        "step), or find_unused_parameters = false if every parameter gets a gradient every step, or do not "
        "recompute", group_->who(), where)));
  }

  void broadcast_states(torch::nn::Module& m) {
    parallel::broadcast_states(*group_, m);
    states_broadcast_ = true;
  }
  void broadcast_buffers(torch::nn::Module& m) {
    if (parallel::sync_buffers(*group_, m)) ++buffer_broadcasts_;
  }

  DataParallelOptions o_;
  std::shared_ptr<ProcessGroup> group_;
  std::shared_ptr<Replica> rep_;
  std::shared_ptr<ReducerSync> reducer_;  ///< null: the owner synchronises the gradients (GradientSync::owner)
  RankState rank_state_;
  bool states_broadcast_ = false;  ///< rank 0's parameters and buffers broadcast (fit begin, or an evaluation before)
  int64_t buffer_broadcasts_ = 0;  ///< broadcasts of rank 0's buffers so far
  torch::Tensor loaded_buckets_;   ///< bucket_order of the checkpoint loaded, until epoch_begin applies it
  torch::Tensor bucket_order_;     ///< the Reducer's rebuilt bucket order at the latest checkpoint (before_save)
  bool order_pending_ = false;     ///< static graph: the latest checkpoint came before c10d could learn the order
  bool loaded_learn_ = false;      ///< the checkpoint loaded says so: the resumed Reducer learns it (epoch_begin)
};

}  // namespace policytrain::parallel::detail
