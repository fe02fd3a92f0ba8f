#pragma once
/// \file
/// parallel::DataParallel — data-parallel training over PyTorch's c10d (Gloo on CPU, NCCL on CUDA), started
/// from the environment its launcher set (parallel::Environment: torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
/// MASTER_ADDR, MASTER_PORT and agent store; Slurm's srun; Open MPI's mpirun).
///
/// Every rank holds the whole model and trains on its own shard of the data (data::TensorLoader with
/// LoaderOptions{rank, world_size}). At the start of fit, rank 0's parameters and buffers are broadcast, and at
/// the first epoch every rank checks that all start from the same state (a resume from different checkpoints
/// is an error, ResumeMismatch). Rank 0's buffers are broadcast before the first forward of every accumulation
/// window and every evaluation (broadcast_buffers, as DDP's).
///
/// The gradients are synchronised by PyTorch's own c10d::Reducer, the engine under Python's
/// DistributedDataParallel, driven as DDP drives it: the same bucket assignment
/// (c10d::compute_bucket_assignment_by_size, one bucket in the first step, then rebuilt in the order the gradients
/// became ready), prepare_for_forward / prepare_for_backward on a window's last micro-step only (DDP's no_sync on
/// the others: no communication at all), each bucket all-reduced from the autograd hooks as soon as its gradients
/// are ready, and the averages written back at the backward's end. find_unused_parameters,
/// gradient_as_bucket_view and static_graph are the Reducer's own. The communication hook averages (divide, then
/// sum: Gloo has no AVG), in fp16 / bf16 with gradient compression, and counts the all-reduces.
///
/// Hooks: on_fit_begin (connect, verify, broadcast, build the Reducer), on_epoch_begin (start check; after a
/// resume each rank's own generator states), around_forward (buffers, bucket rebuild) / around_evaluate (buffers),
/// around_backward (sync or not), before_step (the Reducer finished, or a late average), before_save (every rank's
/// generator states, gathered), state_dict (world size, those states); and every service of the parallel-services
/// contract (core/parallel_services.hpp).
/// Pieces (each usable without a Trainer): parallel::ProcessGroup (process_group.hpp), detail::ReducerSync
/// (reducer_sync.hpp), parallel::RankState (rank_state.hpp), the metrics reductions (metrics_reduction.hpp), the
/// Replica (replica.hpp), composed by detail::DataParallelCore (data_parallel_core.hpp), which
/// parallel::ShardedDataParallel composes too.
/// Requires: every rank runs the same Trainer on equally long shards (TensorLoader pads by wrapping).
/// Each rank normalises batch norm by its own micro-batch (no SyncBatchNorm), as in PyTorch's DDP.
/// What matches DDP and what does not: docs/parallel.md (checked side by side: tests/unit/test_ddp_oracle.cpp).
/// Cost: with WORLD_SIZE unset or 1, or `enabled = false`, nothing (no hooks installed, no process group).
/// Example: examples/fashion_mnist (`--nproc 2`, or torchrun); docs/parallel.md.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/parallel/data_parallel_core.hpp>
#include <policytrain/parallel/environment.hpp>
#include <policytrain/parallel/metrics_reduction.hpp>
#include <policytrain/parallel/options.hpp>
#include <policytrain/parallel/process_group.hpp>
#include <policytrain/parallel/rank_state.hpp>

namespace policytrain::parallel {

/// Data-parallel training on c10d: one process per device, gradients averaged in buckets during backward.
class DataParallel {
 public:
  /// Category: parallel (at most one per Trainer).
  static constexpr Category category = Category::parallel;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "parallel::DataParallel";

  /// Run-time options (DataParallelOptions).
  using Options = DataParallelOptions;

  /// Reads the environment now (throws on a bad one); connects at on_fit_begin, or at connect().
  explicit DataParallel(Options o = {}) : core_(std::move(o), detail::GradientSync::reducer) {}

  /// The options.
  const Options& options() const { return core_.options(); }
  /// This process's rank.
  int rank() const { return core_.rank(); }
  /// Number of processes in the job.
  int world_size() const { return core_.world_size(); }
  /// Rank on this node (selects the device).
  int local_rank() const { return core_.group().environment().local_rank; }
  /// The environment read at construction.
  const Environment& environment() const { return core_.group().environment(); }
  /// Whether more than one process takes part (WORLD_SIZE > 1).
  bool active() const { return core_.active(); }
  /// Whether this is rank 0, the one that logs and writes files.
  bool is_main() const { return core_.is_main(); }

  /// Gradient buckets (known after on_fit_begin).
  size_t bucket_count() const { return core_.bucket_count(); }
  /// All-reduce calls so far.
  int64_t allreduce_calls() const { return core_.allreduce_calls(); }
  /// All-reduce calls launched from autograd hooks, while backward still ran.
  int64_t allreduce_calls_in_hooks() const { return core_.allreduce_calls_in_hooks(); }
  /// All-reduce calls of the last optimizer step.
  int64_t allreduce_calls_last_step() const { return core_.allreduce_calls_last_step(); }
  /// Seconds spent waiting for all-reduces to finish.
  double comm_wait_seconds() const { return core_.comm_wait_seconds(); }
  /// Bytes all-reduced in the last optimizer step: every bucket as it went on the wire (compressed or not).
  int64_t bucket_bytes() const { return core_.bucket_bytes(); }
  /// PyTorch's c10d::Reducer that synchronises the gradients (null before on_fit_begin, or alone).
  c10d::Reducer* reducer() const { return core_.reducer(); }
  /// Buffer broadcasts so far (broadcast_buffers).
  int64_t buffer_broadcasts() const { return core_.buffer_broadcasts(); }
  /// This rank's process group (its collectives).
  ProcessGroup& process_group() { return core_.group(); }

