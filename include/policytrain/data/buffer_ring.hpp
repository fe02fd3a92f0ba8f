#pragma once
/// \file
/// data::detail::BufferRing: the host buffers data::PrefetchLoader assembles batches into, reused across batches and
/// epochs (pinned on CUDA). Part of <policytrain/data/prefetch_loader.hpp>.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <torch/types.h>

#include <policytrain/core/batch.hpp>

namespace policytrain::data {

namespace detail {

/// The host buffers batches are assembled into, reused across batches and epochs. acquire() hands out tensors
/// that alias a free buffer pair (torch::from_blob with a deleter): the pair is free again when both tensors and
/// every view of them are gone (the consumer has dropped the batch; the deleter takes the ring's mutex, so the
/// consumer's reads happen before the next writes) and no copy that reads it is pending (on CUDA: the copy to the
/// device; `pending()` marks it, `poll()` clears what has finished). Thread-safe; the buffers outlive the ring while
/// a batch still aliases them. Buffers of another shape (the short last batch) are separate buffers.
/// Only `poll()` calls a pending copy's `done` (on CUDA an event query): the consumer calls it, so the workers that
/// call acquire() make no CUDA call (they would contend with the training thread's launches for the driver).
class BufferRing {
 public:
  explicit BufferRing(bool pinned = false) : st_(std::make_shared<State>()) { st_->pinned = pinned; }
  /// A batch of these shapes and dtypes in a free (or a new) pair of buffers.
  Batch acquire(const torch::Tensor& x, const torch::Tensor& y, int64_t n) {
    auto xs = x.sizes().vec();
    xs[0] = n;
    std::lock_guard lk(st_->m);
    size_t i = 0;
    for (; i < st_->entries.size(); ++i) {
      const auto& e = st_->entries[i];
      if (e.holds == 0 && !e.done && e.buffers.x.sizes() == c10::IntArrayRef(xs)) break;
    }
    if (i == st_->entries.size()) {
      st_->entries.push_back(Entry{Batch{torch::empty(xs, x.options().pinned_memory(st_->pinned)),
                                         torch::empty({n}, y.options().pinned_memory(st_->pinned))}});
    } else {
      ++st_->reused;
    }
    auto& e = st_->entries[i];
    e.holds = 2;
    auto release = [st = st_, i](void*) {
      std::lock_guard g(st->m);
      --st->entries[i].holds;
    };
    return Batch{torch::from_blob(e.buffers.x.data_ptr(), e.buffers.x.sizes(), release, e.buffers.x.options()),
                 torch::from_blob(e.buffers.y.data_ptr(), e.buffers.y.sizes(), release, e.buffers.y.options())};
  }
  /// Marks the buffers of `b` as read by a copy that has finished once `done()` returns true (checked by poll()).
  void pending(const Batch& b, std::function<bool()> done) {
    std::lock_guard lk(st_->m);
    for (auto& e : st_->entries)
      if (e.buffers.x.data_ptr() == b.x.data_ptr()) e.done = std::move(done);
  }
  /// Frees the buffers whose pending copy has finished; returns how many copies are still pending.
  int64_t poll() {
    std::lock_guard lk(st_->m);
    int64_t left = 0;
    for (auto& e : st_->entries) {
      if (!e.done) continue;
      if (e.done()) e.done = nullptr;
      else ++left;
    }
    return left;
  }
  /// Buffer pairs allocated since construction.
  int64_t allocated() const {
    std::lock_guard lk(st_->m);
    return static_cast<int64_t>(st_->entries.size());
  }
  /// Times a buffer pair was taken again instead of allocating one.
  int64_t reused() const {
    std::lock_guard lk(st_->m);
    return st_->reused;
  }

 private:
  struct Entry {
    Batch buffers;
    int holds = 0;               // tensors handed out that alias the pair (0: free once no copy is pending)
    std::function<bool()> done{};  // set while a copy that reads the pair may be running
  };
  struct State {
    std::mutex m;
    std::deque<Entry> entries;  // a deque: entries never move, the deleters name them by index
    int64_t reused = 0;
    bool pinned = false;
  };
  std::shared_ptr<State> st_;
};

}  // namespace detail

}  // namespace policytrain::data
