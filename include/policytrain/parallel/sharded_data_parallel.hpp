#pragma once
/// \file
/// parallel::ShardedDataParallel — DataParallel whose optimizer state (stage 1, ZeRO-1, as PyTorch's
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
/// the backward (detail::Zero2State), so after the backward a rank holds its own partition's gradients only, and
/// the statistics over every gradient (GradClip's total norm, the loss scaler's inf check) are reduced over the
/// ranks through Context::reduce_gradient_statistic (gradients_sharded() tells them).
/// Both: around_step lets the optimizer see the parameters this rank owns (each param group's list is swapped
/// for the owned part for the duration of the step, so any torch::optim optimizer and the fused ones create and
/// update state for those only), then the owners broadcast (c10d::broadcast_coalesced, one per owning rank).
///
/// Partition: ZeroRedundancyOptimizer's greedy rule, per param group in order: the group's parameters sorted by
/// size (largest first, ties in the group's order), each given to the rank with the smallest total so far (the
/// totals carry over from group to group). A rank may own no parameter of a group. Same rule as Python, so the
/// oracle compares each rank's shard too.
///
/// Checkpoints: before_save gathers every rank's state on rank 0 (each rank's Optimizer::save archive, sent with
/// c10d send/recv, loaded into rank 0's optimizer, which then holds the consolidated state as Python's
/// consolidate_state_dict does), so the checkpoint has the whole optimizer state, in the format of an unsharded
/// run; after_save lets rank 0 drop the other ranks' part again. A resume loads the whole state on every rank;
/// each keeps its partition at the first step.
///
/// Hooks (beyond DataParallel's): on_fit_begin (partition; stage 2: buckets and gradient hooks), on_epoch_begin
/// (after a resume: the other partitions' state dropped), around_backward and before_step (stage 2: the
/// reduce-scatter), around_step (sharded step + broadcast), before_save / after_save (consolidation), on_fit_end
/// (state bytes); and the Trainer's gradients_sharded / reduce_gradient_statistic.
/// Cost: with one process, nothing beyond DataParallel's (the step is not swapped, no hook is installed).
/// Example: examples/fashion_mnist (`--nproc 2 --zero 1`, `--zero 2`); docs/parallel.md, "Sharded optimizer state".
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/data_parallel.hpp>

