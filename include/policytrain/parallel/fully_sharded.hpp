#pragma once
/// \file
/// detail::FullShard — stage 3 of parallel::ShardedDataParallel apart from the policy: finds the units
/// (parallel::FullyShard<M>) in a model, gives every parameter to the innermost unit that holds it (the root takes
/// what no unit claims, as `fully_shard(model)` on the root), refuses a tensor shared by two units (or by a unit and
/// the root), builds each unit's detail::ShardGroup and puts the shards in the optimizer's param groups in place of
/// the module's parameters (FSDP2 replaces the module's parameters by DTensor shards before the optimizer is
/// built; here the optimizer is the user's, built over module.parameters(), so its lists are rewritten once), and
/// runs what the policy's hooks ask of every group (the end of a backward, the step, a save, fit end).
/// Checkpoints: a save gathers the whole model and each optimizer state tensor (all-gathered on dim 0 with its
/// parameter's layout), and lets the optimizer list the module's parameters for its duration, so the checkpoint
/// has the format of an unsharded run's (consolidate / restore); a resume, at any world size, loads it before the
/// lists are swapped (the first epoch begin), and swap_into gives each shard its rows of the loaded state.
/// Prefetch (ShardingOptions::prefetch): the units share one detail::PrefetchPlan (shard_group.hpp), stepped at
/// every training forward.
/// It knows no Trainer.
#include <functional>
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/fully_shard.hpp>
#include <policytrain/parallel/process_group.hpp>
#include <policytrain/parallel/shard_group.hpp>

namespace policytrain::parallel::detail {

/// Calls `f` on each tensor an optimizer keeps for one parameter and stores what it returns in its place (moments,
/// momentum buffers): the state kinds of torch::optim's Adam, AdamW, SGD, Adagrad and RMSprop, which the fused
/// optimizers use too. Throws std::invalid_argument for another kind.
template <class F>
void map_state_tensors(torch::optim::OptimizerParamState& s, F&& f) {
  const auto each = [&](const torch::Tensor& t, auto&& set) {
    if (t.defined()) set(f(t));
  };
  if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(&s)) {
    each(a->exp_avg(), [&](torch::Tensor v) { a->exp_avg(v); });
    each(a->exp_avg_sq(), [&](torch::Tensor v) { a->exp_avg_sq(v); });
    each(a->max_exp_avg_sq(), [&](torch::Tensor v) { a->max_exp_avg_sq(v); });
  } else if (auto* b = dynamic_cast<torch::optim::AdamParamState*>(&s)) {
    each(b->exp_avg(), [&](torch::Tensor v) { b->exp_avg(v); });
    each(b->exp_avg_sq(), [&](torch::Tensor v) { b->exp_avg_sq(v); });
    each(b->max_exp_avg_sq(), [&](torch::Tensor v) { b->max_exp_avg_sq(v); });
  } else if (auto* c = dynamic_cast<torch::optim::SGDParamState*>(&s)) {
    each(c->momentum_buffer(), [&](torch::Tensor v) { c->momentum_buffer(v); });
  } else if (auto* d = dynamic_cast<torch::optim::AdagradParamState*>(&s)) {
    each(d->sum(), [&](torch::Tensor v) { d->sum(v); });
  } else if (auto* e = dynamic_cast<torch::optim::RMSpropParamState*>(&s)) {
    each(e->square_avg(), [&](torch::Tensor v) { e->square_avg(v); });
    each(e->momentum_buffer(), [&](torch::Tensor v) { e->momentum_buffer(v); });
    each(e->grad_avg(), [&](torch::Tensor v) { e->grad_avg(v); });
  } else {
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::ShardedDataParallel",
        "stage 3: a checkpoint holds an optimizer state of a kind this stage does not know how to gather", {},
        "use torch::optim's Adam, AdamW, SGD, Adagrad or RMSprop, or policytrain's fused optimizers"));
  }
}

/// Stage 3's units and their groups (see the file comment).
class FullShard {
 public:
  FullShard() : sync_(std::make_shared<bool>(true)), plan_(std::make_shared<PrefetchPlan>()) {}

  /// Whether a unit issues the next unit's all-gather before its own compute (ShardingOptions::prefetch).
  void set_prefetch(bool on) { plan_->enabled = on; }

  /// Whether build() ran.
  bool built() const { return root_ != nullptr; }
  /// The units' groups in the model's order, then the root's (which may have no parameter).
  const std::vector<std::shared_ptr<ShardGroup>>& units() const { return units_; }
  const std::shared_ptr<ShardGroup>& root() const { return root_; }

