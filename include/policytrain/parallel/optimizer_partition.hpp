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
///
/// The dim-0 partition (ShardingOptions::partition = Partition::dim0): every parameter is chunked on dim 0 across
/// the ranks as PyTorch FSDP2's _fsdp_param.py chunks it (torch.chunk: rank r holds rows [r c, (r + 1) c) of d0,
/// c = ceil(d0 / N), clipped to d0, so a rank may hold fewer rows or none; its chunk lives at the front of a buffer
/// of c rows, so that every rank's buffer has the same size for the all-gather). Each rank keeps the
/// state of its chunk of every parameter, about total / N rather than bounded by the largest parameter. Outside the
/// step the state stays keyed by the full parameters (chunk-shaped), so that anything that serialises the optimizer
/// (a sharded checkpoint, DivergenceRollback's snapshot) sees it; for the step the param groups list the chunks and
/// the state is keyed by them, the user's optimizer steps the chunks (any torch::optim class and the fused ones:
/// their updates are element-wise, so a chunk gets exactly the rows of the unsharded update), and the ranks'
/// padded chunks are all-gathered (one _allgather_base per dtype) into the full parameters. The chunks live in one
/// flat buffer per dtype allocated for the step only (the all-gather's input), so between steps a rank holds the
/// full parameters and its chunks' state, nothing more. Consolidation gathers
/// each state tensor's chunks on rank 0 (the format of an unsharded run); a whole state loaded on every rank (a
/// consolidated resume, a resharded one) is cut into the chunks at the next step.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
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
#include <policytrain/parallel/dim0_shard.hpp>
#include <policytrain/parallel/options.hpp>
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

/// Replaces every defined tensor of an optimizer's per-parameter state `s` by `f(tensor)`, in a fixed order (the
/// state kinds param_state_bytes knows; another kind is left as it is).
template <class F>
void map_state_tensors(torch::optim::OptimizerParamState& s, F&& f) {
  auto m = [&](const torch::Tensor& t, auto set) {
    if (t.defined()) set(f(t));
  };
  if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(&s)) {
    m(a->exp_avg(), [&](torch::Tensor t) { a->exp_avg(std::move(t)); });
    m(a->exp_avg_sq(), [&](torch::Tensor t) { a->exp_avg_sq(std::move(t)); });
    m(a->max_exp_avg_sq(), [&](torch::Tensor t) { a->max_exp_avg_sq(std::move(t)); });
  } else if (auto* b = dynamic_cast<torch::optim::AdamParamState*>(&s)) {
    m(b->exp_avg(), [&](torch::Tensor t) { b->exp_avg(std::move(t)); });
    m(b->exp_avg_sq(), [&](torch::Tensor t) { b->exp_avg_sq(std::move(t)); });
    m(b->max_exp_avg_sq(), [&](torch::Tensor t) { b->max_exp_avg_sq(std::move(t)); });
  } else if (auto* c = dynamic_cast<torch::optim::SGDParamState*>(&s)) {
    m(c->momentum_buffer(), [&](torch::Tensor t) { c->momentum_buffer(std::move(t)); });
  } else if (auto* d = dynamic_cast<torch::optim::AdagradParamState*>(&s)) {
    m(d->sum(), [&](torch::Tensor t) { d->sum(std::move(t)); });
  } else if (auto* e = dynamic_cast<torch::optim::RMSpropParamState*>(&s)) {
    m(e->square_avg(), [&](torch::Tensor t) { e->square_avg(std::move(t)); });
    m(e->momentum_buffer(), [&](torch::Tensor t) { e->momentum_buffer(std::move(t)); });
    m(e->grad_avg(), [&](torch::Tensor t) { e->grad_avg(std::move(t)); });
  }
}

