#pragma once
/// \file
/// data::PrefetchLoader — batches of an in-memory (inputs, targets) pair, assembled and augmented on worker
/// threads ahead of the training step, in exactly the order of TensorLoader.
///
/// - Order: the batch indices come from a TensorLoader with the same LoaderOptions, so the (seed, epoch, rank,
///   world_size) permutation and the data-parallel sharding are TensorLoader's. Workers only assemble batch i;
///   its augmentation draws from an RNG seeded with (seed, epoch, i), never from a shared generator, so a run
///   gives the same batches with 0, 1 or N workers.
/// - Workers are persistent (started once, kept across epochs); `prefetch` batches per worker are in flight or
///   ready ahead of the consumer, as PyTorch's prefetch_factor.
/// - Assembly uses plain loops over the pixels (no ATen op per sample), so workers do not compete with the
///   training thread for LibTorch's intra-op thread pool.
/// - Exact resume: the iterator can be advanced without touching a batch (`++it` without `*it`), and no batch
///   before the first one read is assembled. Reading batch i after skipping restarts the workers at i.
/// - Buffers: batches are assembled into a ring of host buffers that is reused across the epoch (a buffer is
///   taken again once every tensor aliasing it is gone and, on CUDA, its last copy to the device has finished), so a pass
///   allocates no memory per batch once the ring is full (`buffers_allocated()` counts the ring's buffers).
/// - On CUDA (`POLICYTRAIN_WITH_CUDA`, `device` set to a CUDA device): the ring's buffers are pinned, allocated
///   once, and workers make no CUDA call (the training thread alone queries the copies' events, reused from a
///   pool). Reading batch i, the training thread copies batch i+1, if it is assembled, with a non-blocking copy on
///   a side stream into device memory allocated on that stream, then record_stream when it hands the batch out
///   (PyTorch's pinned-memory prefetcher pattern), so the copy overlaps step i and waits for nothing the step
///   queued; channels-last conversion runs on the device. Without workers it assembles batch i+1 itself first.
///   (The first version allocated a pinned batch per step, and waited for batch i+1 before returning batch i: on
///   an H200 it ran at 0.62x to 0.75x a plain TensorLoader; copies issued by the workers then ran at 0.82x to
///   0.96x; the training thread's copies into memory allocated on its own stream, with the workers still
///   querying events, 0.84x to 0.87x, bench/RESULTS.md.)
/// Interface the Trainer uses: a range of policytrain::Batch, size(), set_epoch(e). One pass at a time: a new
/// begin() (or set_epoch) ends the previous pass.
/// Cost when unused: none (a separate class; TensorLoader is unchanged).
#include <algorithm>
#include <atomic>
#include <concepts>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <torch/data/example.h>
#include <torch/types.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/data/batch_assembly.hpp>
#include <policytrain/data/buffer_ring.hpp>
#include <policytrain/data/dataset_source.hpp>
#include <policytrain/data/loader.hpp>
#include <policytrain/data/prefetch_options.hpp>
#include <policytrain/detail/format.hpp>

#ifdef POLICYTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace policytrain::data {

