#pragma once
/// \file
/// What every rank's copy of the model shares with the gradient synchronisations of parallel::DataParallel and
/// parallel::ShardedDataParallel (detail::ReducerSync, detail::Zero2Sync): the trainable parameters as a
/// synchronisation was built from them (detail::Replica, with the counters the policies expose), and the
/// broadcasts that make every replica rank 0's (broadcast_states, sync_buffers). Pieces that know no Trainer.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/types.h>

#include <policytrain/core/parameters.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/process_group.hpp>

namespace policytrain::parallel {

/// The trainable parameters as they are now (each tensor once: a tied weight has one gradient, one hook and
/// one slot in a bucket), their names, and whether each gets sparse gradients (the weight of an Embedding or
/// EmbeddingBag with sparse = true, as DDP's expect_sparse_gradient).
struct Trainable {
  std::vector<torch::Tensor> params;  ///< the trainable parameters, each tensor once
  std::vector<std::string> names;     ///< their names, in the same order
  std::vector<bool> sparse;           ///< whether each gets sparse gradients
};

/// The trainable parameters of `m` as they are now (see Trainable).
inline Trainable trainable(torch::nn::Module& m) {
  std::unordered_set<const void*> sparse_tables;
  for (const auto& item : m.named_modules()) {
    auto* mod = item.value().get();
    if (auto* e = dynamic_cast<torch::nn::EmbeddingImpl*>(mod); e && e->options.sparse())
      sparse_tables.insert(e->weight.unsafeGetTensorImpl());
    if (auto* b = dynamic_cast<torch::nn::EmbeddingBagImpl*>(mod); b && b->options.sparse())
      sparse_tables.insert(b->weight.unsafeGetTensorImpl());
  }
  Trainable t;
  for (auto& [name, p] : unique_named_parameters(m))
    if (p.requires_grad()) {
      t.sparse.push_back(sparse_tables.count(p.unsafeGetTensorImpl()) > 0);
      t.params.push_back(p);
      t.names.push_back(name);
    }
  return t;
}

/// Broadcasts rank 0's parameters and buffers to every rank (c10d::broadcast_coalesced, as DDP's
/// _sync_module_states). A collective; `group` is connected.
inline void broadcast_states(ProcessGroup& group, torch::nn::Module& m) {
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> state;
  for (auto& p : unique_parameters(m)) state.push_back(p.detach());
  for (auto& [name, b] : unique_named_buffers(m)) state.push_back(b.detach());
  group.broadcast_coalesced(state, 0, "broadcast of rank 0's parameters and buffers");
}

/// Broadcasts rank 0's buffers (BatchNorm statistics) to every rank, as DDP's buffer synchronisation. Returns
/// whether there were any (a collective then).
inline bool sync_buffers(ProcessGroup& group, torch::nn::Module& m) {
  std::vector<torch::Tensor> bufs;
  for (auto& b : m.buffers()) bufs.push_back(b.detach());
  if (bufs.empty()) return false;
  torch::NoGradGuard ng;
  group.broadcast_coalesced(bufs, 0, "broadcast of rank 0's buffers");
  return true;
}

namespace detail {

/// The trainable parameters a gradient synchronisation was built from and the counters both synchronisations
/// keep, shared with the autograd hooks (held by std::shared_ptr, so that the policy may be moved).
struct Replica {
  std::shared_ptr<ProcessGroup> group;
  std::vector<torch::Tensor> params;
  std::vector<std::string> names;             ///< the parameters' names in the module (for errors)
  std::vector<bool> sparse;                   ///< per parameter: its gradient is sparse
  std::vector<std::vector<int64_t>> strides;  ///< per parameter: its strides when the gradient sync was built
  bool synced = false;                        ///< this window's last backward synchronised the gradients
  int64_t step = 0;                           ///< optimizer steps synchronised so far
  // Counters, exposed by the policies.
  std::atomic<int64_t> allreduce_calls{0}, allreduce_calls_in_hooks{0}, allreduce_calls_last_step{0};
  std::atomic<int64_t> bytes_last_step{0};
  std::atomic<int64_t> last_launch_ns{0};
  double comm_wait_seconds = 0;
  int64_t generation = 0;  ///< parameter lists assign() has taken

  Replica() = default;
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;
  ~Replica() { release(); }

  std::string who() const { return group->who(); }

  /// Whether `t` is the list the synchronisation was built from (the same tensors, with the same strides).
  bool same_as(const Trainable& t) const {
    bool same = t.params.size() == params.size();
    for (size_t i = 0; same && i < t.params.size(); ++i)
      same = t.params[i].unsafeGetTensorImpl() == params[i].unsafeGetTensorImpl() &&
             t.params[i].strides().vec() == strides[i];
    return same;
  }

  /// Removes every autograd hook a synchronisation set on the parameters and forgets them.
  void release() {
    for (auto& p : params) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
    params.clear();
    names.clear();
    sparse.clear();
    strides.clear();
    synced = false;
  }

  /// Takes `t` as the parameter list (after release()).
  void assign(Trainable t) {
    params = std::move(t.params);
    names = std::move(t.names);
    sparse = std::move(t.sparse);
    for (const auto& p : params) strides.push_back(p.strides().vec());
    ++generation;
  }

  /// The wait the backward could not hide: from the last bucket's launch (its gradients were the last computed)
  /// to the backward's end.
  void count_wait() {
    const int64_t launched = last_launch_ns;
    if (launched > 0) comm_wait_seconds += std::max<double>(0.0, 1e-9 * static_cast<double>(now_ns() - launched));
  }

  /// The error for parameter `i`'s gradient accumulated twice in one synchronised backward, from `policy`, after
  /// `after` (what the first accumulation led to).
  [[noreturn]] void throw_ready_twice(size_t i, std::string_view policy, std::string_view after) const {
    throw std::runtime_error(policytrain::detail::error_message(
        policytrain::detail::format("policytrain::parallel::{}", policy),
        policytrain::detail::format(
            "{}: parameter '{}' (index {}) was marked ready twice in one backward (its "
            "gradient was accumulated again after {}): the parameter takes part in a reentrant backward (a reentrant "
            "activation checkpoint, or a backward inside a custom autograd function) or in two backward passes of one "
            "micro-step; use non-reentrant checkpointing, or a single backward per micro-step",
            who(), names[i], i, after)));
  }
};

}  // namespace detail

}  // namespace policytrain::parallel