namespace policytrain::parallel {

/// Bytes of the tensors an optimizer keeps for parameter `key` (moments, momentum buffers), 0 when it keeps none.
/// Knows the state kinds of torch::optim's Adam, AdamW, SGD, Adagrad and RMSprop (the fused optimizers use Adam's,
/// AdamW's and SGD's).
inline int64_t param_state_bytes(const torch::optim::OptimizerParamState& s) {
  int64_t n = 0;
  auto add = [&](const torch::Tensor& t) {
    if (t.defined()) n += t.numel() * static_cast<int64_t>(t.element_size());
  };
  if (auto* a = dynamic_cast<const torch::optim::AdamWParamState*>(&s)) {
    add(a->exp_avg()), add(a->exp_avg_sq()), add(a->max_exp_avg_sq());
  } else if (auto* b = dynamic_cast<const torch::optim::AdamParamState*>(&s)) {
    add(b->exp_avg()), add(b->exp_avg_sq()), add(b->max_exp_avg_sq());
  } else if (auto* c = dynamic_cast<const torch::optim::SGDParamState*>(&s)) {
    add(c->momentum_buffer());
  } else if (auto* d = dynamic_cast<const torch::optim::AdagradParamState*>(&s)) {
    add(d->sum());
  } else if (auto* e = dynamic_cast<const torch::optim::RMSpropParamState*>(&s)) {
    add(e->square_avg()), add(e->momentum_buffer()), add(e->grad_avg());
  }
  return n;
}

/// Run-time options of the sharding (beyond DataParallelOptions).
struct ShardingOptions {
  /// ZeRO stage: 0 shards nothing (DataParallel's behaviour, so that one Trainer type can choose DataParallel,
  /// ZeRO-1 or ZeRO-2 at run time); 1 shards the optimizer state (gradients are all-reduced by c10d::Reducer, as
  /// under DataParallel); 2 shards the gradients too (reduce-scattered into their owners' partitions during the
  /// backward).
  int stage = 1;
};

namespace detail {

/// ZeRO-2's gradient synchronisation, shared with the autograd hooks (so the policy may be moved). The
/// parameters are bucketed in the reverse of their order (roughly the order backward produces gradients), up to
/// DataParallelOptions::bucket_mb each; a bucket is launched once every gradient in it is accumulated and every
/// earlier bucket is launched (the same order on every rank): its gradients, scaled by 1/world size (as the
/// Reducer does), are flattened per owning rank and reduce-scattered (c10d's reduce_scatter, sizes per rank as
/// the partition gives them), and every gradient of the bucket is released at once. At the backward's end each
/// rank waits for its buckets and its own parameters' gradients become views of what it received: after the
/// backward a rank holds only its partition's gradients (plus the buckets in flight while the backward runs).
struct Zero2State {
  std::shared_ptr<DataParallelState> dp;
  std::vector<int> owner;  ///< per DataParallelState::params entry: its owning rank
  /// per parameter: its gradient travels in the parameter's memory order and comes back with its strides (a
  /// channels_last weight gets a channels_last gradient, as autograd and c10d::Reducer give it; the fused
  /// optimizers walk a parameter, its gradient and its state in memory order). False: contiguous (also for a
  /// parameter that is not dense).
  std::vector<char> keeps_layout;
  struct Bucket {
    std::vector<size_t> members;  ///< indices into dp->params, in launch order
    size_t pending = 0;           ///< members not yet accumulated in this backward
    bool launched = false;
  };
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;  ///< per parameter
  std::vector<char> ready;
  size_t next = 0;  ///< the first bucket not launched
  struct InFlight {
    c10::intrusive_ptr<c10d::Work> work;
    std::vector<std::vector<at::Tensor>> inputs;  ///< kept alive until the work ends
    std::vector<at::Tensor> output;
    size_t bucket;
  };
  std::vector<InFlight> inflight;
  bool in_backward = false;
  int64_t calls = 0, bytes_last_step = 0, grad_bytes = 0, grad_bytes_peak = 0;
  std::mutex mu;

  /// A gradient accumulated in a synchronised backward: launches every bucket that became complete, in order.
  void accumulated(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (!in_backward) return;
    if (ready[i]) dp->throw_ready_twice(i, "ShardedDataParallel", "its bucket was reduce-scattered");
    ready[i] = 1;
    auto& b = buckets[bucket_of[i]];
    --b.pending;
    while (next < buckets.size() && buckets[next].pending == 0) launch(next++, nullptr);
  }

  /// Reduce-scatters bucket `k` (every member's gradient, or zeros where `used` says another rank has one).
  /// `used` (per parameter, or null: all) leaves out the parameters no rank has a gradient for.
  void launch(size_t k, const std::vector<char>* used) {
    auto& b = buckets[k];
    const int w = dp->env.world_size;
    const double scale = 1.0 / w;
    std::vector<std::vector<torch::Tensor>> parts(static_cast<size_t>(w));
    torch::Tensor like;
    for (size_t i : b.members) {
      if (used && !(*used)[i]) continue;
      auto& p = dp->params[i];
      torch::Tensor g = p.grad();
      if (!g.defined()) g = torch::zeros_like(p);
      parts[static_cast<size_t>(owner[i])].push_back(flat(g, p, keeps_layout[i]));
      if (!like.defined()) like = g;
    }
    b.launched = true;
    if (!like.defined()) return;  // nothing of this bucket is used anywhere
    std::vector<at::Tensor> chunks;
    chunks.reserve(static_cast<size_t>(w));
    int64_t n = 0;
    for (auto& ps : parts) {
      chunks.push_back(ps.empty() ? torch::empty({0}, like.options()) : torch::cat(ps).mul_(scale));
      n += chunks.back().numel();
    }
    // Every gradient of the bucket is in the chunks now: release them (the owner's come back reduced).
    for (size_t i : b.members) dp->params[i].mutable_grad() = torch::Tensor();
    InFlight f;
    f.bucket = k;
    f.output = {torch::empty({chunks[static_cast<size_t>(dp->env.rank)].numel()}, like.options())};
    f.inputs = {std::move(chunks)};
    ++calls;
    ++dp->allreduce_calls_last_step;
    if (in_backward) ++dp->allreduce_calls_in_hooks;
    dp->last_launch_ns = now_ns();
    bytes_last_step += n * static_cast<int64_t>(like.element_size());
    try {
      f.work = dp->backend->reduce_scatter(f.output, f.inputs, c10d::ReduceScatterOptions{});
    } catch (const std::exception& e) {
      throw dp->collective_error(policytrain::detail::format("reduce-scatter of gradient bucket {} (optimizer step {})", k + 1, dp->step), e);
    }
    inflight.push_back(std::move(f));
  }

