#pragma once
/// \file
/// parallel::ShardedDataParallel — data parallelism whose optimizer state (stage 1, ZeRO-1, as PyTorch's
/// torch.distributed.optim.ZeroRedundancyOptimizer) and gradients (stage 2, ZeRO-2) are sharded across the ranks:
/// each rank keeps and steps the optimizer state of its partition of the parameters only, and after the step
/// every owner broadcasts its updated parameters.
///
/// Stage 0: nothing is sharded; the policy behaves as DataParallel (one Trainer type for a stage chosen at run
/// time: ShardingOptions{.stage = 0, 1 or 2}).
/// Stage 1: everything DataParallel does stays as it is (the same c10d process group, the same c10d::Reducer,
/// buckets overlapped with backward, no_sync under accumulation, static_graph, find_unused_parameters, buffers, the
/// start check, the agreement helpers): the gradients are still averaged over all ranks, so every rank holds the
/// whole averaged gradient, and everything that reads gradients before the step sees what it sees under
/// DataParallel. Stage 2: no Reducer; each gradient bucket is reduce-scattered into its owners' partitions during
/// the backward (detail::Zero2Sync), so after the backward a rank holds its own partition's gradients only, and
/// the statistics over every gradient (GradClip's total norm, the loss scaler's inf check) are reduced over the
/// ranks through Context::reduce_gradient_statistic (gradients_sharded() tells them).
/// Both: around_step lets the optimizer see the parameters this rank owns (each param group's list is swapped
/// for the owned part for the duration of the step, so any torch::optim optimizer and the fused ones create and
/// update state for those only), then the owners broadcast (c10d::broadcast_coalesced, one per owning rank).
///
/// Partition: ZeroRedundancyOptimizer's greedy rule, per param group in order: the group's parameters sorted by
/// size (largest first, ties in the group's order), each given to the rank with the smallest total so far (the
/// totals carry over from group to group). A rank may own no parameter of a group. Same rule as Python, so the
/// oracle compares each rank's shard too. ShardingOptions::partition = dim0 chunks every parameter on dim 0
/// instead (OptimizerPartition's dim-0 partition, FSDP2's layout): each rank keeps the state of its rows of every
/// parameter, about total / N; the updated chunks are all-gathered rather than broadcast, and at stage 2 every
/// gradient is reduce-scattered into the ranks' chunks (a parameter's .grad is then its chunk: gradients_split()).
///
/// Checkpoints: before_save gathers every rank's state on rank 0 (each rank's Optimizer::save archive, sent with
/// c10d send/recv, loaded into rank 0's optimizer, which then holds the consolidated state as Python's
/// consolidate_state_dict does), so the checkpoint has the whole optimizer state, in the format of an unsharded
/// run; after_save lets rank 0 drop the other ranks' part again. A resume loads the whole state on every rank;
/// each keeps its partition at the first step. A sharded checkpoint (checkpoint::Disk::Options::sharded) sets
/// set_sharded_save around its save: nothing is gathered, each rank writes its own partition, and a resume
/// loads only the state of the parameters this rank owns (owner(), known at fit begin, before the checkpoint's).
///
/// Composition: detail::DataParallelCore (what DataParallel does, data_parallel_core.hpp), parallel::OptimizerPartition
/// (optimizer_partition.hpp) and, at stage 2, detail::Zero2Sync (zero2_sync.hpp) in place of the core's Reducer;
/// it does not inherit DataParallel.
/// Hooks (beyond DataParallel's, which it has too): on_fit_begin (partition; stage 2: buckets and gradient hooks), on_epoch_begin
/// (after a resume: the other partitions' state dropped), around_backward and before_step (stage 2: the
/// reduce-scatter), around_step (sharded step + broadcast), before_save / after_save (consolidation), on_fit_end
/// (state bytes); and the Trainer's gradients_sharded / reduce_gradient_statistic.
/// Cost: with one process, nothing beyond DataParallel's (the step is not swapped, no hook is installed).
/// Stage 3 (FSDP2's fully sharded parameters): every parameter is chunked on dim 0 across the ranks
/// (parallel::Dim0Chunk) and gathered per unit, a module the user wraps in parallel::FullyShard<M>, just before its
/// compute and freed after; gradients leave a unit reduce-scattered into the shards' `.grad`; the optimizer's param
/// groups list the shards in place of the module's parameters from fit begin on (detail::FullShard), so it only
/// ever creates state for and steps shards. No Reducer, no partition, no broadcast after the step. At fit end every
/// rank gathers the whole model again (the module is whole after fit, as one process's). See fully_shard.hpp.
/// Activation recompute composes: a unit inside a recomputed segment gathers again for the recomputed forward, and
/// reduce-scatters once the segment's backward reached its input. callbacks::Ema averages each rank's shards (its
/// rows of every parameter) through shard(), shards_changed(), reshard(), gather_rows() and on_unsharded().
/// ShardingOptions::mp_policy: mixed precision of the gathered parameters, as
/// FSDP2's MixedPrecisionPolicy (shard_group.hpp).
/// Stage 3's checkpoints: consolidated (before_save gathers the whole model and state: fully_sharded.hpp), or sharded
/// (set_sharded_save): nothing is gathered; every rank writes its rows of every parameter (parameter_shards) and
/// of their optimizer state (owner() is this rank for every shard), the manifest records the layout
/// (checkpoint/sharded.hpp), and a resume at any world size loads the whole tensors before the shards take their rows.
/// Exports (export_weights, export_bytes: checkpoint::Disk's final.pt, before fit end gathers the model, and best.pt)
/// gather each parameter onto rank 0 alone (gather_to_main), never the whole model on a rank.
/// Example: examples/fashion_mnist (`--nproc 2 --zero 1`, `--zero 2`, `--zero 3`); docs/parallel.md, "Sharded
/// optimizer state" and "Fully sharded parameters (stage 3)".
#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/checkpoint/export.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/data_parallel.hpp>
#include <policytrain/parallel/data_parallel_core.hpp>
#include <policytrain/parallel/fully_sharded.hpp>
#include <policytrain/parallel/optimizer_partition.hpp>
#include <policytrain/parallel/options.hpp>
#include <policytrain/parallel/shard_group.hpp>
#include <policytrain/parallel/zero2_sync.hpp>