  /// Finds the units of `m` and builds their groups from the parameters' current values (every rank's are rank
  /// 0's by then: the policy broadcast them). Throws std::invalid_argument naming both places of a tensor shared
  /// by two units, or by a unit and the root.
  void build(torch::nn::Module& m, ProcessGroup& group) {
    units_.clear();
    by_impl_.clear();
    // The units, outermost first (named_modules is pre-order); a parameter belongs to the innermost unit on its path.
    std::vector<std::pair<std::string, FullyShardedUnit*>> found;
    for (const auto& item : m.named_modules())
      if (auto* u = dynamic_cast<FullyShardedUnit*>(item.value().get())) found.emplace_back(item.key(), u);
    const auto unit_of = [&](const std::string& path) {
      int best = -1;
      size_t len = 0;
      for (size_t i = 0; i < found.size(); ++i) {
        const auto& k = found[i].first;
        const bool inside = k.empty() || path.rfind(k + ".", 0) == 0;
        if (inside && (best < 0 || k.size() >= len)) best = static_cast<int>(i), len = k.size();
      }
      return best;
    };
    std::vector<std::vector<std::pair<std::string, torch::Tensor>>> members(found.size());
    std::vector<std::pair<std::string, torch::Tensor>> root_members;
    std::unordered_map<const void*, std::pair<int, std::string>> owner;  // tensor -> (unit or -1, first name)
    for (const auto& item : m.named_parameters(/*recurse=*/true)) {
      const int u = unit_of(item.key());
      const void* key = item.value().unsafeGetTensorImpl();
      auto [it, fresh] = owner.emplace(key, std::make_pair(u, item.key()));
      if (!fresh) {
        if (it->second.first != u) refuse_tied(it->second, {u, item.key()}, found);
        continue;  // tied within one unit: one parameter
      }
      (u < 0 ? root_members : members[static_cast<size_t>(u)]).emplace_back(item.key(), item.value());
    }
    for (size_t i = 0; i < found.size(); ++i) {
      auto g = std::make_shared<ShardGroup>(found[i].first, group, sync_, found[i].second->reshard_after_forward());
      for (const auto& [name, t] : members[i]) g->add(name, t);
      g->set_prefetch_plan(plan_);
      found[i].second->set_shard_group(g);
      units_.push_back(g);
    }
    root_ = std::make_shared<ShardGroup>("", group, sync_, /*reshard_after_forward=*/false);
    for (const auto& [name, t] : root_members) root_->add(name, t);
    for (auto* g : all())
      for (auto& p : g->params()) by_impl_[p.full.unsafeGetTensorImpl()] = &p;
    units_found_ = found;
    rank_ = group.rank();
    world_ = group.world_size();
    attached_ = true;
  }

  /// Takes the units off the model again (their forward calls the inner module directly).
  void detach_units() {
    for (auto& [name, u] : units_found_) u->set_shard_group(nullptr);
  }

  /// A later fit: the groups stay (their shards are the optimizer's), their shards take the module's current
  /// values. Call with every group gathered (after fit end).
  void refresh() {
    for (auto* g : all()) g->refresh_shards();
  }

  /// The shard of the module's parameter `full`, or an undefined tensor for one that no group holds.
  torch::Tensor shard_of(const torch::Tensor& full) const {
    auto it = by_impl_.find(full.unsafeGetTensorImpl());
    return it == by_impl_.end() ? torch::Tensor() : it->second->shard;
  }

  /// The sharded parameter whose module tensor is `full`, or null for a tensor that no group holds (a buffer).
  const ShardedParam* param_of(const torch::Tensor& full) const {
    auto it = by_impl_.find(full.unsafeGetTensorImpl());
    return it == by_impl_.end() ? nullptr : it->second;
  }

  /// Puts the shards in `opt`'s param groups in place of the module's parameters (a shard already there stays),
  /// each with this rank's rows of the state the optimizer holds for the parameter (a resumed checkpoint's).
  /// Throws std::invalid_argument naming a parameter of the optimizer that the model does not hold.
  template <class Optimizer>
  void swap_into(Optimizer& opt) {
    auto& st = opt.state();
    std::unordered_map<const void*, bool> shards;
    for (auto* g : all())
      for (auto& p : g->params()) shards[p.shard.unsafeGetTensorImpl()] = true;
    for (size_t gi = 0; gi < opt.param_groups().size(); ++gi) {
      auto& ps = opt.param_groups()[gi].params();
      for (size_t i = 0; i < ps.size(); ++i) {
        if (shards.count(ps[i].unsafeGetTensorImpl())) continue;
        auto it = by_impl_.find(ps[i].unsafeGetTensorImpl());
        if (it == by_impl_.end())
          throw std::invalid_argument(policytrain::detail::error_message(
              "policytrain::parallel::ShardedDataParallel",
              policytrain::detail::format("stage 3: tensor {} of the optimizer's param group {} (shape {}) is no "
                                          "parameter of the model", i, gi, ps[i].sizes()),
              {}, "build the optimizer over the model's parameters (stage 3 steps their shards)"));
        const auto& p = *it->second;
        if (auto s = st.find(ps[i].unsafeGetTensorImpl()); s != st.end()) {
          auto state = std::move(s->second);
          st.erase(s);
          map_state_tensors(*state, [&](const torch::Tensor& t) {
            return t.sizes() == p.full.sizes() ? dim0_piece(t, rank_, world_).clone() : t;
          });
          st[p.shard.unsafeGetTensorImpl()] = std::move(state);
        }
        ps[i] = p.shard;
      }
    }
  }

