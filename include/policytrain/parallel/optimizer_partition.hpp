#pragma once
/// \file
/// parallel::OptimizerPartition — the optimizer state sharded across the ranks, as PyTorch's
/// torch.distributed.optim.ZeroRedundancyOptimizer shards it: ZeroRedundancyOptimizer's greedy partition (per
/// param group in order, the group's parameters sorted by size, largest first, ties in the group's order, each
/// given to the rank with the smallest total so far; the totals carry over from group to group), the step over
/// this rank's partition (each param group's list swapped for the owned part for the step's duration, so that any
/// torch::optim optimizer and the fused ones create and update state for those only), the owners' broadcasts of
/// their updated parameters, and the consolidation of every rank's state on rank 0 for a checkpoint (each rank's
/// Optimizer::save archive, sent with c10d send/recv), as Python's consolidate_state_dict. A piece of
/// parallel::ShardedDataParallel that knows no Trainer (it is given the optimizer).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/process_group.hpp>

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

/// The partition of an optimizer's parameters over the ranks and what it implies for the step and checkpoints
/// (see the file comment). Disabled (one process, or nothing sharded), every parameter is this rank's.
class OptimizerPartition {
 public:
  /// `enabled`: more than one rank and a stage that shards the optimizer state.
  OptimizerPartition(int rank, bool enabled) : rank_(rank), enabled_(enabled) {}

  /// Whether the optimizer state is sharded.
  bool enabled() const { return enabled_; }
  /// The rank that owns (keeps the optimizer state of, and steps) `p`; -1 for a tensor in no param group.
  int owner(const torch::Tensor& p) const {
    auto it = owner_.find(p.unsafeGetTensorImpl());
    return it == owner_.end() ? -1 : it->second;
  }
  /// The parameters rank `r` owns, group by group, in each group's order (known after partition()).
  const std::vector<torch::Tensor>& partition(int r) const { return per_rank_.at(static_cast<size_t>(r)); }
  /// Whether this rank keeps the state of the parameter `key` (every one when disabled).
  bool owned(const void* key) const {
    if (!enabled_) return true;
    auto it = owner_.find(key);
    return it != owner_.end() && it->second == rank_;
  }

  /// Bytes of optimizer state this rank keeps for the parameters it owns.
  template <class Optimizer>
  int64_t state_bytes(const Optimizer& opt) const {
    int64_t n = 0;
    for (const auto& [key, st] : opt.state())
      if (owned(key)) n += param_state_bytes(*st);
    return n;
  }

