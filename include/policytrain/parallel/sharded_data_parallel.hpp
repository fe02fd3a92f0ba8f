#pragma once
/// \file
/// parallel::ShardedDataParallel — DataParallel whose optimizer state is sharded across the ranks (ZeRO stage 1,
/// as PyTorch's torch.distributed.optim.ZeroRedundancyOptimizer): each rank keeps and steps the optimizer state
/// of its partition of the parameters only, and after the step every owner broadcasts its updated parameters.
///
/// Everything DataParallel does stays as it is (the same c10d process group, the same c10d::Reducer, buckets
/// overlapped with backward, no_sync under accumulation, static_graph, find_unused_parameters, buffers, the start
/// check, the agreement helpers): the gradients are still averaged over all ranks, so every rank holds the whole
/// averaged gradient, and everything that reads gradients before the step (loss-scaler unscale and inf check,
/// global-norm clipping, the non-finite checks) sees exactly what it sees under DataParallel, on every rank alike.
/// Only the optimizer step is sharded: around_step lets the optimizer see the parameters this rank owns (each
/// param group's list is swapped for the owned part for the duration of the step, so any torch::optim optimizer
/// and the fused ones create and update state for those only), then the owners broadcast
/// (c10d::broadcast_coalesced, one per owning rank).
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
/// Hooks (beyond DataParallel's): on_fit_begin (partition), on_epoch_begin (after a resume: the other partitions'
/// state dropped), around_step (sharded step + broadcast), before_save / after_save (consolidation), on_fit_end
/// (state bytes).
/// Cost: with one process, nothing beyond DataParallel's (the step is not swapped).
/// Example: examples/fashion_mnist (`--nproc 2 --zero 1`); docs/parallel.md, "Sharded optimizer state".
#include <algorithm>
#include <cstdint>
#include <cstring>
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
  /// ZeRO stage: 1 shards the optimizer state (gradients are all-reduced as under DataParallel).
  int stage = 1;
};

/// DataParallel with the optimizer state sharded across the ranks (ZeRO-1); see the file comment.
class ShardedDataParallel : public DataParallel {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "parallel::ShardedDataParallel";

  /// Reads the environment now (as DataParallel). Throws std::invalid_argument for a stage other than 1.
  explicit ShardedDataParallel(DataParallelOptions o = {}, ShardingOptions z = {}) : DataParallel(std::move(o)), z_(z) {
    if (z_.stage != 1)
      throw std::invalid_argument(policytrain::detail::format(
          "policytrain::parallel::ShardedDataParallel: stage {} is not supported; expected 1 (optimizer state "
          "sharded, gradients all-reduced)", z_.stage));
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
  /// This rank's optimizer state bytes when fit last ended (0 before).
  int64_t optimizer_state_bytes() const { return bytes_; }
  /// The sum over every rank (equal on every rank).
  int64_t optimizer_state_bytes_total() const { return bytes_total_; }
  /// The largest state any one parameter has (equal on every rank): the bound on the imbalance of a partition.
  int64_t optimizer_state_bytes_largest() const { return bytes_largest_; }

  // --- hooks ---

  /// DataParallel's on_fit_begin (connect, verify, broadcast, the Reducer), then the partition of the optimizer's
  /// parameters.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    DataParallel::on_fit_begin(ctx);
    partition_parameters(ctx.optimizer());
  }

  /// DataParallel's start check at the first epoch; after a resume (the checkpoint policy's on_fit_begin loaded the
  /// whole state on every rank) each rank lets the other partitions' state go.
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    DataParallel::on_epoch_begin(ctx);
    if (active()) drop_foreign_state(ctx.optimizer());
  }

  /// Steps the optimizer over this rank's partition, then broadcasts every partition from its owner. A step is
  /// skipped on every rank alike (the skip is decided on the averaged gradients, or agreed), so when `fn` reports
  /// a skip nothing is broadcast.
  template <class Ctx, class F>
  bool around_step(Ctx& ctx, F&& fn) {
    if (!active()) return fn();
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
    if (!active()) return;
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
    if (active()) drop_foreign_state(ctx.optimizer());
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

  bool owned(const void* key) const {
    if (!active()) return true;
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
        per_rank_[static_cast<size_t>(r)].push_back(ps[i].detach());
      }
    }
  }

  /// Broadcasts every rank's partition from its owner (c10d::broadcast_coalesced: flattened into buckets).
  void broadcast_partitions() {
    torch::NoGradGuard ng;
    for (int r = 0; r < world_size(); ++r) {
      const auto& ts = per_rank_[static_cast<size_t>(r)];
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

  ShardingOptions z_;
  std::unordered_map<const void*, int> owner_;
  std::vector<std::vector<torch::Tensor>> owned_;     ///< per param group: this rank's parameters
  std::vector<std::vector<torch::Tensor>> per_rank_;  ///< per rank: its parameters (detached), for the broadcast
  int64_t bytes_ = 0, bytes_total_ = 0, bytes_largest_ = 0;
};

}  // namespace policytrain::parallel