  /// Whether a backward reduces the gradients (a window's last micro-step).
  void set_sync(bool on) { *sync_ = on; }

  /// Before a forward: the root's parameters gathered; the units freed the first time (until then they hold the
  /// values the start check hashed).
  void begin_forward(bool training) {
    if (!attached_) return;
    if (!freed_) {
      for (auto& g : units_) g->reshard();
      freed_ = true;
    }
    use_compute_dtype(true);
    if (training) plan_->next_step();
    root_->pre_forward(training);
  }

  /// After the backward: every unit whose post-backward hook did not run (its input needed no gradient: the first
  /// unit, an embedding), in the reverse of the model's order, then the root.
  void end_backward() {
    for (auto it = units_.rbegin(); it != units_.rend(); ++it)
      if ((*it)->pending()) (*it)->post_backward();
    root_->post_backward(/*keep=*/!*sync_);
  }

  /// After an optimizer step (the shards changed) or a save: every group freed, gathered again when used.
  void reshard_all() {
    for (auto* g : all()) g->reshard();
    freed_ = true;
  }
  /// Every group gathered (a save, fit end: the module holds the full weights on every rank).
  void unshard_all() {
    use_compute_dtype(false);
    for (auto* g : all()) g->unshard();
  }

  /// Mixed precision (ShardingOptions::mp_policy) for every group; call after build(), before the first forward.
  void set_mixed_precision(const MixedPrecisionPolicy& mp) {
    for (auto* g : all()) g->set_mixed_precision(mp);
  }
  /// Mixed precision: every group's module tensors in param_dtype (`compute`: the forward, the backward) or in the
  /// shards' dtype (a save, fit end: the module holds the fp32 masters' values), freed where they change dtype.
  void use_compute_dtype(bool compute) {
    for (auto* g : all()) g->use_compute_dtype(compute);
  }

  /// Between fit begin and fit end: the units gather and free; outside, the model is whole and the units call
  /// their inner modules directly (an evaluation after fit must not free what it gathers).
  void attach(bool on) {
    for (auto& [name, u] : units_found_) u->set_shard_group(nullptr);
    if (on)
      for (size_t i = 0; i < units_found_.size(); ++i) units_found_[i].second->set_shard_group(units_[i]);
    attached_ = on;
  }
  bool attached() const { return attached_; }

  /// Before a checkpoint serialises the model and the optimizer (a collective): every group gathered, and the
  /// optimizer lists the module's parameters with each state tensor all-gathered to the parameter's shape, as an
  /// unsharded run's optimizer would hold it. restore() undoes it.
  template <class Optimizer>
  void consolidate(Optimizer& opt) {
    was_unsharded_.clear();
    for (auto* g : all()) was_unsharded_.push_back(g->unsharded());
    unshard_all();
    swap_lists(opt, /*to_full=*/true);
    kept_.clear();
    auto& st = opt.state();
    for (auto* g : all())
      for (auto& p : g->params()) {
        auto it = st.find(p.shard.unsafeGetTensorImpl());
        if (it == st.end()) continue;
        auto whole = it->second->clone();
        map_state_tensors(*whole, [&](const torch::Tensor& t) { return gather_rows(*g, p, t); });
        kept_.emplace_back(p.shard.unsafeGetTensorImpl(), std::move(it->second));
        st.erase(it);
        st[p.full.unsafeGetTensorImpl()] = std::move(whole);
      }
  }
  /// After the checkpoint serialised them: the shards and their own state back in the optimizer, and the groups
  /// that were freed before the save freed again.
  template <class Optimizer>
  void restore(Optimizer& opt) {
    auto& st = opt.state();
    for (auto* g : all())
      for (auto& p : g->params()) st.erase(p.full.unsafeGetTensorImpl());
    for (auto& [key, state] : kept_) st[key] = std::move(state);
    kept_.clear();
    swap_lists(opt, /*to_full=*/false);
    const auto groups = all();
    for (size_t i = 0; i < groups.size() && i < was_unsharded_.size(); ++i)
      if (!was_unsharded_[i]) groups[i]->reshard();
  }