  /// `g` (the gradient of `p`) as one dimension: in `p`'s memory order when `in_layout`, else row-major.
  static torch::Tensor flat(const torch::Tensor& g, const torch::Tensor& p, bool in_layout) {
    if (!in_layout) return g.reshape({-1});
    torch::Tensor h = g.strides() == p.strides() ? g : torch::empty_strided(p.sizes(), p.strides(), g.options()).copy_(g);
    return h.as_strided({h.numel()}, {1}, h.storage_offset());
  }

  /// Waits for every bucket launched, and makes this rank's parameters' gradients views of what it received.
  void finish() {
    for (auto& f : inflight) {
      dp->wait(f.work, policytrain::detail::format("reduce-scatter of gradient bucket {} (optimizer step {})", f.bucket + 1, dp->step));
      int64_t off = 0;
      const auto& out = f.output[0];
      for (size_t i : buckets[f.bucket].members) {
        if (owner[i] != dp->env.rank) continue;
        auto& p = dp->params[i];
        if (!used_now.empty() && !used_now[i]) continue;
        auto chunk = out.narrow(0, off, p.numel());
        p.mutable_grad() = keeps_layout[i] ? chunk.as_strided(p.sizes(), p.strides(), chunk.storage_offset())
                                           : chunk.view(p.sizes());
        off += p.numel();
      }
    }
    inflight.clear();
    used_now.clear();
    grad_bytes = 0;
    for (auto& p : dp->params)
      if (p.grad().defined()) grad_bytes += p.grad().numel() * static_cast<int64_t>(p.grad().element_size());
    grad_bytes_peak = std::max(grad_bytes_peak, grad_bytes);
  }

  /// A window without a synchronised backward (its last micro-batch was not known to be the last): every
  /// bucket now, leaving out the parameters no rank has a gradient for.
  void reduce_late() {
    torch::NoGradGuard ng;
    const auto n = static_cast<int64_t>(dp->params.size());
    auto flags = torch::zeros({n}, torch::TensorOptions(torch::kFloat).device(dp->comm_device));
    for (int64_t i = 0; i < n; ++i)
      if (dp->params[static_cast<size_t>(i)].grad().defined()) flags[i].fill_(1);
    std::vector<at::Tensor> ft{flags};
    dp->wait(dp->backend->allreduce(ft, c10d::AllreduceOptions{}), "all-reduce of gradient use flags (late window)");
    auto f = flags.to(torch::kCPU);
    used_now.assign(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) used_now[static_cast<size_t>(i)] = f[i].item<float>() > 0;
    bytes_last_step = 0;
    dp->allreduce_calls_last_step = 0;
    for (size_t k = 0; k < buckets.size(); ++k) launch(k, &used_now);
    finish();
  }