/// Batches of an in-memory (inputs, targets) pair assembled on worker threads, in TensorLoader's order (see the file comment).
class PrefetchLoader {
 public:
  /// Throws std::invalid_argument for workers < 0, prefetch < 1, or a normalise std that is not > 0.
  PrefetchLoader(torch::Tensor x, torch::Tensor y, LoaderOptions lo = {}, PrefetchOptions po = {})
      : x_(x.contiguous()), y_(y.contiguous()), order_(x_, y_, lo), po_(po) {
    if (po_.workers < 0 || po_.prefetch < 1)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::PrefetchLoader",
          policytrain::detail::format("workers {} and prefetch {}; expected workers >= 0 and prefetch >= 1",
                                      po_.workers, po_.prefetch)));
    check_options();
  }

  /// Samples of a map-style dataset (anything with `get(size_t)` returning a torch::data::Example<> and `size()`,
  /// e.g. data::ImageFolder or a torch::data::datasets::Dataset), read by `get` in the loader's workers (for an
  /// ImageFolder: the files are decoded there), then normalised, augmented and transformed as in-memory images,
  /// in TensorLoader's order over `size()` samples. Every sample must have the shape and dtype of sample 0 (read
  /// once here, for the shapes) and a target of one value. `get` must be safe to call from several threads at once
  /// (ImageFolder's is).
  template <class Dataset>
    requires requires(Dataset& d, size_t i) {
      { d.get(i) } -> std::convertible_to<torch::data::Example<>>;
      d.size();
    }
  explicit PrefetchLoader(Dataset dataset, LoaderOptions lo = {}, PrefetchOptions po = {})
      : PrefetchLoader(detail::dataset_source(std::make_shared<Dataset>(std::move(dataset))), lo, std::move(po)) {}
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;
  ~PrefetchLoader() { stop_workers(); }

  /// Reshuffles for `epoch`; ends any pass in progress.
  void set_epoch(int64_t epoch) {
    std::lock_guard lk(m_);
    ++generation_;
    order_.set_epoch(epoch);
    reset_locked();
  }
  /// An elastic resume (docs/parallel.md, "Elastic restarts"): re-shards the current epoch after the `done`
  /// samples of its global order that a run of another world size trained (TensorLoader::reshard_after, whose
  /// refusal it passes on); ends any pass in progress. Returns the prefix's batches on this rank.
  int64_t reshard_after(int64_t done) {
    std::lock_guard lk(m_);
    ++generation_;
    const int64_t k = order_.reshard_after(done);
    reset_locked();
    return k;
  }
  /// The current epoch.
  int64_t epoch() const { return order_.epoch(); }
  /// Batches per epoch.
  size_t size() const { return order_.size(); }
  /// Samples this rank sees per epoch.
  int64_t num_samples() const { return order_.num_samples(); }
  /// The repeated samples that pad this rank's shard (TensorLoader::padding).
  int64_t padding() const { return order_.padding(); }
  /// The loader options (order, sharding, batch size).
  const LoaderOptions& options() const { return order_.options(); }
  /// The prefetch options.
  const PrefetchOptions& prefetch_options() const { return po_; }
  /// The underlying order (TensorLoader with the same options).
  const TensorLoader& order() const { return order_; }
  /// Batches assembled since construction (skipped batches are not assembled).
  int64_t assembled() const { return assembled_.load(); }
  /// Worker threads started since construction (they persist across epochs, so at most `workers`).
  int64_t threads_started() const { return threads_started_; }
  /// Host buffers (input and target pairs) allocated since construction: the ring grows to the batches in flight
  /// (about workers x prefetch + 2, one more for a short last batch) and is then reused, epoch after epoch.
  int64_t buffers_allocated() const { return ring_->allocated(); }
  /// Batches assembled into a buffer that was already allocated.
  int64_t buffers_reused() const { return ring_->reused(); }

  /// Batch `i` of the current epoch, assembled on the calling thread (what a worker computes) into new tensors.
  Batch assemble(size_t i) const {
    const auto idx = order_.indices(i);
    auto xs = x_.sizes().vec();
    xs[0] = idx.size(0);
    Batch b{torch::empty(xs, x_.options().pinned_memory(pinned())),
            torch::empty({idx.size(0)}, y_.options().pinned_memory(pinned()))};
    assemble_host(b, idx, order_.options().seed, order_.epoch(), static_cast<int64_t>(i));
    if (po_.channels_last && b.x.dim() == 4) b.x = b.x.contiguous(at::MemoryFormat::ChannelsLast);
    return b;
  }

  /// Input iterator over the batches of a pass; `*it` waits for a batch, `++it` skips without assembling.
  class iterator {
   public:
    /// Batch.
    using value_type = Batch;
    /// Signed batch count.
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    /// At batch `i` of `l`'s pass.
    iterator(PrefetchLoader* l, size_t i) : l_(l), i_(i) {}
    /// Waits for batch i (assembling it here when there are no workers).
    Batch operator*() const { return l_->take(i_); }
    /// Next batch.
    iterator& operator++() { ++i_; return *this; }
    /// Next batch (postfix).
    iterator operator++(int) { auto t = *this; ++i_; return t; }
    /// Skips n batches without assembling them.
    iterator& operator+=(difference_type n) { i_ += static_cast<size_t>(n); return *this; }
    /// Same batch position.
    bool operator==(const iterator& o) const { return i_ == o.i_; }
    /// Index of the batch in the epoch.
    size_t index() const { return i_; }
   private:
    PrefetchLoader* l_ = nullptr;
    size_t i_ = 0;
  };
  /// Starts a pass over the current epoch. Nothing is assembled until a batch is read.
  iterator begin() {
    {
      std::lock_guard lk(m_);
      ++generation_;
      reset_locked();
    }
    return {this, 0};
  }
  /// Past the last batch of the epoch.
  iterator end() { return {this, size()}; }

 private:
  PrefetchLoader(detail::DatasetSource src, LoaderOptions lo, PrefetchOptions po)
      : x_(src.x), y_(src.y), order_(x_, y_, lo), po_(std::move(po)), get_(std::move(src.get)) {
    check_options();
  }
  void check_options() {
    if (po_.workers < 0 || po_.prefetch < 1)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::PrefetchLoader",
          policytrain::detail::format("workers {} and prefetch {}; expected workers >= 0 and prefetch >= 1",
                                      po_.workers, po_.prefetch)));
    const auto& nm = po_.normalize;
    if (nm.enabled) {
      std::vector<float> stds = nm.channel_std;
      if (stds.empty()) stds.push_back(nm.std);
      for (float s : stds)
        if (!(s > 0))
          throw std::invalid_argument(
              policytrain::detail::error_message("policytrain::data::PrefetchLoader",
                                                 policytrain::detail::format("normalise std is {}, expected > 0", s)));
      const int64_t c = x_.dim() == 4 ? x_.size(1) : -1;
      if ((!nm.channel_mean.empty() && static_cast<int64_t>(nm.channel_mean.size()) != c) ||
          (!nm.channel_std.empty() && static_cast<int64_t>(nm.channel_std.size()) != c))
        throw std::invalid_argument(policytrain::detail::error_message(
            "policytrain::data::PrefetchLoader",
            policytrain::detail::format(
                "normalise has {} channel means and {} channel stds for inputs {}; "
                "expected one per channel of [N, C, H, W] images (or none: then mean and std apply to every channel)",
                nm.channel_mean.size(), nm.channel_std.size(), c10::str(x_.sizes()))));
    }