namespace policytrain::parallel {

/// Data parallelism with the optimizer state (stage 1) and the gradients (stage 2) sharded across the ranks; see
/// the file comment.
class ShardedDataParallel {
 public:
  /// Category: parallel (at most one per Trainer).
  static constexpr Category category = Category::parallel;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "parallel::ShardedDataParallel";

  /// Reads the environment now (as DataParallel). Throws std::invalid_argument for a stage other than 0 to 3.
  explicit ShardedDataParallel(DataParallelOptions o = {}, ShardingOptions z = {})
      : core_(std::move(o), z.stage >= 2 ? detail::GradientSync::owner : detail::GradientSync::reducer),
        z_(z),
        partition_(core_.rank(), core_.active() && (z.stage == 1 || z.stage == 2), z.partition) {
    if (z_.stage < 0 || z_.stage > 3)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::parallel::ShardedDataParallel", policytrain::detail::format(
              "stage {} is not supported; expected 0 (nothing sharded: "
          "DataParallel's behaviour), 1 (optimizer state sharded, gradients all-reduced), 2 (optimizer state and "
          "gradients sharded) or 3 (parameters too, gathered per parallel::FullyShard unit)", z_.stage)));
    if (z_.stage != 3 && (z_.mp_policy.param_dtype || z_.mp_policy.reduce_dtype))
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::parallel::ShardedDataParallel",
          policytrain::detail::format("stage {} with ShardingOptions::mp_policy set: mixed precision of gathered "
                                      "parameters is stage 3's", z_.stage),
          {}, "use stage 3, or precision::Autocast for mixed precision at this stage"));
    check_mp_dtype("param_dtype", z_.mp_policy.param_dtype);
    check_mp_dtype("reduce_dtype", z_.mp_policy.reduce_dtype);
    if (z_.stage >= 2) {
      // These options configure c10d::Reducer, which stages 2 and 3 replace by their own reduce-scatter.
      const auto refuse = [stage = z_.stage](const char* option, const char* why) {
        throw std::invalid_argument(policytrain::detail::error_message(
            "policytrain::parallel::ShardedDataParallel", policytrain::detail::format(
                "stage {} does not support DataParallelOptions::{}: {}; "
            "use stage 1 for it", stage, option, why)));
      };
      const auto& o_ = core_.options();
      if (o_.find_unused_parameters)
        refuse("find_unused_parameters", "every parameter must get a gradient on every rank in every step");
      if (o_.static_graph) refuse("static_graph", "a Reducer option; stage 2 reduce-scatters without one");
      if (o_.gradient_as_bucket_view)
        refuse("gradient_as_bucket_view", "stage 2's gradients are already views of what each owner received");
      if (o_.compression != "none")
        refuse("compression", "the gradients are reduce-scattered in their own dtype");
    }
  }

  /// The options (DataParallelOptions) and the sharding options.
  ///@{
  const DataParallelOptions& options() const { return core_.options(); }
  const ShardingOptions& sharding() const { return z_; }
  ///@}
  /// Where this process stands, as DataParallel's accessors of the same names.
  ///@{
  int rank() const { return core_.rank(); }
  int world_size() const { return core_.world_size(); }
  int local_rank() const { return core_.group().environment().local_rank; }
  const Environment& environment() const { return core_.group().environment(); }
  bool active() const { return core_.active(); }
  bool is_main() const { return core_.is_main(); }
  ///@}
  /// The gradient synchronisation's counters, as DataParallel's accessors of the same names (at stage 2 the
  /// Reducer's are 0 or null; reduce_scatter_calls and gradient_buckets count stage 2's).
  ///@{
  size_t bucket_count() const { return core_.bucket_count(); }
  int64_t allreduce_calls() const { return core_.allreduce_calls(); }
  int64_t allreduce_calls_in_hooks() const { return core_.allreduce_calls_in_hooks(); }
  int64_t allreduce_calls_last_step() const { return core_.allreduce_calls_last_step(); }
  double comm_wait_seconds() const { return core_.comm_wait_seconds(); }
  int64_t bucket_bytes() const { return core_.bucket_bytes(); }
  c10d::Reducer* reducer() const { return core_.reducer(); }
  int64_t buffer_broadcasts() const { return core_.buffer_broadcasts(); }
  ///@}
  /// This rank's process group (its collectives).
  ProcessGroup& process_group() { return core_.group(); }
  /// Joins the job (as DataParallel::connect).
  void connect(torch::Device device = torch::kCPU) { core_.group().connect(device); }
  /// Broadcasts `tensors` from rank 0, in place.
  void broadcast(std::vector<torch::Tensor> tensors, const std::string& what) {
    core_.group().broadcast(std::move(tensors), what);
  }
  /// Reduces `t` over the ranks with `op`, in place; `what` names the collective in errors.
  void all_reduce(torch::Tensor& t, c10d::ReduceOp op, const std::string& what) { core_.group().all_reduce(t, op, what); }

  /// The rank that owns (keeps the optimizer state of, and steps) `p`; -1 for a tensor in no param group. Stage 3:
  /// this rank for a shard the optimizer steps (every rank keeps the state of its rows of every parameter).
  int owner(const torch::Tensor& p) const {
    if (shard_impls_.count(p.unsafeGetTensorImpl())) return rank();
    return partition_.owner(p);
  }
  /// Under ShardingOptions::partition = dim0: this rank's dim-0 chunk of `p` (its rows, and the tensor the
  /// optimizer steps); null for a tensor in no param group, one process, or the greedy partition.
  const ParamChunk* chunk(const torch::Tensor& p) const { return partition_.chunk(p); }
  /// The parameters rank `r` owns, group by group, in each group's order (known after on_fit_begin; under the
  /// dim-0 partition every rank keeps a chunk of every parameter).
  const std::vector<torch::Tensor>& partition(int r) const { return partition_.partition(r); }
  /// Bytes of optimizer state this rank keeps for the parameters it owns.
  template <class Optimizer>
  int64_t state_bytes(const Optimizer& opt) const { return partition_.state_bytes(opt); }

  /// Stage 2: gradient bytes this rank held after the last synchronised backward (its partition's), and the most
  /// after any; stage 1 and one process: 0.
  int64_t gradient_bytes() const { return z2_ ? z2_->grad_bytes : 0; }
  /// Stage 2: the most gradient bytes this rank held after a backward.
  int64_t gradient_bytes_peak() const { return z2_ ? z2_->grad_bytes_peak : 0; }
  /// Stage 2: reduce-scatter calls so far (one per gradient bucket and step), and buckets. Stage 3: one per unit
  /// (and the root) and step.
  int64_t reduce_scatter_calls() const {
    if (full_.built()) {
      int64_t n = full_.root()->reduce_scatters();
      for (const auto& g : full_.units()) n += g->reduce_scatters();
      return n;
    }
    return z2_ ? z2_->calls : 0;
  }
  /// Stage 3: all-gathers so far (a unit's forward, its backward when it was freed, the root's forwards).
  int64_t all_gather_calls() const {
    if (!full_.built()) return 0;
    int64_t n = full_.root()->all_gathers();
    for (const auto& g : full_.units()) n += g->all_gathers();
    return n;
  }
  /// Stage 3: the all-gathers issued a unit ahead (ShardingOptions::prefetch), counted in all_gather_calls too.
  int64_t prefetch_calls() const {
    int64_t n = 0;
    for (const auto& g : full_.units()) n += g->prefetches();
    return n;
  }
  /// Stage 3: the shard the optimizer steps in place of the model's parameter `full` (undefined at other stages,
  /// with one process, or before fit begin).
  torch::Tensor shard(const torch::Tensor& full) const { return full_.built() ? full_.shard_of(full) : torch::Tensor(); }
  /// Stage 3: the shards changed outside the optimizer's step (callbacks::Ema swapped its average in): every group
  /// that is gathered now gathers again from them; the freed ones gather when used. A collective: every rank calls
  /// it at the same point.
  void shards_changed() {
    if (full_.built() && full_.attached()) full_.regather();
  }
  /// Stage 3: frees every gathered group, so that the next use gathers the shards' current values (local).
  void reshard() {
    if (full_.built() && full_.attached()) full_.reshard_all();
  }
  /// Stage 3: all-gathers `rows`, this rank's dim-0 rows of the model's parameter `full` (a tensor of its shard's
  /// shape: an average of the shard), into `full`'s shape. A collective: every rank calls it for the same parameter.
  /// Throws std::invalid_argument for a tensor that is no sharded parameter.
  torch::Tensor gather_rows(const torch::Tensor& full, const torch::Tensor& rows) { return full_.gather_like(full, rows); }
  /// Stage 3: `f` runs on every rank at fit end once the module is whole again, before the policies after this one
  /// end the fit (a point where every rank may call a collective): a policy that keeps tensors in the shards'
  /// layout (callbacks::Ema's average) gathers them there. Every fit begin forgets the earlier fit's.
  void on_unsharded(std::function<void()> f) { unsharded_.push_back(std::move(f)); }
  /// Stage 3: `f` runs on every rank at fit end before the module is gathered whole (the shards still hold the
  /// weights, and every rank may call a collective): checkpoint::Disk exports final.pt from them there
  /// (gather_to_main), so that the export never needs the whole model on every rank. Every fit begin forgets the
  /// earlier fit's.
  void before_unshard(std::function<void()> f) { before_unshard_.push_back(std::move(f)); }
  /// Whether a sharded checkpoint's save is under way (set_sharded_save): callbacks::Ema then writes its rows.
  bool sharded_save() const { return sharded_save_; }
  /// Stage 3: bytes of the parameter shards this rank keeps.
  int64_t shard_bytes() const { return full_.shard_bytes(); }

  /// One parameter's rows on this rank (stage 3), for a sharded checkpoint (checkpoint::Disk::Options::sharded).
  struct ParameterShard {
    std::string name;            ///< the parameter's name in the model
    torch::Tensor rows;          ///< this rank's rows (parallel::Dim0Chunk, padding stripped; may have none)
    std::vector<int64_t> shape;  ///< the whole parameter's shape
    int64_t chunk = 0;           ///< rows per rank before clipping: ceil(shape[0] / world size)
  };
  /// Stage 3 once the optimizer steps shards: this rank's rows of every parameter, the units' in the model's order
  /// then the root's; empty otherwise (the model holds its parameters whole).
  std::vector<ParameterShard> parameter_shards() const {
    std::vector<ParameterShard> out;
    if (!full_.built() || shard_impls_.empty()) return out;
    auto groups = full_.units();
    groups.push_back(full_.root());
    for (const auto& g : groups)
      for (const auto& p : g->params()) out.push_back({p.name, p.shard.detach(), p.full.sizes().vec(), p.layout.chunk});
    return out;
  }
  /// Writes the model's weights (its parameters and buffers, as checkpoint::export_weights names them) to `file` on
  /// rank 0; a collective: every rank calls it. Stage 3 gathers them onto rank 0 only (gather_to_main): each
  /// parameter's whole values exist on rank 0 while its record is written (checkpoint::StreamedExport, in the
  /// module's order, so the file has export_weights' bytes), then are freed; the other ranks send their rows and
  /// receive nothing. Other stages, and one process: checkpoint::export_weights on rank 0. Throws CheckpointError
  /// naming the file (rank 0, once every rank is past the last gather).
  void export_weights(const torch::nn::Module& m, const std::filesystem::path& file) {
    if (!full_.built()) {
      export_bytes_now_ = export_bytes_peak_ = 0;
      if (is_main()) checkpoint::export_weights(m, file);
      return;
    }
    std::unique_ptr<checkpoint::StreamedExport> out;
    streamed_export(m, [&](const auto& named) { out = std::make_unique<checkpoint::StreamedExport>(file, named); },
                    [&](size_t i, const torch::Tensor& t) { out->write(i, t); }, [&] { out->finish(); });
  }
  /// export_weights' bytes, on rank 0 (empty elsewhere): what checkpoint::Disk stages as best.pt at stage 3, gathered
  /// as export_weights gathers. `each(i, name, values)`, when given, sees every tensor on rank 0 as it is written
  /// (the evaluated weights a best checkpoint keeps). A collective. Throws CheckpointError (rank 0).
  std::string export_bytes(const torch::nn::Module& m,
                           const std::function<void(size_t, const std::string&, const torch::Tensor&)>& each = {}) {
    std::string bytes;
    std::unique_ptr<checkpoint::StreamedExport> out;
    std::vector<std::string> names;
    streamed_export(m, [&](const auto& named) {
      out = std::make_unique<checkpoint::StreamedExport>(bytes, named);
      for (const auto& [k, v] : named) names.push_back(k);
    }, [&](size_t i, const torch::Tensor& t) {
      out->write(i, t);
      if (each) each(i, names[i], t);
    }, [&] { out->finish(); });
    return bytes;
  }
  /// Calls `f(i, values)` on rank 0 for each tensor of checkpoint::detail::named_tensors(m) in that order (its
  /// parameters, then its buffers): at stage 3 each sharded parameter is gathered from the shards (the tensors the
  /// optimizer steps) onto rank 0 alone (c10d gather), passed to `f`, then freed, so that no rank holds more than one
  /// parameter's gathered values at once; the buffers and what no group holds come from the module. Other stages,
  /// and one process: the module's tensors on rank 0. A collective: every rank calls it, in the same order.
  void gather_to_main(const torch::nn::Module& m, const std::function<void(size_t, const torch::Tensor&)>& f) {
    const auto named = checkpoint::detail::named_tensors(m);
    export_bytes_now_ = export_bytes_peak_ = 0;
    const int64_t world = world_size();
    for (size_t i = 0; i < named.size(); ++i) {
      const auto* p = full_.built() ? full_.param_of(named[i].second) : nullptr;
      if (!p) {
        if (is_main()) f(i, named[i].second);
        continue;
      }
      torch::NoGradGuard ng;
      // Rank r's padded piece lands at r * piece of one buffer: the first numel elements are the parameter, whole.
      const int64_t piece = p->piece_numel();
      std::vector<at::Tensor> in{torch::zeros({piece}, p->shard.options().requires_grad(false))};
      if (p->shard.numel() > 0) in[0].narrow(0, 0, p->shard.numel()).copy_(p->shard.detach().reshape({-1}));
      std::vector<std::vector<at::Tensor>> outs;
      torch::Tensor whole;
      if (is_main()) {
        whole = torch::empty({piece * world}, in[0].options());
        outs.emplace_back();
        for (int64_t r = 0; r < world; ++r) outs[0].push_back(whole.narrow(0, r * piece, piece));
        export_bytes_now_ += whole.numel() * static_cast<int64_t>(whole.element_size());
        export_bytes_peak_ = std::max(export_bytes_peak_, export_bytes_now_);
        detail::GatheredBytes::add(whole.numel() * static_cast<int64_t>(whole.element_size()));
      }
      c10d::GatherOptions o;
      o.rootRank = 0;
      core_.group().require_connected("gather of a parameter onto rank 0");
      core_.group().wait(core_.group().backend()->gather(outs, in, o),
                         policytrain::detail::format("gather of parameter '{}' onto rank 0", p->name));
      if (whole.defined()) {
        struct Freed {  // also when `f` throws
          ShardedDataParallel& s;
          int64_t n;
          ~Freed() {
            s.export_bytes_now_ -= n;
            detail::GatheredBytes::add(-n);
          }
        } freed{*this, whole.numel() * static_cast<int64_t>(whole.element_size())};
        f(i, whole.narrow(0, 0, p->full.numel()).view(p->full.sizes()));
      }
    }
  }
  /// The most bytes of gathered parameters this rank held at once during the last gather_to_main (an export; 0 on
  /// the ranks other than 0, and without stage 3): the bound the tests check against the largest unit. They count in
  /// detail::GatheredBytes too.
  int64_t export_gathered_bytes_peak() const { return export_bytes_peak_; }

  /// Stage 2: gradient buckets (0 before on_fit_begin).
  size_t gradient_buckets() const { return z2_ ? z2_->buckets.size() : 0; }

  /// This rank's optimizer state bytes when fit last ended (0 before).
  int64_t optimizer_state_bytes() const { return bytes_; }
  /// The sum over every rank (equal on every rank).
  int64_t optimizer_state_bytes_total() const { return bytes_total_; }
  /// The largest state any one parameter has (equal on every rank): the bound on the imbalance of a partition.
  int64_t optimizer_state_bytes_largest() const { return bytes_largest_; }

  // --- hooks ---

  /// DataParallel's fit begin (connect, verify, broadcast, the Reducer), then the partition of the optimizer's
  /// parameters.
  /// Every fit re-reads the optimizer (DESIGN §7): a param group added since the last fit is partitioned, and at
  /// stage 2 the owner table and buckets are rebuilt when the trainable parameters or their owners changed.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    before_unshard_.clear();
    core_.fit_begin(ctx.module(), ctx.device());
    if (z_.stage == 0) return;
    if (z_.stage == 3) {
      if (!active()) return;
      // The optimizer's lists take the shards at the first epoch begin, after a resume loaded the checkpoint.
      full_.set_prefetch(z_.prefetch);
      unsharded_.clear();
      if (!full_.built()) full_.build(ctx.module(), core_.group());
      else full_.attach(true);
      full_.set_mixed_precision(z_.mp_policy);
      swapped_ = false;
      return;
    }
    partition_.assign(ctx.optimizer(), world_size());
    if (z_.stage == 2 && active()) sync_zero2();
  }

  /// Stage 3, once per fit, before the shards are first used: the shards take the module's weights (a resumed
  /// checkpoint's, in an unsharded run's format, or what the user set between two fits), and the optimizer's lists
  /// the shards with their rows of the state it holds. The first epoch's begin does it, or what comes before it: an
  /// evaluation, a save, or the fit's end of a fit that begins no epoch (a finished run resumed, max_steps reached),
  /// whose export and gathered model would otherwise be the shards' values from before the resume. Until then the
  /// units are not freed, so the module holds the weights it was given. Local (no collective).
  template <class Ctx>
  void take_module_weights(Ctx& ctx) {
    if (!full_.built() || !full_.attached() || std::exchange(swapped_, true)) return;
    full_.refresh();
    full_.swap_into(ctx.optimizer());
    shard_impls_.clear();
    for (const auto& s : parameter_shards_of_groups()) shard_impls_.insert(s);
  }

  /// DataParallel's start check at the first epoch; after a resume (the checkpoint policy's on_fit_begin loaded the
  /// whole state on every rank) each rank lets the other partitions' state go.
  /// First, once per fit, what DataParallel re-reads there (a layout converted by a policy after this one at fit
  /// begin), and stage 2's buckets with it.
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    take_module_weights(ctx);
    if (!core_.verified() && partition_.enabled()) {
      core_.sync_parameters(ctx.module());
      if (z_.stage == 2) sync_zero2();
    }
    core_.epoch_begin(ctx.module(), ctx.state(), ctx.device());
    if (partition_.enabled()) partition_.drop_foreign_state(ctx.optimizer());
  }

  /// As DataParallel's.
  template <class Ctx, class F>
  decltype(auto) around_forward(Ctx& ctx, F&& fn) {
    core_.group().at(ctx.state());
    if (!full_.built()) return core_.forward(ctx.module(), ctx.state().micro_step, std::forward<F>(fn));
    // Stage 3: the root's parameters gathered first (the units gather theirs in their forward).
    const bool training = ctx.module().is_training() && torch::GradMode::is_enabled();
    return core_.forward(ctx.module(), ctx.state().micro_step, [&]() -> decltype(auto) {
      full_.begin_forward(training);
      return fn();
    });
  }
  /// As DataParallel's; stage 3 gathers the root's parameters first.
  template <class Ctx, class F>
  Metrics around_evaluate(Ctx& ctx, F&& evaluate) {
    core_.group().at(ctx.state(), "validation");
    if (!full_.built()) return core_.evaluate(ctx.module(), ctx.device(), std::forward<F>(evaluate));
    take_module_weights(ctx);
    return core_.evaluate(ctx.module(), ctx.device(), [&] {
      full_.begin_forward(false);
      return evaluate();
    });
  }

  /// Stage 2: on a window's last micro-step the gradients are reduce-scattered as their buckets complete, during
  /// the backward (detail::Zero2Sync::backward). Stages 0 and 1: DataParallel's (the Reducer).
  template <class Ctx, class F>
  void around_backward(Ctx& ctx, F&& fn) {
    if (full_.built()) {
      // Stage 3: each unit reduces in its input's gradient hook; the end of the backward does the rest (a unit whose
      // input needs no gradient, the root). Between micro-steps the gradients stay whole (FSDP2's
      // set_requires_gradient_sync(False)).
      full_.set_sync(ctx.is_last_micro_step());
      fn();
      full_.end_backward();
      return;
    }
    if (!z2_) return core_.backward(ctx.is_last_micro_step(), std::forward<F>(fn));
    z2_->backward(ctx.is_last_micro_step(), std::forward<F>(fn));
  }

  /// Stage 2: reduces a window that had no synchronised backward; counts the step. Stages 0 and 1: DataParallel's.
  template <class Ctx>
  void before_step(Ctx&) {
    if (!z2_) return core_.before_step();
    z2_->before_step();
  }

  /// Steps the optimizer over this rank's partition, then broadcasts every partition from its owner
  /// (OptimizerPartition::step).
  template <class Ctx, class F>
  bool around_step(Ctx& ctx, F&& fn) {
    if (full_.built()) {
      // Stage 3: the optimizer steps the shards; the gathered copies are stale now.
      const bool stepped = fn();
      full_.reshard_all();
      return stepped;
    }
    if (!partition_.enabled()) return fn();
    return partition_.step(core_.group(), ctx.optimizer(), core_.replica()->step, std::forward<F>(fn));
  }

  /// On every rank before a checkpoint serialises the optimizer: the ranks' generator states (as DataParallel),
  /// then rank 0 receives every other rank's optimizer state (OptimizerPartition::consolidate).
  template <class Ctx>
  void before_save(Ctx& ctx) {
    core_.group().at(ctx.state(), "a checkpoint");
    core_.note_save(ctx.state());
    core_.before_save(ctx.device(), ctx.module().is_training());
    take_module_weights(ctx);
    // Stage 3: a consolidated save gathers the whole model and state, as an unsharded run's checkpoint; a sharded one
    // gathers nothing (each rank writes its rows of every parameter and of its state: parameter_shards, owner).
    if (full_.built() && full_.attached() && !sharded_save_) {
      full_.consolidate(ctx.optimizer());
      consolidated_ = true;
    }
    if (partition_.enabled() && !sharded_save_) partition_.consolidate(core_.group(), ctx.optimizer());
  }

  /// Set by a sharded checkpoint around its save (checkpoint::Disk::Options::sharded): before_save gathers no
  /// optimizer state, since each rank writes its own partition.
  void set_sharded_save(bool on) { sharded_save_ = on; }

  /// After the checkpoint serialised the optimizer: rank 0 lets the other ranks' state go.
  template <class Ctx>
  void after_save(Ctx& ctx) {
    if (std::exchange(consolidated_, false)) full_.restore(ctx.optimizer());
    if (partition_.enabled()) partition_.release_consolidated(ctx.optimizer());
  }

  /// DataParallel's on_fit_end, then this rank's and every rank's optimizer state bytes (a collective).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    if (full_.built()) {
      take_module_weights(ctx);  // a fit with no step left (a finished run resumed) began no epoch
      for (auto& f : std::exchange(before_unshard_, {})) f();
      // Stage 3: the module whole again on every rank, its units plain modules until the next fit (an evaluation
      // after fit, params_sha256 and the user's code see a plain model; the exports do not need it: before_unshard).
      full_.unshard_all();
      full_.attach(false);
      for (auto& f : std::exchange(unsharded_, {})) f();
    }
    core_.fit_end(ctx.module(), ctx.state());
    bytes_ = state_bytes(ctx.optimizer());
    int64_t largest = 0;
    for (const auto& [key, st] : ctx.optimizer().state()) largest = std::max(largest, parallel::param_state_bytes(*st));
    auto t = torch::tensor({bytes_, largest}, torch::kLong);
    if (active()) {
      auto sum = t.slice(0, 0, 1).clone(), mx = t.slice(0, 1, 2).clone();
      all_reduce(sum, c10d::ReduceOp::SUM, "sum of the ranks' optimizer state bytes");
      all_reduce(mx, c10d::ReduceOp::MAX, "largest optimizer state of one parameter");
      bytes_total_ = sum.item<int64_t>();
      bytes_largest_ = mx.item<int64_t>();
    } else {
      bytes_total_ = bytes_;
      bytes_largest_ = largest;
    }
  }

  /// As DataParallel's (world size, the ranks' generator states, the Reducer's bucket order).
  StateDict state_dict() const { return core_.state_dict(); }
  /// As DataParallel's.
  void load_state_dict(const StateDict& d) { core_.load_state_dict(d); }

  // --- the parallel services (core/parallel_services.hpp); is_main() and world_size() are above ---

  /// As DataParallel's (an elastic resume mid-epoch; the optimizer state is re-partitioned as at an epoch end).
  std::optional<int64_t> elastic_resume_samples() const { return core_.elastic_resume_samples(); }
  /// As DataParallel's.
  void resharded() { core_.resharded(); }
  /// As DataParallel's.
  template <class Ctx>
  bool agree_any(Ctx& ctx, bool b) {
    core_.group().at(ctx.state(), "an agreement (stop / save / rollback)");
    return core_.agree_any(ctx.device(), b);
  }
  /// As DataParallel's.
  template <class Ctx>
  int64_t agree_min(Ctx& ctx, int64_t v) { return core_.agree_min(ctx.device(), v); }
  /// Whether each rank keeps only its own partition's gradients after the backward (stage 2, more than one rank):
  /// the Trainer's gradient statistics (GradClip's total norm, the loss scaler's inf check) are then reduced.
  bool gradients_sharded() const { return z_.stage >= 2 && active(); }
  /// Stage 3 during a fit: the optimizer steps shards (Context::parameters_sharded: GradClip clips them).
  bool parameters_sharded() const { return full_.built() && full_.attached(); }
  /// Whether a parameter's gradient is split over the ranks (stage 2 with the dim-0 partition): each rank holds
  /// its dim-0 rows of every gradient, so a per-parameter statistic (a norm) is itself a reduction over the ranks.
  bool gradients_split() const { return z_.stage == 2 && active() && partition_.dim0(); }
  /// Reduces a statistic of this rank's gradients over every rank, in place (a collective), when gradients are
  /// sharded; otherwise leaves it.
  template <class Ctx>
  void reduce_gradient_statistic(Ctx&, torch::Tensor& t, GradientReduce op) {
    if (!gradients_sharded()) return;
    all_reduce(t, op == GradientReduce::max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM,
               "reduction of a gradient statistic over the shards (total norm, inf check)");
  }
  /// As DataParallel's.
  template <class Ctx>
  void reduce_metrics(Ctx& ctx, MetricsAccumulator& acc) { core_.reduce_metrics(ctx.device(), acc); }
  /// As DataParallel's.
  template <class Ctx>
  void reduce_metric_states(Ctx& ctx, const std::vector<MetricState*>& states) {
    core_.reduce_metric_states(ctx.device(), states);
  }

 private:
  /// An export through gather_to_main: rank 0 calls `open(named tensors)`, `write(i, values)` for each, then
  /// `finish()`. A failure of rank 0's writes (a full disk) does not leave the gathers: the other ranks would wait in
  /// the next one; rank 0 stops writing, joins every gather, then rethrows it.
  template <class Open, class Write, class Finish>
  void streamed_export(const torch::nn::Module& m, Open&& open, Write&& write, Finish&& finish) {
    std::exception_ptr failure;
    const auto attempt = [&](auto&& f) {
      if (failure) return;
      try {
        f();
      } catch (...) {
        failure = std::current_exception();
      }
    };
    if (is_main()) attempt([&] {
      // A sharded parameter is written in its shard's dtype (the fp32 master's values, whatever dtype the module's
      // tensor computes in under mp_policy): its place in the layout is a meta tensor of that dtype and its shape.
      auto named = checkpoint::detail::named_tensors(m);
      for (auto& [k, v] : named)
        if (const auto* p = full_.built() ? full_.param_of(v) : nullptr)
          v = torch::empty(v.sizes(), torch::TensorOptions().dtype(p->shard.scalar_type()).device(torch::kMeta));
      open(named);
    });
    gather_to_main(m, [&](size_t i, const torch::Tensor& t) { attempt([&] { write(i, t); }); });
    if (is_main()) attempt([&] { finish(); });
    if (failure) std::rethrow_exception(failure);
  }

  /// A mixed-precision dtype must be a floating-point one of the three that training uses.
  static void check_mp_dtype(const char* field, const std::optional<c10::ScalarType>& t) {
    if (!t || *t == c10::ScalarType::Float || *t == c10::ScalarType::BFloat16 || *t == c10::ScalarType::Half) return;
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::ShardedDataParallel",
        policytrain::detail::format("ShardingOptions::mp_policy.{} is {}; expected Float, BFloat16 or Half", field,
                                    c10::toString(*t))));
  }

  /// Stage 3: the shards' tensors (what the optimizer's lists hold once swapped).
  std::vector<const void*> parameter_shards_of_groups() const {
    std::vector<const void*> out;
    auto groups = full_.units();
    groups.push_back(full_.root());
    for (const auto& g : groups)
      for (const auto& p : g->params()) out.push_back(p.shard.unsafeGetTensorImpl());
    return out;
  }

  /// Stage 2: builds the buckets and hooks, or rebuilds them when the core rebuilt its parameter list (a part
  /// unfrozen, a layout changed: sync_parameters), or when an owner changed (a param group added between fits).
  void sync_zero2() {
    const auto& rep = core_.replica();
    const size_t n = rep->params.size();
    std::vector<int> owners(n, 0);
    for (size_t i = 0; i < n; ++i) owners[i] = std::max(0, owner(rep->params[i]));  // not in the optimizer: rank 0
    std::vector<int64_t> rows;
    if (partition_.dim0()) {
      for (const auto& p : rep->params) {
        const int64_t d0 = p.dim() == 0 ? 1 : p.size(0);
        rows.push_back((d0 + world_size() - 1) / world_size());
      }
    }
    if (!z2_ || z2_->owner != owners || z2_->rows != rows || z2_generation_ != rep->generation) {
      z2_ = detail::Zero2Sync::make(rep, std::move(owners), core_.options().bucket_mb, std::move(rows));
      z2_generation_ = rep->generation;
    }
  }

  detail::DataParallelCore core_;
  ShardingOptions z_;
  OptimizerPartition partition_;
  std::shared_ptr<detail::Zero2Sync> z2_;  ///< stage 2's gradient synchronisation (null otherwise)
  int64_t z2_generation_ = -1;             ///< the Replica's generation when z2_ was built
  int64_t bytes_ = 0, bytes_total_ = 0, bytes_largest_ = 0;
  bool sharded_save_ = false;  ///< set_sharded_save: a sharded checkpoint's save is under way
  detail::FullShard full_;     ///< stage 3's units (built at fit begin with more than one rank)
  bool consolidated_ = false;  ///< stage 3: before_save consolidated, after_save restores
  bool swapped_ = true;        ///< stage 3: the optimizer's lists hold the shards in this fit
  std::unordered_set<const void*> shard_impls_;  ///< stage 3: the shards, once the optimizer's lists hold them
  int64_t export_bytes_now_ = 0, export_bytes_peak_ = 0;  ///< export_weights: gathered parameter bytes alive, the most
  std::vector<std::function<void()>> unsharded_;  ///< stage 3: on_unsharded's, run at fit end
  std::vector<std::function<void()>> before_unshard_;  ///< stage 3: before_unshard's, run at fit end
};

}  // namespace policytrain::parallel