  std::vector<char> used_now;  ///< the late window's "some rank has a gradient" flags (empty otherwise)
};

/// Autograd's post-accumulate hook of a parameter under ZeRO-2.
struct Zero2Accumulated : torch::autograd::PostAccumulateGradHook {
  Zero2Accumulated(std::weak_ptr<Zero2State> s, size_t i) : state(std::move(s)), index(i) {}
  void operator()(const torch::autograd::Variable&) override {
    if (auto s = state.lock()) s->accumulated(index);
  }
  std::weak_ptr<Zero2State> state;
  size_t index;
};

}  // namespace detail

/// DataParallel with the optimizer state sharded across the ranks (ZeRO-1); see the file comment.
class ShardedDataParallel : public DataParallel {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "parallel::ShardedDataParallel";

  /// Reads the environment now (as DataParallel). Throws std::invalid_argument for a stage other than 0, 1 or 2.
  explicit ShardedDataParallel(DataParallelOptions o = {}, ShardingOptions z = {}) : DataParallel(std::move(o)), z_(z) {
    if (z_.stage < 0 || z_.stage > 2)
      throw std::invalid_argument(policytrain::detail::format(
          "policytrain::parallel::ShardedDataParallel: stage {} is not supported; expected 0 (nothing sharded: "
          "DataParallel's behaviour), 1 (optimizer state sharded, gradients all-reduced) or 2 (optimizer state and "
          "gradients sharded)", z_.stage));
    if (z_.stage == 2) {
      // These options configure c10d::Reducer, which stage 2 replaces by its own reduce-scatter.
      const auto refuse = [](const char* option, const char* why) {
        throw std::invalid_argument(policytrain::detail::format(
            "policytrain::parallel::ShardedDataParallel: stage 2 does not support DataParallelOptions::{}: {}; "
            "use stage 1 for it", option, why));
      };
      if (o_.find_unused_parameters)
        refuse("find_unused_parameters", "every parameter must get a gradient on every rank in every step");
      if (o_.static_graph) refuse("static_graph", "a Reducer option; stage 2 reduce-scatters without one");
      if (o_.gradient_as_bucket_view)
        refuse("gradient_as_bucket_view", "stage 2's gradients are already views of what each owner received");
      if (o_.compression != "none")
        refuse("compression", "the gradients are reduce-scattered in their own dtype");
      use_reducer_ = false;
    }
  }

  /// The sharding options.
  const ShardingOptions& sharding() const { return z_; }

  /// The rank that owns (keeps the optimizer state of, and steps) `p`; -1 for a tensor in no param group.
  int owner(const torch::Tensor& p) const {
    auto it = owner_.find(p.unsafeGetTensorImpl());
    return it == owner_.end() ? -1 : it->second;
  }
  /// The parameters rank `r` owns, group by group, in each group's order (known after on_fit_begin).
  const std::vector<torch::Tensor>& partition(int r) const { return per_rank_.at(static_cast<size_t>(r)); }

  /// Bytes of optimizer state this rank keeps for the parameters it owns.
  template <class Optimizer>
  int64_t state_bytes(const Optimizer& opt) const {
    int64_t n = 0;
    for (const auto& [key, st] : opt.state())
      if (owned(key)) n += param_state_bytes(*st);
    return n;
  }
  /// Whether each rank keeps only its own partition's gradients after the backward (stage 2, more than one rank):
  /// the Trainer's gradient statistics (GradClip's total norm, the loss scaler's inf check) are then reduced.
  bool gradients_sharded() const { return z_.stage == 2 && active(); }
  /// Reduces a statistic of this rank's gradients over every rank, in place (a collective).
  template <class Ctx>
  void reduce_gradient_statistic(Ctx&, torch::Tensor& t, GradientReduce op) {
    if (!gradients_sharded()) return;
    all_reduce(t, op == GradientReduce::max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM,
               "reduction of a gradient statistic over the shards (total norm, inf check)");
  }
  /// Stage 2: gradient bytes this rank held after the last synchronised backward (its partition's), and the most
  /// after any; stage 1 and one process: 0.
  int64_t gradient_bytes() const { return z2_ ? z2_->grad_bytes : 0; }
  /// Stage 2: the most gradient bytes this rank held after a backward.
  int64_t gradient_bytes_peak() const { return z2_ ? z2_->grad_bytes_peak : 0; }
  /// Stage 2: reduce-scatter calls so far (one per gradient bucket and step), and buckets.
  int64_t reduce_scatter_calls() const { return z2_ ? z2_->calls : 0; }
  /// Stage 2: gradient buckets (0 before on_fit_begin).
  size_t gradient_buckets() const { return z2_ ? z2_->buckets.size() : 0; }