  /// ZeroRedundancyOptimizer's greedy partition of `opt`'s param groups over `world` ranks (see the file comment).
  template <class Optimizer>
  void assign(Optimizer& opt, int world) {
    owner_.clear();
    owned_.assign(opt.param_groups().size(), {});
    per_rank_.assign(static_cast<size_t>(world), {});
    std::vector<int64_t> sizes(static_cast<size_t>(world), 0);
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
        if (r == rank_) owned_[g].push_back(ps[i]);
        per_rank_[static_cast<size_t>(r)].push_back(ps[i]);
      }
    }
  }

  /// Steps the optimizer (`fn`) over this rank's partition, then broadcasts every partition from its owner. A
  /// step is skipped on every rank alike (the skip is decided on the averaged gradients, or agreed), so when `fn`
  /// reports a skip nothing is broadcast. `step` names the optimizer step in errors.
  template <class Optimizer, class F>
  bool step(ProcessGroup& group, Optimizer& opt, int64_t step, F&& fn) {
    drop_foreign_state(opt);  // a resume or a consolidation left the whole state here
    auto& groups = opt.param_groups();
    if (groups.size() != owned_.size())
      throw std::logic_error(policytrain::detail::error_message(
          "policytrain::parallel::ShardedDataParallel", policytrain::detail::format(
              "{}: the optimizer has {} param groups, {} when the "
          "parameters were partitioned at fit begin; add param groups before fit", group.who(), groups.size(),
          owned_.size())));
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
    if (stepped) broadcast(group, step);
    return stepped;
  }

  /// On every rank before a checkpoint serialises the optimizer: rank 0 receives every other rank's state and
  /// loads it beside its own, so that it holds the whole (consolidated) state. A collective.
  template <class Optimizer>
  void consolidate(ProcessGroup& group, Optimizer& opt) {
    drop_foreign_state(opt);
    const auto dev = group.comm_device();
    if (rank_ != 0) {
      if (per_rank_[static_cast<size_t>(rank_)].empty()) return;  // owns nothing: rank 0 expects nothing from it
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
      std::vector<at::Tensor> st{size.to(dev)};
      group.wait(group.backend()->send(st, 0, kTagSize), "send of this rank's optimizer state size to rank 0");
      std::vector<at::Tensor> dt{data.to(dev)};
      group.wait(group.backend()->send(dt, 0, kTagData), "send of this rank's optimizer state to rank 0");
      return;
    }
    for (int r = 1; r < group.world_size(); ++r) {
      if (per_rank_[static_cast<size_t>(r)].empty()) continue;  // owns nothing: it sends nothing either
      std::vector<at::Tensor> st{torch::zeros({1}, torch::TensorOptions(torch::kLong).device(dev))};
      group.wait(group.backend()->recv(st, r, kTagSize), policytrain::detail::format("receipt of rank {}'s optimizer state size", r));
      const int64_t n = st[0].to(torch::kCPU).item<int64_t>();
      std::vector<at::Tensor> dt{torch::empty({n}, torch::TensorOptions(torch::kUInt8).device(dev))};
      group.wait(group.backend()->recv(dt, r, kTagData), policytrain::detail::format("receipt of rank {}'s optimizer state", r));
      auto data = dt[0].to(torch::kCPU).contiguous();
      torch::serialize::InputArchive a;
      a.load_from(static_cast<const char*>(data.data_ptr()), static_cast<size_t>(n));
      load_owned_by(group, opt, a, r);
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

 private:
  static constexpr int kTagSize = 0x5a01, kTagData = 0x5a02;

  /// Broadcasts every rank's partition from its owner (c10d::broadcast_coalesced: flattened into buckets).
  void broadcast(ProcessGroup& group, int64_t step) {
    torch::NoGradGuard ng;
    for (int r = 0; r < group.world_size(); ++r) {
      // Detached now, not when partitioned: a parameter's storage may have been replaced since (set_data: a layout
      // conversion such as PerfKnobs' channels_last, a load), and a handle detached before would still point at
      // the old storage, which the model no longer reads.
      std::vector<torch::Tensor> ts;
      for (const auto& p : per_rank_[static_cast<size_t>(r)]) ts.push_back(p.detach());
      if (ts.empty()) continue;
      group.broadcast_coalesced(ts, r, policytrain::detail::format("broadcast of rank {}'s updated parameters (optimizer step {})", r, step));
    }
  }

  /// Loads rank `r`'s Optimizer::save archive into `opt` (whose param groups list every parameter, as on every
  /// rank): Optimizer::load maps the archive's parameters by position and adds their state.
  template <class Optimizer>
  void load_owned_by(const ProcessGroup& group, Optimizer& opt, torch::serialize::InputArchive& a, int r) {
    // Rank r's archive holds the state of its own parameters only (it dropped any other first), so loading it adds
    // their entries and replaces none of this rank's.
    try {
      opt.load(a);
    } catch (const std::exception& e) {
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::parallel::ShardedDataParallel", policytrain::detail::format(
              "{}: rank {}'s optimizer state could not be loaded here: {}; "
          "every rank must build the same optimizer with the same param groups", group.who(), r, e.what())));
    }
  }

  int rank_ = 0;
  bool enabled_ = false;
  std::unordered_map<const void*, int> owner_;
  std::vector<std::vector<torch::Tensor>> owned_;     ///< per param group: this rank's parameters
  std::vector<std::vector<torch::Tensor>> per_rank_;  ///< per rank: its parameters, for the broadcast
};

}  // namespace policytrain::parallel
