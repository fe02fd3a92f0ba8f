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
  TensorLoader(torch::Tensor x, torch::Tensor y, LoaderOptions o = {}) : x_(std::move(x)), y_(std::move(y)), o_(o) {
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

  /// Reshuffles for `epoch` (the Trainer calls it at the start of every epoch).
  void set_epoch(int64_t epoch);

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
};

// TensorLoader's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL void TensorLoader::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  const int64_t n = x_.size(0);
  torch::Tensor order;
  if (o_.shuffle) {
    auto gen = torch::make_generator<at::CPUGeneratorImpl>(o_.seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch + 1));
    order = torch::randperm(n, gen, torch::kLong);
  } else {
    order = torch::arange(n, torch::kLong);
  }
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
#endif

}  // namespace policytrain::data