  /// This rank's optimizer state bytes when fit last ended (0 before).
  int64_t optimizer_state_bytes() const { return bytes_; }
  /// The sum over every rank (equal on every rank).
  int64_t optimizer_state_bytes_total() const { return bytes_total_; }
  /// The largest state any one parameter has (equal on every rank): the bound on the imbalance of a partition.
  int64_t optimizer_state_bytes_largest() const { return bytes_largest_; }

  // --- hooks ---

  /// DataParallel's on_fit_begin (connect, verify, broadcast, the Reducer), then the partition of the optimizer's
  /// parameters.
  /// Every fit re-reads the optimizer (DESIGN §7): a param group added since the last fit is partitioned, and at
  /// stage 2 the owner table and buckets are rebuilt when the trainable parameters or their owners changed.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    DataParallel::on_fit_begin(ctx);
    if (z_.stage == 0) return;
    partition_parameters(ctx.optimizer());
    if (z_.stage == 2 && active()) sync_zero2();
  }

  /// Stage 2: on a window's last micro-step the gradients are reduce-scattered as their buckets complete, during
  /// the backward; at its end this rank waits for its buckets and holds its own partition's gradients only. Other
  /// micro-steps only accumulate, every gradient in full (as DataParallel's no_sync). Stage 1: DataParallel's.
  template <class Ctx, class F>
  void around_backward(Ctx& ctx, F&& fn) {
    if (!z2_) return DataParallel::around_backward(ctx, std::forward<F>(fn));
    auto& z = *z2_;
    if (!ctx.is_last_micro_step()) return fn();
    {
      std::lock_guard<std::mutex> lock(z.mu);
      std::fill(z.ready.begin(), z.ready.end(), 0);
      for (auto& b : z.buckets) b.pending = b.members.size(), b.launched = false;
      z.next = 0;
      z.bytes_last_step = 0;
      s_->allreduce_calls_last_step = 0;
      s_->last_launch_ns = 0;
      z.in_backward = true;
    }
    try {
      fn();
    } catch (...) {
      std::lock_guard<std::mutex> lock(z.mu);
      z.in_backward = false;
      for (auto& f : z.inflight) f.work->wait(s_->timeout);  // no buffer freed under a running collective
      z.inflight.clear();
      throw;
    }
    std::lock_guard<std::mutex> lock(z.mu);
    z.in_backward = false;
    if (z.next < z.buckets.size()) {
      std::vector<std::string> missing;
      for (size_t i = 0; i < s_->params.size(); ++i)
        if (!z.ready[i]) missing.push_back(policytrain::detail::format("'{}' (index {})", s_->names[i], i));
      for (auto& f : z.inflight) f.work->wait(s_->timeout);
      z.inflight.clear();
      throw std::runtime_error(policytrain::detail::format(
          "policytrain::parallel::ShardedDataParallel: {}: this rank computed no gradient for parameter{} {} in "
          "optimizer step {}, so its gradient bucket could not be reduce-scattered; at stage 2 every trainable "
          "parameter must get a gradient in every step: freeze it (requires_grad false), or use stage 1 with "
          "DataParallelOptions::find_unused_parameters = true", s_->who(), missing.size() == 1 ? "" : "s",
          fmt::join(missing, ", "), s_->step));
    }
    z.finish();
    s_->synced = true;
    const int64_t launched = s_->last_launch_ns;
    if (launched > 0)
      s_->comm_wait_seconds += std::max<double>(0.0, 1e-9 * static_cast<double>(detail::now_ns() - launched));
  }