/// One parameter's dim-0 chunk on this rank (Partition::dim0; see the file comment). A 0-dim parameter counts as
/// one row.
struct ParamChunk {
  torch::Tensor param;   ///< the full parameter, as the param group lists it
  torch::Tensor padded;  ///< during the step: this rank's `rows` rows, flat, in the all-gather's input (FSDP2's _sharded_param_data)
  torch::Tensor shard;   ///< during the step: the first `length` rows of `padded` in the chunk's shape, what the optimizer steps
  size_t group = 0;      ///< the param group that lists the parameter
  int64_t d0 = 1;        ///< the parameter's rows
  int64_t rows = 0;      ///< rows per rank, padding included: ceil(d0 / N)
  int64_t start = 0;     ///< this rank's first row
  int64_t length = 0;    ///< this rank's rows (0 to rows)
  int64_t row_numel = 1; ///< elements per row

  /// Rank `rank`'s chunk of `p` (in param group `g`) over `world` ranks.
  ParamChunk(const torch::Tensor& p, int rank, int world, size_t g) : param(p), group(g) {
    d0 = p.dim() == 0 ? 1 : p.size(0);
    row_numel = d0 == 0 ? 0 : p.numel() / d0;
    const auto c = Dim0Chunk::of(d0, world);  // FSDP2's padded torch.chunk, as stage 3's
    rows = c.chunk;
    start = c.begin(rank);
    length = c.size(rank);
  }
  /// The shape of `n` rows of the parameter.
  std::vector<int64_t> shape(int64_t n) const {
    std::vector<int64_t> s{n};
    for (int64_t d = 1; d < param.dim(); ++d) s.push_back(param.size(d));
    return s;
  }
  /// Rows [`from`, `from` + `n`) of `t`, a tensor of the parameter's shape (a view).
  torch::Tensor rows_of(const torch::Tensor& t, int64_t from, int64_t n) const {
    return (t.dim() == 0 ? t.reshape({1}) : t).narrow(0, from, n);
  }
  /// This rank's rows of `t`, a tensor of the parameter's shape (a view).
  torch::Tensor mine(const torch::Tensor& t) const { return rows_of(t, start, length); }
};

/// The partition of an optimizer's parameters over the ranks and what it implies for the step and checkpoints
/// (see the file comment). Disabled (one process, or nothing sharded), every parameter is this rank's.
class OptimizerPartition {
 public:
  /// `enabled`: more than one rank and a stage that shards the optimizer state.
  /// `kind`: whole parameters (greedy) or dim-0 chunks of every parameter.
  OptimizerPartition(int rank, bool enabled, Partition kind = Partition::greedy)
      : rank_(rank), enabled_(enabled), dim0_(kind == Partition::dim0) {}

