#pragma once
/// \file
/// detail::FullShard — stage 3 of parallel::ShardedDataParallel apart from the policy: finds the units
/// (parallel::FullyShard<M>) in a model, gives every parameter to the innermost unit that holds it (the root takes
/// what no unit claims, as `fully_shard(model)` on the root), refuses a tensor shared by two units (or by a unit and
/// the root), builds each unit's detail::ShardGroup and puts the shards in the optimizer's param groups in place of
/// the module's parameters (FSDP2 replaces the module's parameters by DTensor shards before the optimizer is
/// built; here the optimizer is the user's, built over module.parameters(), so its lists are rewritten once), and
/// runs what the policy's hooks ask of every group (the end of a backward, the step, a save, fit end).
/// It knows no Trainer.
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
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/fully_shard.hpp>
#include <policytrain/parallel/process_group.hpp>

namespace policytrain::parallel::detail {

/// Stage 3's units and their groups (see the file comment).
class FullShard {
 public:
  FullShard() : sync_(std::make_shared<bool>(true)) {}

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
      found[i].second->set_shard_group(g);
      units_.push_back(g);
    }
    root_ = std::make_shared<ShardGroup>("", group, sync_, /*reshard_after_forward=*/false);
    for (const auto& [name, t] : root_members) root_->add(name, t);
    for (auto* g : all())
      for (auto& p : g->params()) by_impl_[p.full.unsafeGetTensorImpl()] = &p;
    units_found_ = found;
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

  /// Puts the shards in `opt`'s param groups in place of the module's parameters (a shard already there stays).
  /// Throws std::invalid_argument naming a parameter of the optimizer that the model does not hold.
  template <class Optimizer>
  void swap_into(Optimizer& opt) {
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
        ps[i] = it->second->shard;
      }
    }
  }

  /// Whether a backward reduces the gradients (a window's last micro-step).
  void set_sync(bool on) { *sync_ = on; }

  /// Before a forward: the root's parameters gathered; the units freed the first time (until then they hold the
  /// values the start check hashed).
  void begin_forward(bool training) {
    if (!freed_) {
      for (auto& g : units_) g->reshard();
      freed_ = true;
    }
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
    for (auto* g : all()) g->unshard();
  }

  /// Bytes of the shards this rank keeps (parameters).
  int64_t shard_bytes() const {
    int64_t n = 0;
    for (const auto* g : all_const())
      for (const auto& p : g->params()) n += p.shard.numel() * static_cast<int64_t>(p.shard.element_size());
    return n;
  }

 private:
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
  std::vector<std::shared_ptr<ShardGroup>> units_;
  std::shared_ptr<ShardGroup> root_;
  std::vector<std::pair<std::string, FullyShardedUnit*>> units_found_;
  std::unordered_map<const void*, ShardedParam*> by_impl_;
  bool freed_ = false;
};

}  // namespace policytrain::parallel::detail