  /// Every group that is gathered now gathers again (the shards changed outside a step); in the model's order, the
  /// root last, on every rank alike (a collective).
  void regather() {
    for (auto* g : all())
      if (g->unsharded()) {
        g->reshard();
        g->unshard();
      }
  }

  /// All-gathers `rows` (this rank's rows of the module's parameter `full`, in its shard's shape) into `full`'s
  /// shape (a collective). Throws std::invalid_argument for a tensor no group holds, or rows of another shape.
  torch::Tensor gather_like(const torch::Tensor& full, const torch::Tensor& rows) {
    auto it = by_impl_.find(full.unsafeGetTensorImpl());
    if (it == by_impl_.end() || rows.sizes() != it->second->shard.sizes())
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::parallel::ShardedDataParallel",
          policytrain::detail::format("stage 3: rows of shape {} to gather for a tensor of shape {} that {}", rows.sizes(),
                                      full.sizes(), it == by_impl_.end() ? "is no sharded parameter" : "has shards of another shape"),
          {}, "pass a parameter of the model and a tensor of its shard's shape"));
    return root_->gather_rows(*it->second, rows);
  }

  /// Bytes of the shards this rank keeps (parameters).
  int64_t shard_bytes() const {
    int64_t n = 0;
    for (const auto* g : all_const())
      for (const auto& p : g->params()) n += p.shard.numel() * static_cast<int64_t>(p.shard.element_size());
    return n;
  }

 private:
  /// All-gathers `t`, rank by rank `p`'s rows on dim 0 (this rank's piece), into the parameter's whole shape.
  static torch::Tensor gather_rows(ShardGroup& g, const ShardedParam& p, const torch::Tensor& t) {
    if (t.dim() == 0 || t.sizes() != p.shard.sizes()) return t.clone();  // not per row (a step count)
    return g.gather_rows(p, t);
  }

  /// The optimizer's lists: the module's parameters (`to_full`) or their shards.
  template <class Optimizer>
  void swap_lists(Optimizer& opt, bool to_full) {
    std::unordered_map<const void*, ShardedParam*> by_shard;
    for (auto* g : all())
      for (auto& p : g->params()) by_shard[p.shard.unsafeGetTensorImpl()] = &p;
    for (auto& group : opt.param_groups())
      for (auto& t : group.params()) {
        if (to_full) {
          auto it = by_shard.find(t.unsafeGetTensorImpl());
          if (it != by_shard.end()) t = it->second->full;
        } else {
          auto it = by_impl_.find(t.unsafeGetTensorImpl());
          if (it != by_impl_.end()) t = it->second->shard;
        }
      }
  }

  std::vector<ShardGroup*> all() {
    std::vector<ShardGroup*> v;
    for (auto& g : units_) v.push_back(g.get());
    if (root_) v.push_back(root_.get());
    return v;
  }
  std::vector<const ShardGroup*> all_const() const {
    std::vector<const ShardGroup*> v;
    for (const auto& g : units_) v.push_back(g.get());
    if (root_) v.push_back(root_.get());
    return v;
  }

  [[noreturn]] static void refuse_tied(const std::pair<int, std::string>& a, const std::pair<int, std::string>& b,
                                       const std::vector<std::pair<std::string, FullyShardedUnit*>>& found) {
    const auto where = [&](const std::pair<int, std::string>& x) {
      return x.first < 0 ? policytrain::detail::format("'{}' (the root: no unit)", x.second)
                         : policytrain::detail::format("'{}' (unit '{}')", x.second, found[static_cast<size_t>(x.first)].first);
    };
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::ShardedDataParallel",
        policytrain::detail::format("stage 3: one tensor is the parameter {} and {}: weights tied across units "
                                    "would be gathered and freed by each", where(a), where(b)),
        {}, "put both modules in one unit (a FullyShard around their common parent), or untie them"));
  }

  std::shared_ptr<bool> sync_;
  std::shared_ptr<PrefetchPlan> plan_;
  std::vector<std::shared_ptr<ShardGroup>> units_;
  std::shared_ptr<ShardGroup> root_;
  std::vector<std::pair<std::string, FullyShardedUnit*>> units_found_;
  std::unordered_map<const void*, ShardedParam*> by_impl_;
  bool freed_ = false;
  bool attached_ = false;
  int64_t rank_ = 0, world_ = 1;
  std::vector<bool> was_unsharded_;  ///< consolidate(): which groups were gathered before the save
  std::vector<std::pair<void*, std::unique_ptr<torch::optim::OptimizerParamState>>> kept_;  ///< the shards' state during a save
};

}  // namespace policytrain::parallel::detail