  /// Joins the job: the store (rank 0 hosts it, or torchrun's agent does), then the process group.
  /// Idempotent. Throws std::runtime_error naming MASTER_ADDR / MASTER_PORT when that fails.
  void connect(torch::Device device = torch::kCPU) { core_.group().connect(device); }
  /// Broadcasts `tensors` from rank 0, in place.
  void broadcast(std::vector<torch::Tensor> tensors, const std::string& what) {
    core_.group().broadcast(std::move(tensors), what);
  }
  /// Reduces `t` over the ranks with `op`, in place; `what` names the collective in errors.
  void all_reduce(torch::Tensor& t, c10d::ReduceOp op, const std::string& what) { core_.group().all_reduce(t, op, what); }

  // --- hooks (each forwards to detail::DataParallelCore, which says what it does) ---

  /// Connects, checks that every rank has the same parameters (c10d::verify_params_across_processes, as DDP),
  /// broadcasts rank 0's parameters and buffers (c10d::broadcast_coalesced), and builds the c10d::Reducer.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) { core_.fit_begin(ctx.module(), ctx.device()); }
  /// At the first epoch of a fit: the start check (RankState::verify_start), after the Reducer was rebuilt if a
  /// later policy's on_fit_begin changed the parameters' layout.
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    core_.group().at(ctx.state(), "the start of an epoch");
    core_.epoch_begin(ctx.module(), ctx.state(), ctx.device());
  }
  /// On every rank before a checkpoint is written (a collective): every rank's random generator states.
  template <class Ctx>
  void before_save(Ctx& ctx) {
    core_.group().at(ctx.state(), "a checkpoint");
    core_.note_save(ctx.state());
    core_.before_save(ctx.device(), ctx.module().is_training());
  }
  /// A fit that had no epoch left to run still takes part in the start check (the other ranks may have).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    core_.group().at(ctx.state(), "the end of fit");
    core_.fit_end(ctx.module(), ctx.state());
  }
  /// Rank 0's buffers before a window's first forward; the Reducer's bucket rebuild.
  template <class Ctx, class F>
  decltype(auto) around_forward(Ctx& ctx, F&& fn) {
    core_.group().at(ctx.state());
    return core_.forward(ctx.module(), ctx.state().micro_step, std::forward<F>(fn));
  }
  /// Rank 0's buffers (and, before the first fit, parameters) before an evaluation.
  template <class Ctx, class F>
  Metrics around_evaluate(Ctx& ctx, F&& evaluate) {
    core_.group().at(ctx.state(), "validation");
    return core_.evaluate(ctx.module(), ctx.device(), std::forward<F>(evaluate));
  }
  /// The backward: synchronised by the Reducer on a window's last micro-step, accumulated on the others.
  template <class Ctx, class F>
  void around_backward(Ctx& ctx, F&& fn) { core_.backward(ctx.is_last_micro_step(), std::forward<F>(fn)); }
  /// Checks that the Reducer finished this window's reduction, or averages a window that had none.
  template <class Ctx>
  void before_step(Ctx&) { core_.before_step(); }

  /// The world size, saved in checkpoints so that a resume with another one is recognised, with the ranks'
  /// generator states when a checkpoint gathered them (before_save) and the Reducer's bucket order.
  StateDict state_dict() const { return core_.state_dict(); }
  /// Restores what state_dict() saved.
  void load_state_dict(const StateDict& d) { core_.load_state_dict(d); }
  /// After loading a mid-epoch checkpoint of another world size: the samples of that epoch's global order it had
  /// trained (the Trainer re-shards the rest with the loader's reshard_after; docs/parallel.md, "Elastic restarts").
  std::optional<int64_t> elastic_resume_samples() const { return core_.elastic_resume_samples(); }
  /// The Trainer re-sharded the resumed epoch: the start check lets the other world size pass.
  void resharded() { core_.resharded(); }

  // --- the parallel services (core/parallel_services.hpp); is_main() and world_size() are above ---

  /// True on every rank when `b` is true on any rank (a collective; joins the job first if needed).
  template <class Ctx>
  bool agree_any(Ctx& ctx, bool b) {
    core_.group().at(ctx.state(), "an agreement (stop / save / rollback)");
    return core_.agree_any(ctx.device(), b);
  }
  /// The smallest `v` over the ranks (identity on one process; a collective). fit_auto_batch agrees on the
  /// micro-batch with it.
  template <class Ctx>
  int64_t agree_min(Ctx& ctx, int64_t v) { return core_.agree_min(ctx.device(), v); }
  /// DataParallel never shards the gradients: every rank holds them all, averaged.
  bool gradients_sharded() const { return false; }
  /// Nothing to reduce: every rank holds every gradient (gradients_sharded() is false).
  template <class Ctx>
  void reduce_gradient_statistic(Ctx&, torch::Tensor&, GradientReduce) {}
  /// Sums the loss, sample count, confusion matrix and the task's own metrics of an evaluation over the ranks
  /// (parallel::reduce_metrics). Every rank must report the same metric names.
  template <class Ctx>
  void reduce_metrics(Ctx& ctx, MetricsAccumulator& acc) { core_.reduce_metrics(ctx.device(), acc); }
  /// Reduces the states of the task's epoch-level metrics over the ranks (parallel::reduce_metric_states).
  template <class Ctx>
  void reduce_metric_states(Ctx& ctx, const std::vector<MetricState*>& states) {
    core_.reduce_metric_states(ctx.device(), states);
  }

 private:
  detail::DataParallelCore core_;
};

}  // namespace policytrain::parallel
