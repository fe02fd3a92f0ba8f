#pragma once
/// \file
/// TensorLoader: batches of an in-memory (inputs, targets) pair, shuffled by a seed and the epoch, optionally
/// sharded across data-parallel ranks (each rank a disjoint shard of equal size, as PyTorch's DistributedSampler).
/// The order depends only on (seed, epoch, rank, world size): the same run gives the same batches.
#include <cstdint>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>
#include <torch/types.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// How a TensorLoader batches, orders and shards its samples.
struct LoaderOptions {
  /// Samples per batch.
  int64_t batch_size = 64;
  /// Reorder the samples every epoch (from the seed and the epoch).
  bool shuffle = true;
  /// Seed of the order.
  uint64_t seed = 0;
  bool drop_last = false;   ///< drop a last batch smaller than batch_size
  int64_t rank = 0;         ///< this process's shard
  int64_t world_size = 1;   ///< number of shards; the index list is padded by wrapping so all shards are equal
};

/// Batches of an in-memory (inputs, targets) pair; see the file's description.
class TensorLoader {
 public:
  /// Batches of inputs `x` and targets `y` (same first dimension); throws std::invalid_argument on bad options.
  TensorLoader(torch::Tensor x, torch::Tensor y, LoaderOptions o = {});

  /// Reshuffles for `epoch` (the Trainer calls it at the start of every epoch).
  void set_epoch(int64_t epoch);

  /// An elastic resume (docs/parallel.md, "Elastic restarts"): the first `done` samples of this epoch's global
  /// order (the order before sharding, padded by wrapping) were trained by a run of another world size. Re-shards
  /// the current epoch in two parts, each split over this run's ranks as set_epoch splits a whole epoch: that
  /// prefix first, then the rest (padded by wrapping over the rest), so that passing over the prefix's batches
  /// resumes at the rest. Returns the prefix's batches on this rank; throws std::invalid_argument unless `done` is
  /// a whole number of this run's global batches (batch_size × world_size).
  int64_t reshard_after(int64_t done);

  /// The epoch of the current order.
  int64_t epoch() const { return epoch_; }
  /// Samples this rank sees per epoch.
  int64_t num_samples() const { return order_.size(0); }
  /// Of them, the repeated samples at the end of this rank's shard that pad it to the others' length
  /// (Trainer::evaluate leaves them out).
  int64_t padding() const { return padding_; }
  /// Batches per epoch.
  size_t size() const {
    const int64_t n = num_samples();
    return static_cast<size_t>(o_.drop_last ? n / o_.batch_size : (n + o_.batch_size - 1) / o_.batch_size);
  }
  /// The options it was built with.
  const LoaderOptions& options() const { return o_; }
  /// The sample indices of batch i of the current epoch.
  torch::Tensor indices(size_t i) const {
    const int64_t b = o_.batch_size;
    return order_.slice(0, static_cast<int64_t>(i) * b, std::min<int64_t>((static_cast<int64_t>(i) + 1) * b, num_samples()));
  }
  /// Batch i of the current epoch.
  Batch batch(size_t i) const {
    auto idx = indices(i);
    return {x_.index_select(0, idx), y_.index_select(0, idx)};
  }

  /// Input iterator over the batches of the current epoch.
  class iterator {
   public:
    /// What std::input_iterator requires.
    ///@{
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const TensorLoader* l, size_t i) : l_(l), i_(i) {}
    Batch operator*() const { return l_->batch(i_); }
    iterator& operator++() { ++i_; return *this; }
    iterator operator++(int) { auto t = *this; ++i_; return t; }
    bool operator==(const iterator& o) const { return i_ == o.i_; }
    ///@}
   private:
    const TensorLoader* l_ = nullptr;
    size_t i_ = 0;
  };
  /// The batches of the current epoch, in order.
  ///@{
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }
  ///@}

 private:
  torch::Tensor x_, y_, order_;
  LoaderOptions o_;
  int64_t epoch_ = 0;
  int64_t padding_ = 0;

  /// The epoch's global order: every sample once, shuffled by (seed, epoch) or not.
  torch::Tensor global_order() const;
};

// TensorLoader's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL torch::Tensor TensorLoader::global_order() const {
  const int64_t n = x_.size(0);
  if (!o_.shuffle) return torch::arange(n, torch::kLong);
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(o_.seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch_ + 1));
  return torch::randperm(n, gen, torch::kLong);
}

POLICYTRAIN_DECL int64_t TensorLoader::reshard_after(int64_t done) {
  const int64_t n = x_.size(0), w = o_.world_size, global = o_.batch_size * o_.world_size;
  if (done < 0 || done % global != 0)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::TensorLoader",
        policytrain::detail::format("{} samples of epoch {} were trained before this resume, not a whole number of "
                                    "this run's global batches ({} = batch_size {} x world size {})",
                                    done, epoch_, global, o_.batch_size, w),
        "the global batch of the run that wrote the checkpoint",
        "set batch_size to that global batch / this world size, or resume from a checkpoint taken at an epoch end"));
  const auto all = global_order();
  // The first `done` positions of the global order padded by wrapping (a run can have trained into its padding).
  auto prefix = all.slice(0, 0, std::min(done, n));
  while (prefix.size(0) < done) prefix = torch::cat({prefix, all.slice(0, 0, std::min(n, done - prefix.size(0)))});
  auto rest = all.slice(0, std::min(done, n), n);
  const int64_t len = rest.size(0), per_rank = (len + w - 1) / w, total = per_rank * w;
  for (const auto base = rest; rest.size(0) < total;)
    rest = torch::cat({rest, base.slice(0, 0, std::min(len, total - rest.size(0)))});
  padding_ = 0;
  for (int64_t p = len; p < total; ++p) padding_ += p % w == o_.rank ? 1 : 0;
  order_ = torch::cat({prefix.slice(0, o_.rank, done, w), rest.slice(0, o_.rank, total, w)});
  return done / global;
}

POLICYTRAIN_DECL void TensorLoader::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  const int64_t n = x_.size(0);
  torch::Tensor order = global_order();
  if (o_.world_size > 1) {
    const int64_t per_rank = (n + o_.world_size - 1) / o_.world_size;
    const int64_t total = per_rank * o_.world_size;
    if (total > n) order = torch::cat({order, order.slice(0, 0, total - n)});
    order = order.slice(0, o_.rank, total, o_.world_size);
    // Positions n..total-1 of the padded list repeat samples; this rank holds those ≡ rank (mod world size),
    // at the end of its shard.
    padding_ = 0;
    for (int64_t p = n; p < total; ++p) padding_ += p % o_.world_size == o_.rank ? 1 : 0;
  }
  order_ = order;
}

POLICYTRAIN_DECL TensorLoader::TensorLoader(torch::Tensor x, torch::Tensor y, LoaderOptions o) : x_(std::move(x)), y_(std::move(y)), o_(o) {
  if (x_.size(0) != y_.size(0))
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::TensorLoader",
        policytrain::detail::format("{} inputs but {} targets", x_.size(0), y_.size(0))));
  if (o_.batch_size <= 0)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::TensorLoader",
        policytrain::detail::format("batch_size is {}, expected > 0", o_.batch_size)));
  if (o_.world_size <= 0 || o_.rank < 0 || o_.rank >= o_.world_size)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::TensorLoader",
        policytrain::detail::format("rank {} of world size {} is invalid", o_.rank, o_.world_size)));
  set_epoch(0);
}
#endif

}  // namespace policytrain::data