  /// Whether the optimizer state is sharded.
  bool enabled() const { return enabled_; }
  /// Whether the state is split into dim-0 chunks of every parameter (Partition::dim0, enabled).
  bool dim0() const { return enabled_ && dim0_; }
  /// The rank that owns (keeps the optimizer state of, and steps) `p`; -1 for a tensor in no param group. Under
  /// the dim-0 partition every rank keeps a chunk of every parameter: this rank.
  int owner(const torch::Tensor& p) const {
    auto it = owner_.find(p.unsafeGetTensorImpl());
    return it == owner_.end() ? -1 : it->second;
  }
  /// Under the dim-0 partition, this rank's chunk of `p` (null for a tensor in no param group, or greedy).
  const ParamChunk* chunk(const torch::Tensor& p) const {
    auto it = chunk_of_.find(p.unsafeGetTensorImpl());
    return it == chunk_of_.end() ? nullptr : &chunks_[it->second];
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
    if (dim0()) return assign_dim0(opt, world);
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
    if (dim0()) return step_dim0(group, opt, step, std::forward<F>(fn));
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
    if (dim0()) return consolidate_dim0(group, opt);
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

  /// After a checkpoint serialised the consolidated state: each rank keeps its own partition again (greedy: the
  /// other ranks' state dropped on rank 0; dim0: rank 0's chunks put back in place of the whole tensors).
  template <class Optimizer>
  void release_consolidated(Optimizer& opt) {
    if (!dim0()) return drop_foreign_state(opt);
    for (auto& [key, st] : stash_) opt.state()[key] = std::move(st);
    stash_.clear();
  }

  /// Removes the state of parameters this rank does not own (after a resume, or rank 0's consolidation). Dim-0
  /// partition: a parameter's whole state (a consolidated or resharded resume) is cut to this rank's chunk.
  template <class Optimizer>
  void drop_foreign_state(Optimizer& opt) {
    if (dim0()) return cut_whole_state(opt);
    auto& st = opt.state();
    for (auto it = st.begin(); it != st.end();) {
      if (!owned(it->first)) it = st.erase(it);
      else ++it;
    }
  }

 private:
  static constexpr int kTagSize = 0x5a01, kTagData = 0x5a02;

  template <class Optimizer>
  void assign_dim0(Optimizer& opt, int world) {
    owner_.clear();
    chunk_of_.clear();
    chunks_.clear();
    per_rank_.assign(static_cast<size_t>(world), {});
    owned_.assign(opt.param_groups().size(), {});
    for (size_t g = 0; g < opt.param_groups().size(); ++g)
      for (const auto& p : opt.param_groups()[g].params()) {
        owner_[p.unsafeGetTensorImpl()] = rank_;
        chunk_of_[p.unsafeGetTensorImpl()] = chunks_.size();
        chunks_.emplace_back(p, rank_, world, g);
        for (auto& r : per_rank_) r.push_back(p);
      }
  }

  /// The dim-0 step: the chunks copied from the live parameters (a load or a rollback may have changed them since
  /// the last gather) with this rank's rows of the gradients, the state re-keyed to the chunks, the user's step over
  /// the chunks, the state keyed back, then the all-gather.
  template <class Optimizer, class F>
  bool step_dim0(ProcessGroup& group, Optimizer& opt, int64_t step, F&& fn) {
    cut_whole_state(opt);
    auto& groups = opt.param_groups();
    if (groups.size() != owned_.size())
      throw std::logic_error(policytrain::detail::error_message(
          "policytrain::parallel::ShardedDataParallel",
          policytrain::detail::format("{}: the optimizer has {} param groups, {} when the parameters were chunked "
                                      "at fit begin; add param groups before fit",
                                      group.who(), groups.size(), owned_.size())));
    // The step's buffers: one flat tensor per dtype and device, each chunk a view of its padded rows.
    std::vector<std::pair<std::vector<size_t>, torch::Tensor>> flats;
    {
      std::vector<char> done(chunks_.size(), 0);
      for (size_t first = 0; first < chunks_.size(); ++first) {
        if (done[first]) continue;
        const auto& p0 = chunks_[first].param;
        std::vector<size_t> members;
        int64_t n = 0;
        for (size_t i = first; i < chunks_.size(); ++i)
          if (!done[i] && chunks_[i].param.scalar_type() == p0.scalar_type() && chunks_[i].param.device() == p0.device())
            members.push_back(i), done[i] = 1, n += chunks_[i].rows * chunks_[i].row_numel;
        auto flat = torch::empty({n}, p0.options().requires_grad(false));
        int64_t off = 0;
        for (size_t i : members) {
          auto& c = chunks_[i];
          c.padded = flat.narrow(0, off, c.rows * c.row_numel);
          c.shard = c.padded.narrow(0, 0, c.length * c.row_numel).view(c.shape(c.length));
          off += c.rows * c.row_numel;
        }
        flats.emplace_back(std::move(members), std::move(flat));
      }
      for (auto& o : owned_) o.clear();
      for (auto& c : chunks_) owned_[c.group].push_back(c.shard);
    }
    {
      torch::NoGradGuard ng;
      for (auto& c : chunks_) {
        c.shard.copy_(c.mine(c.param.detach()));
        const auto& g = c.param.grad();
        // Stage 2 left this rank's rows of the gradient (chunk-shaped); stage 1 the whole averaged gradient.
        c.shard.mutable_grad() = !g.defined() ? torch::Tensor() : g.sizes() == c.shard.sizes() ? g : c.mine(g).contiguous();
      }
    }
    auto& st = opt.state();
    auto rekey = [&](bool to_shard) {
      for (auto& c : chunks_) {
        void* from = to_shard ? c.param.unsafeGetTensorImpl() : c.shard.unsafeGetTensorImpl();
        void* to = to_shard ? c.shard.unsafeGetTensorImpl() : c.param.unsafeGetTensorImpl();
        auto it = st.find(from);
        if (it == st.end()) continue;
        auto s = std::move(it->second);
        st.erase(it);
        st[to] = std::move(s);
      }
    };
    std::vector<std::vector<torch::Tensor>> all(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) all[g] = std::exchange(groups[g].params(), owned_[g]);
    rekey(true);
    auto restore = [&] {
      rekey(false);
      for (size_t g = 0; g < groups.size(); ++g) groups[g].params() = std::move(all[g]);
      for (auto& c : chunks_) c.shard.mutable_grad() = torch::Tensor();
    };
    auto release = [&] {
      for (auto& c : chunks_) c.padded = c.shard = torch::Tensor();
      for (auto& o : owned_) o.clear();
    };
    bool stepped = false;
    try {
      stepped = fn();
    } catch (...) {
      restore();
      release();
      throw;
    }
    restore();
    try {
      if (stepped) all_gather(group, step, flats);
    } catch (...) {
      release();
      throw;
    }
    release();
    return stepped;
  }

  /// Every rank's padded chunks into the full parameters: one _allgather_base per step buffer (dtype and device;
  /// `flats`: its chunks and the buffer, as FSDP2's all-gather input), then each rank's rows copied into place.
  void all_gather(ProcessGroup& group, int64_t step, const std::vector<std::pair<std::vector<size_t>, torch::Tensor>>& flats) {
    torch::NoGradGuard ng;
    const int w = group.world_size();
    for (const auto& [members, flat] : flats) {
      auto in = flat.to(group.comm_device());
      auto out = torch::empty({in.numel() * w}, in.options());
      group.wait(group.backend()->_allgather_base(out, in),
                 policytrain::detail::format("all-gather of the updated dim-0 chunks (optimizer step {})", step));
      out = out.to(flat.device());
      for (int r = 0; r < w; ++r) {
        int64_t off = in.numel() * r;
        for (size_t i : members) {
          const auto& c = chunks_[i];
          const int64_t from = std::min(c.d0, c.rows * r), n = std::min(c.d0, from + c.rows) - from;
          if (n > 0) c.rows_of(c.param.detach(), from, n).copy_(out.narrow(0, off, n * c.row_numel).view(c.shape(n)));
          off += c.rows * c.row_numel;
        }
      }
    }
  }

  /// A parameter's whole state (every tensor of its shape: loaded from a consolidated or resharded checkpoint) cut
  /// to this rank's rows; chunk-shaped state is this rank's already. Anything else is refused, naming it.
  template <class Optimizer>
  void cut_whole_state(Optimizer& opt) {
    auto& st = opt.state();
    for (size_t k = 0; k < chunks_.size(); ++k) {
      const auto& c = chunks_[k];
      auto it = st.find(c.param.unsafeGetTensorImpl());
      if (it == st.end()) continue;
      map_state_tensors(*it->second, [&](const torch::Tensor& t) {
        const auto mine = c.shape(c.length);
        if (t.sizes() == c10::IntArrayRef(mine)) return t;
        // Whole: the parameter's shape (a 0-dim parameter's state comes back from a sharded checkpoint as one row).
        if (t.numel() == c.param.numel()) return c.mine(t.reshape(c.param.sizes())).contiguous().clone();
        throw std::runtime_error(policytrain::detail::error_message(
            "policytrain::parallel::ShardedDataParallel",
            policytrain::detail::format("the optimizer state of parameter {} (global index) has a tensor of shape "
                                        "{}; expected the parameter's {} (a whole state) or this rank's dim-0 chunk "
                                        "{}; resume from a checkpoint of this model and optimizer",
                                        k, t.sizes(), c.param.sizes(), c10::IntArrayRef(mine))));
      });
    }
  }

  /// Rank 0 receives every rank's chunks of every state tensor (one c10d gather of each rank's padded chunks,
  /// flattened) and holds the whole state in place of its chunks until release_consolidated.
  template <class Optimizer>
  void consolidate_dim0(ProcessGroup& group, Optimizer& opt) {
    torch::NoGradGuard ng;
    cut_whole_state(opt);
    auto& st = opt.state();
    const int w = group.world_size();
    std::vector<torch::Tensor> flat;
    std::vector<int64_t> counts(chunks_.size(), 0);  // state tensors per parameter
    for (size_t k = 0; k < chunks_.size(); ++k) {
      const auto& c = chunks_[k];
      auto it = st.find(c.param.unsafeGetTensorImpl());
      if (it == st.end()) continue;
      map_state_tensors(*it->second, [&](const torch::Tensor& t) {
        auto p = torch::zeros({c.rows * c.row_numel}, t.options());
        p.narrow(0, 0, c.length * c.row_numel).copy_(t.reshape({-1}));
        flat.push_back(p);
        ++counts[k];
        return t;
      });
    }
    if (flat.empty()) return;  // no state yet: nothing to gather (every rank alike: they step together)
    auto in = torch::cat(flat).to(group.comm_device());
    std::vector<std::vector<at::Tensor>> outs;  // empty on the other ranks, as c10d's gather requires
    if (rank_ == 0) {
      outs.emplace_back();
      for (int r = 0; r < w; ++r) outs[0].push_back(torch::empty_like(in));
    }
    std::vector<at::Tensor> ins{in};
    c10d::GatherOptions go;
    go.rootRank = 0;
    group.wait(group.backend()->gather(outs, ins, go),
               "gather of the ranks' dim-0 chunks of the optimizer state on rank 0 (consolidation)");
    if (rank_ != 0) return;
    int64_t off = 0;
    for (size_t k = 0; k < chunks_.size(); ++k) {
      if (counts[k] == 0) continue;
      const auto& c = chunks_[k];
      auto it = st.find(c.param.unsafeGetTensorImpl());
      auto whole = it->second->clone();
      map_state_tensors(*whole, [&](const torch::Tensor& t) {
        std::vector<torch::Tensor> pieces;
        for (int r = 0; r < w; ++r)
          pieces.push_back(outs[0][static_cast<size_t>(r)].narrow(0, off, c.rows * c.row_numel).to(t.device()));
        off += c.rows * c.row_numel;
        return torch::cat(pieces).narrow(0, 0, c.d0 * c.row_numel).view(c.param.sizes()).clone();
      });
      stash_[c.param.unsafeGetTensorImpl()] = std::move(it->second);
      it->second = std::move(whole);
    }
  }

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
  bool dim0_ = false;
  std::vector<ParamChunk> chunks_;                    ///< dim0: this rank's chunk of every parameter, groups in order
  std::unordered_map<const void*, size_t> chunk_of_;  ///< dim0: a parameter's index in chunks_
  std::unordered_map<void*, std::unique_ptr<torch::optim::OptimizerParamState>> stash_;  ///< dim0: rank 0's chunks during a consolidated save
  std::unordered_map<const void*, int> owner_;
  std::vector<std::vector<torch::Tensor>> owned_;     ///< per param group: this rank's parameters
  std::vector<std::vector<torch::Tensor>> per_rank_;  ///< per rank: its parameters, for the broadcast
};

}  // namespace policytrain::parallel