  /// Stage 2: reduces a window that had no synchronised backward; counts the step. Stage 1: DataParallel's.
  template <class Ctx>
  void before_step(Ctx& ctx) {
    if (!z2_) return DataParallel::before_step(ctx);
    if (!std::exchange(s_->synced, false)) {
      std::lock_guard<std::mutex> lock(z2_->mu);
      z2_->reduce_late();
    }
    ++s_->step;
  }

  /// DataParallel's start check at the first epoch; after a resume (the checkpoint policy's on_fit_begin loaded the
  /// whole state on every rank) each rank lets the other partitions' state go.
  /// First, once per fit, what DataParallel re-reads there (a layout converted by a policy after this one at fit
  /// begin), and stage 2's buckets with it.
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    if (!verified_ && sharding_active()) {
      sync_parameters(ctx.module());
      if (z_.stage == 2) sync_zero2();
    }
    DataParallel::on_epoch_begin(ctx);
    if (sharding_active()) drop_foreign_state(ctx.optimizer());
  }

  /// Steps the optimizer over this rank's partition, then broadcasts every partition from its owner. A step is
  /// skipped on every rank alike (the skip is decided on the averaged gradients, or agreed), so when `fn` reports
  /// a skip nothing is broadcast.
  template <class Ctx, class F>
  bool around_step(Ctx& ctx, F&& fn) {
    if (!sharding_active()) return fn();
    auto& opt = ctx.optimizer();
    drop_foreign_state(opt);  // a resume or a consolidation left the whole state here
    auto& groups = opt.param_groups();
    if (groups.size() != owned_.size())
      throw std::logic_error(policytrain::detail::format(
          "policytrain::parallel::ShardedDataParallel: {}: the optimizer has {} param groups, {} when the "
          "parameters were partitioned at fit begin; add param groups before fit", s_->who(), groups.size(),
          owned_.size()));
    std::vector<std::vector<torch::Tensor>> all(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) all[g] = std::exchange(groups[g].params(), owned_[g]);
    bool stepped = false;
    try {
      stepped = fn();
    } catch (...) {
      for (size_t g = 0; g < groups.size(); ++g) groups[g].params() = std::move(all[g]);
      throw;
    }
    for (size_t g = 0; g < groups.size(); ++g) groups[g].params() = std::move(all[g]);
    if (stepped) broadcast_partitions();
    return stepped;
  }

  /// On every rank before a checkpoint serialises the optimizer: rank 0 receives every other rank's state and
  /// loads it beside its own, so that it holds the whole (consolidated) state.
  template <class Ctx>
  void before_save(Ctx& ctx) {
    DataParallel::before_save(ctx);  // the ranks' generator states
    if (!sharding_active()) return;
    auto& opt = ctx.optimizer();
    drop_foreign_state(opt);
    if (rank() != 0) {
      if (per_rank_[static_cast<size_t>(rank())].empty()) return;  // owns nothing: rank 0 expects nothing from it
      std::ostringstream out;
      {
        torch::serialize::OutputArchive a;
        opt.save(a);
        a.save_to(out);
      }
      const std::string bytes = out.str();
      auto size = torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kLong);
      auto data = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
      std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
      std::vector<at::Tensor> st{size.to(s_->comm_device)};
      s_->wait(s_->backend->send(st, 0, kTagSize), "send of this rank's optimizer state size to rank 0");
      std::vector<at::Tensor> dt{data.to(s_->comm_device)};
      s_->wait(s_->backend->send(dt, 0, kTagData), "send of this rank's optimizer state to rank 0");
      return;
    }
    for (int r = 1; r < world_size(); ++r) {
      if (per_rank_[static_cast<size_t>(r)].empty()) continue;  // owns nothing: it sends nothing either
      std::vector<at::Tensor> st{torch::zeros({1}, torch::TensorOptions(torch::kLong).device(s_->comm_device))};
      s_->wait(s_->backend->recv(st, r, kTagSize), policytrain::detail::format("receipt of rank {}'s optimizer state size", r));
      const int64_t n = st[0].to(torch::kCPU).item<int64_t>();
      std::vector<at::Tensor> dt{torch::empty({n}, torch::TensorOptions(torch::kUInt8).device(s_->comm_device))};
      s_->wait(s_->backend->recv(dt, r, kTagData), policytrain::detail::format("receipt of rank {}'s optimizer state", r));
      auto data = dt[0].to(torch::kCPU).contiguous();
      torch::serialize::InputArchive a;
      a.load_from(static_cast<const char*>(data.data_ptr()), static_cast<size_t>(n));
      load_owned_by(opt, a, r);
    }
  }

  /// After the checkpoint serialised the optimizer: rank 0 lets the other ranks' state go.
  template <class Ctx>
  void after_save(Ctx& ctx) {
    if (sharding_active()) drop_foreign_state(ctx.optimizer());
  }

  /// DataParallel's on_fit_end, then this rank's and every rank's optimizer state bytes (a collective).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    DataParallel::on_fit_end(ctx);
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

 private:
  static constexpr int kTagSize = 0x5a01, kTagData = 0x5a02;

  /// More than one process and a stage that shards something.
  bool sharding_active() const { return active() && z_.stage > 0; }

  bool owned(const void* key) const {
    if (!sharding_active()) return true;
    auto it = owner_.find(key);
    return it != owner_.end() && it->second == rank();
  }

  /// ZeroRedundancyOptimizer's greedy partition (see the file comment).
  template <class Optimizer>
  void partition_parameters(Optimizer& opt) {
    const int w = world_size();
    owner_.clear();
    owned_.assign(opt.param_groups().size(), {});
    per_rank_.assign(static_cast<size_t>(w), {});
    std::vector<int64_t> sizes(static_cast<size_t>(w), 0);
    std::vector<std::vector<int>> group_owner(opt.param_groups().size());
    for (size_t g = 0; g < opt.param_groups().size(); ++g) {
      const auto& ps = opt.param_groups()[g].params();
      std::vector<size_t> order(ps.size());
      for (size_t i = 0; i < ps.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ps[a].numel() > ps[b].numel(); });
      group_owner[g].assign(ps.size(), 0);
      for (size_t i : order) {
        const int r = static_cast<int>(std::min_element(sizes.begin(), sizes.end()) - sizes.begin());
        group_owner[g][i] = r;
        sizes[static_cast<size_t>(r)] += ps[i].numel();
      }
      for (size_t i = 0; i < ps.size(); ++i) {
        const int r = group_owner[g][i];
        owner_[ps[i].unsafeGetTensorImpl()] = r;
        if (r == rank()) owned_[g].push_back(ps[i]);
        per_rank_[static_cast<size_t>(r)].push_back(ps[i]);
      }
    }
  }

  /// Broadcasts every rank's partition from its owner (c10d::broadcast_coalesced: flattened into buckets).
  void broadcast_partitions() {
    torch::NoGradGuard ng;
    for (int r = 0; r < world_size(); ++r) {
      // Detached now, not when partitioned: a parameter's storage may have been replaced since (set_data: a layout
      // conversion such as PerfKnobs' channels_last, a load), and a handle detached before would still point at
      // the old storage, which the model no longer reads.
      std::vector<torch::Tensor> ts;
      for (const auto& p : per_rank_[static_cast<size_t>(r)]) ts.push_back(p.detach());
      if (ts.empty()) continue;
      s_->guarded(policytrain::detail::format("broadcast of rank {}'s updated parameters (optimizer step {})", r, s_->step), [&] {
        c10d::broadcast_coalesced(s_->pg, ts, size_t{250} * 1024 * 1024, r);
      });
    }
  }

  /// Removes the state of parameters this rank does not own (after a resume, or rank 0's consolidation).
  template <class Optimizer>
  void drop_foreign_state(Optimizer& opt) {
    auto& st = opt.state();
    for (auto it = st.begin(); it != st.end();) {
      if (!owned(it->first)) it = st.erase(it);
      else ++it;
    }
  }

  /// Loads rank `r`'s Optimizer::save archive into `opt` (whose param groups list every parameter, as on every
  /// rank): Optimizer::load maps the archive's parameters by position and adds their state.
  template <class Optimizer>
  void load_owned_by(Optimizer& opt, torch::serialize::InputArchive& a, int r) {
    // Rank r's archive holds the state of its own parameters only (it dropped any other first), so loading it adds
    // their entries and replaces none of this rank's.
    try {
      opt.load(a);
    } catch (const std::exception& e) {
      throw std::runtime_error(policytrain::detail::format(
          "policytrain::parallel::ShardedDataParallel: {}: rank {}'s optimizer state could not be loaded here: {}; "
          "every rank must build the same optimizer with the same param groups", s_->who(), r, e.what()));
    }
  }

  /// Stage 2: builds the buckets and hooks, or rebuilds them when DataParallel rebuilt its parameter list (a part
  /// unfrozen, a layout changed: sync_parameters), or when an owner changed (a param group added between fits).
  void sync_zero2() {
    const size_t n = s_->params.size();
    std::vector<int> owners(n, 0);
    for (size_t i = 0; i < n; ++i) owners[i] = std::max(0, owner(s_->params[i]));  // not in the optimizer: rank 0
    if (!z2_ || z2_->owner != owners || z2_generation_ != sync_generation_) build_zero2(std::move(owners));
  }

  /// Stage 2: the buckets (the parameters in reverse order, up to bucket_mb each, one dtype and device per bucket)
  /// and a post-accumulate hook on every parameter.
  void build_zero2(std::vector<int> owners) {
    auto z = std::make_shared<detail::Zero2State>();
    z->dp = s_;
    const size_t n = s_->params.size();
    z->owner = std::move(owners);
    z->keeps_layout.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const auto& p = s_->params[i];
      z->keeps_layout[i] = !p.is_contiguous() && p.is_non_overlapping_and_dense();
      if (s_->sparse[i])
        throw std::invalid_argument(policytrain::detail::format(
            "policytrain::parallel::ShardedDataParallel: {}: parameter '{}' gets sparse gradients (an embedding with "
            "sparse = true), which stage 2 cannot reduce-scatter into its owner's partition; use stage 1 (its "
            "c10d::Reducer all-reduces sparse gradients, as DataParallel's), or sparse = false", s_->who(),
            s_->names[i]));
    }
    const auto cap = static_cast<int64_t>(o_.bucket_mb * 1024 * 1024);
    z->bucket_of.assign(n, 0);
    int64_t bytes = 0;
    for (size_t j = n; j-- > 0;) {
      const auto& p = s_->params[j];
      const int64_t pb = p.numel() * static_cast<int64_t>(p.element_size());
      bool fresh = z->buckets.empty();
      if (!fresh) {
        const auto& first = s_->params[z->buckets.back().members.front()];
        fresh = bytes + pb > cap || first.scalar_type() != p.scalar_type() || first.device() != p.device();
      }
      if (fresh) {
        z->buckets.emplace_back();
        bytes = 0;
      }
      z->buckets.back().members.push_back(j);
      z->bucket_of[j] = z->buckets.size() - 1;
      bytes += pb;
    }
    z->ready.assign(n, 0);
    for (size_t i = 0; i < n; ++i)
      torch::autograd::impl::set_post_acc_grad_hooks(s_->params[i], std::make_unique<detail::Zero2Accumulated>(z, i));
    z2_ = std::move(z);
    z2_generation_ = sync_generation_;
  }

  ShardingOptions z_;
  std::shared_ptr<detail::Zero2State> z2_;  ///< stage 2's gradient synchronisation (null otherwise)
  int64_t z2_generation_ = -1;              ///< DataParallel's sync_generation_ when z2_ was built
  std::unordered_map<const void*, int> owner_;
  std::vector<std::vector<torch::Tensor>> owned_;     ///< per param group: this rank's parameters
  std::vector<std::vector<torch::Tensor>> per_rank_;  ///< per rank: its parameters, for the broadcast
  int64_t bytes_ = 0, bytes_total_ = 0, bytes_largest_ = 0;
};

}  // namespace policytrain::parallel