#ifdef POLICYTRAIN_WITH_CUDA
    cuda_ = po_.device.is_cuda();
    ring_ = std::make_unique<detail::BufferRing>(cuda_ && po_.pin_memory);
#endif
  }

  // Assembles batch `index` (sample indices idx) into `out`: from the tensors, or from the dataset's samples.
  void assemble_host(Batch& out, const torch::Tensor& idx, uint64_t seed, int64_t epoch, int64_t index) const {
    if (!get_) {
      assemble_into(out, x_, y_, idx, po_, seed, epoch, index);
      return;
    }
    const int64_t n = idx.size(0);
    const auto idxc = idx.contiguous();
    const auto* ip = idxc.data_ptr<int64_t>();
    const auto shape = x_.sizes().slice(1);
    std::vector<torch::Tensor> xs(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      auto ex = get_(static_cast<size_t>(ip[j]));
      if (!ex.data.defined() || ex.data.sizes() != shape || ex.data.scalar_type() != x_.scalar_type() ||
          !ex.target.defined() || ex.target.numel() != 1)
        throw std::invalid_argument(policytrain::detail::error_message(
            "policytrain::data::PrefetchLoader",
            policytrain::detail::format(
                "sample {} of the dataset has an input {} of {} and a target of {} "
                "values; expected an input {} of {} (sample 0's) and one target value",
                ip[j], ex.data.defined() ? c10::str(ex.data.sizes()) : std::string("(undefined)"),
                ex.data.defined() ? c10::toString(ex.data.scalar_type()) : "-",
                ex.target.defined() ? ex.target.numel() : 0, c10::str(shape), c10::toString(x_.scalar_type()))));
      xs[static_cast<size_t>(j)] = ex.data.contiguous();
      out.y[j].copy_(ex.target.reshape({}));
    }
    if (po_.augment.enabled || po_.normalize.enabled) {
      if (x_.dim() != 4 || x_.scalar_type() != torch::kFloat)
        throw std::invalid_argument(policytrain::detail::error_message(
            "policytrain::data::PrefetchLoader",
            policytrain::detail::format("augmentation and normalisation need float image samples [C, H, W], "
                                        "got {} of {}; disable them or convert the samples",
                                        c10::str(shape), c10::toString(x_.scalar_type()))));
      detail::transform_images(out, [&](int64_t j) { return xs[static_cast<size_t>(j)].data_ptr<float>(); },
                               x_.size(1), x_.size(2), x_.size(3), po_, seed, epoch, index);
    } else {
      const auto bytes = static_cast<size_t>(xs.empty() ? 0 : xs[0].numel() * xs[0].element_size());
      auto* dst = static_cast<char*>(out.x.data_ptr());
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(dst + static_cast<size_t>(j) * bytes, xs[static_cast<size_t>(j)].data_ptr(), bytes);
    }
    detail::apply_transform(out, po_, seed, epoch, index);
  }

  bool cuda() const {
#ifdef POLICYTRAIN_WITH_CUDA
    return cuda_;
#else
    return false;
#endif
  }
  bool pinned() const {
#ifdef POLICYTRAIN_WITH_CUDA
    return cuda_ && po_.pin_memory;
#else
    return false;
#endif
  }

  // A batch assembled on the host, or the error its assembly threw (then `batch` is empty). Not an
  // std::optional<Batch>: GCC 12 at -O3 warned that moving one out of ready_ (fetch) may read its tensors
  // uninitialized (-Wmaybe-uninitialized, a known false positive of optional's payload), in a translation unit that
  // includes this header without a precompiled header (a user's; the examples' precompiled header hid it).
  struct Slot {
    Batch batch;
    std::exception_ptr error;
  };

  // Assembles batch i of `epoch` into a buffer of the ring (pinned on CUDA). Runs on a worker, or on the
  // consumer without workers; makes no CUDA call (the consumer alone does: a worker's CUDA calls would contend
  // with the training thread's kernel launches for the driver).
  Slot produce(const torch::Tensor& idx, uint64_t seed, int64_t epoch, int64_t i) {
    Slot s;
    Batch host = ring_->acquire(x_, y_, idx.size(0));
    assemble_host(host, idx, seed, epoch, i);
    ++assembled_;
    // On CUDA the consumer copies the batch and converts it to channels-last on the device (take_cuda).
    if (po_.channels_last && host.x.dim() == 4 && !cuda())
      host.x = host.x.contiguous(at::MemoryFormat::ChannelsLast);
    s.batch = std::move(host);
    return s;
  }

  void reset_locked() {
    ready_.clear();
    next_ = -1;  // no pass running: workers idle until the first read
    want_ = 0;
#ifdef POLICYTRAIN_WITH_CUDA
    staged_.reset();
#endif
    cv_work_.notify_all();
  }

  void start_workers() {
    if (!threads_.empty() || po_.workers == 0) return;
    for (int64_t w = 0; w < po_.workers; ++w) threads_.emplace_back([this] { worker_loop(); });
    threads_started_ += po_.workers;
  }
  void stop_workers() {
    {
      std::lock_guard lk(m_);
      stopping_ = true;
    }
    cv_work_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  // Batches the workers may start: up to want_ + workers * prefetch - 1.
  int64_t window_end() const { return want_ + po_.workers * po_.prefetch; }

  void worker_loop() {
    // Assembly is plain loops and memcpy; a worker never enters the intra-op pool, so no thread setting is needed.
    std::unique_lock lk(m_);
    for (;;) {
      cv_work_.wait(lk, [&] {
        return stopping_ || (next_ >= 0 && next_ < static_cast<int64_t>(order_.size()) && next_ < window_end());
      });
      if (stopping_) return;
      const int64_t i = next_++;
      const uint64_t gen = generation_;
      auto idx = order_.indices(static_cast<size_t>(i));
      const uint64_t seed = order_.options().seed;
      const int64_t epoch = order_.epoch();
      lk.unlock();
      Slot s;
      try {
        s = produce(idx, seed, epoch, i);
      } catch (...) {
        s.error = std::current_exception();
      }
      lk.lock();
      if (gen != generation_ || i < want_) continue;  // its pass has ended, or the consumer skipped it
      ready_[i] = std::move(s);
      cv_ready_.notify_all();
    }
  }

  // Batch i from the workers (assembled here without workers). `wait` false: std::nullopt unless it is ready.
  std::optional<Slot> fetch(size_t i, bool wait = true) {
    if (po_.workers == 0) {
      Slot s;
      try {
        s = produce(order_.indices(i), order_.options().seed, order_.epoch(), static_cast<int64_t>(i));
      } catch (...) {
        s.error = std::current_exception();
      }
      return s;
    }
    start_workers();
    std::unique_lock lk(m_);
    const auto ii = static_cast<int64_t>(i);
    if (want_ != ii || next_ < 0) {
      // A jump (first read of the pass, or a skip): start over at i, dropping batches that will not be read.
      if (next_ < 0 || ii < want_ || ii >= next_) {
        ++generation_;
        ready_.clear();
        next_ = ii;
      } else {
        ready_.erase(ready_.begin(), ready_.lower_bound(ii));
      }
    }
    want_ = ii;
    cv_work_.notify_all();
    if (!wait && ready_.count(ii) == 0) return std::nullopt;
    cv_ready_.wait(lk, [&] { return ready_.count(ii) != 0; });
    Slot s = std::move(ready_[ii]);
    ready_.erase(ii);
    want_ = ii + 1;
    cv_work_.notify_all();
    return s;
  }

  Batch take(size_t i) {
    if (i >= size())
      throw std::out_of_range(policytrain::detail::error_message(
          "policytrain::data::PrefetchLoader",
          policytrain::detail::format("batch {} read, but the epoch has {}", i, size())));
#ifdef POLICYTRAIN_WITH_CUDA
    if (cuda_) return take_cuda(i);
#endif
    Slot s = *fetch(i);
    if (s.error) std::rethrow_exception(s.error);
    return std::move(s.batch);
  }

#ifdef POLICYTRAIN_WITH_CUDA
  struct Staged {
    size_t index = 0;
    Batch batch;                                   // on the device, allocated on the side stream
    std::shared_ptr<at::cuda::CUDAEvent> copied;   // recorded on the side stream after the copy
    std::exception_ptr error;                      // batch `index` failed to assemble
  };
  // An event from a pool that is reused once nothing else holds it (no cudaEventCreate/Destroy per batch).
  std::shared_ptr<at::cuda::CUDAEvent> pooled_event() {
    for (auto& e : events_)
      if (e.use_count() == 1) return e;
    events_.push_back(std::make_shared<at::cuda::CUDAEvent>());
    return events_.back();
  }
  // Copies a host batch to the device: on the side stream (`side`: the copy of the next batch overlaps this step),
  // or on the consumer stream. On the side stream the device tensors are allocated there and the consumer later
  // calls record_stream (take_cuda), as PyTorch's pinned-memory prefetchers do, so the copy waits for nothing the
  // consumer has queued. The host buffers are free again once the copy has finished (the ring's poll(), run here,
  // on the training thread).
  Batch upload(const Batch& host, std::shared_ptr<at::cuda::CUDAEvent>& copied, bool side) {
    c10::cuda::CUDAGuard device_guard(po_.device);
    copied = pooled_event();
    auto stream = c10::cuda::getCurrentCUDAStream(po_.device.index());
    if (side) {
      if (!side_) side_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, po_.device.index());
      stream = *side_;
    }
    c10::cuda::CUDAStreamGuard stream_guard(stream);
    Batch dev{torch::empty(host.x.sizes(), host.x.options().device(po_.device)),
              torch::empty(host.y.sizes(), host.y.options().device(po_.device))};
    dev.x.copy_(host.x, /*non_blocking=*/true);
    dev.y.copy_(host.y, /*non_blocking=*/true);
    copied->record(stream);
    ring_->pending(host, [ev = copied] { return ev->query(); });
    return dev;
  }
  Batch take_cuda(size_t i) {
    ring_->poll();  // frees the host buffers whose copies have finished (the only event queries)
    Batch dev;
    if (staged_ && staged_->index == i) {
      if (staged_->error) {
        auto e = staged_->error;
        staged_.reset();
        std::rethrow_exception(e);
      }
      auto consumer = c10::cuda::getCurrentCUDAStream(po_.device.index());
      staged_->copied->block(consumer);
      dev = std::move(staged_->batch);
      // Allocated on the side stream, used on the consumer's: the allocator reuses the memory only after the
      // consumer's work queued so far (and up to the tensors' release) has finished.
      dev.x.record_stream(consumer);
      dev.y.record_stream(consumer);
    } else {
      Slot s = *fetch(i);
      if (s.error) std::rethrow_exception(s.error);
      std::shared_ptr<at::cuda::CUDAEvent> copied;
      dev = upload(s.batch, copied, /*side=*/false);
    }
    staged_.reset();
    // The next batch, copied now on the side stream if it is ready (with workers it almost always is; else it
    // is copied when read), or assembled here and copied (no workers).
    if (po_.side_stream && i + 1 < size()) {
      if (auto next = fetch(i + 1, /*wait=*/po_.workers == 0)) {
        Staged st;
        st.index = i + 1;
        if (next->error) st.error = next->error;
        else st.batch = upload(next->batch, st.copied, /*side=*/true);
        staged_ = std::move(st);
      }
    }
    if (po_.channels_last && dev.x.dim() == 4) dev.x = dev.x.contiguous(at::MemoryFormat::ChannelsLast);
    return dev;
  }
  std::vector<std::shared_ptr<at::cuda::CUDAEvent>> events_;  // the copies' events, reused
  std::optional<c10::cuda::CUDAStream> side_;
  std::optional<Staged> staged_;  // the next batch, already on its way to the device
#endif

#ifdef POLICYTRAIN_WITH_CUDA
  bool cuda_ = false;
#endif
  torch::Tensor x_, y_;
  TensorLoader order_;
  PrefetchOptions po_;
  std::function<torch::data::Example<>(size_t)> get_{};  // a dataset's samples (empty: x_ and y_ hold the data)
  std::unique_ptr<detail::BufferRing> ring_ = std::make_unique<detail::BufferRing>();
  std::mutex m_;
  std::condition_variable cv_work_, cv_ready_;
  std::vector<std::thread> threads_;
  std::map<int64_t, Slot> ready_;
  int64_t next_ = -1;   // next batch a worker starts (-1: idle)
  int64_t want_ = 0;    // next batch the consumer reads
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::atomic<int64_t> assembled_{0};
  int64_t threads_started_ = 0;
};

}  // namespace policytrain::data
