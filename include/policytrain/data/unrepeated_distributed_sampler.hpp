#pragma once
/// \file
/// data::UnrepeatedDistributedSampler: the evaluation sampler of data parallelism. Over the ranks every sample of
/// the data set comes exactly once: rank r takes positions r, r + world, r + 2 world, ... of the epoch's order, so
/// the shards differ by at most one sample and nothing is padded nor left out (Lightning's
/// UnrepeatedDistributedSampler, the same indices in the same order: the order is 0..n-1, or with `shuffle`
/// torch.randperm(n) from a generator seeded with seed + epoch; Lightning's is seeded with the epoch, i.e. seed 0).
/// For validation through data::from_torch; LibTorch's DistributedSequentialSampler gives each rank floor(n / world)
/// samples without duplicates (the last n % world are never evaluated) and pads with repeated ones otherwise.
/// Training keeps a padded sampler (DistributedRandomSampler): its ranks must step together, which uneven shards
/// would not (Trainer::fit refuses uneven shards of this sampler).
/// Interface: LibTorch's Sampler (reset, next, save, load) and DistributedSampler's set_epoch; num_samples().
/// Example: docs/your-data.md, examples/image_folder.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/data/samplers/distributed.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// Every sample once over the ranks, in uneven shards; see the file's description.
class UnrepeatedDistributedSampler : public torch::data::samplers::DistributedSampler<> {
 public:
  /// This rank's shard of `size` samples over `num_replicas` ranks; with `shuffle`, the order of each epoch is a
  /// permutation drawn from a generator seeded with `seed` + epoch. Throws std::invalid_argument when `rank` is
  /// not below `num_replicas`.
  UnrepeatedDistributedSampler(size_t size, size_t num_replicas = 1, size_t rank = 0, bool shuffle = false,
                               uint64_t seed = 0)
      : DistributedSampler(size, num_replicas, rank, /*allow_duplicates=*/false), shuffle_(shuffle), seed_(seed) {
    if (num_replicas == 0 || rank >= num_replicas)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::UnrepeatedDistributedSampler",
          policytrain::detail::format("rank {} of {} ranks", rank, num_replicas), "a rank from 0 to num_replicas - 1"));
    reset();
  }

  /// Samples this rank gives per epoch: len(range(rank, size, num_replicas)).
  size_t num_samples() const { return size_ > rank_ ? (size_ - rank_ + num_replicas_ - 1) / num_replicas_ : 0; }

  /// A new pass over the current epoch's shard (a new size when given).
  void reset(std::optional<size_t> new_size = std::nullopt) override {
    if (new_size) size_ = *new_size;
    indices_.clear();
    indices_.reserve(num_samples());
    if (shuffle_) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<uint64_t>(epoch_));
      const auto order = torch::randperm(static_cast<int64_t>(size_), gen, torch::kLong);
      const int64_t* p = order.data_ptr<int64_t>();
      for (size_t i = rank_; i < size_; i += num_replicas_) indices_.push_back(static_cast<size_t>(p[i]));
    } else {
      for (size_t i = rank_; i < size_; i += num_replicas_) indices_.push_back(i);
    }
    next_ = 0;
  }
  /// The next `batch_size` indices of the shard (fewer at its end), or nothing when it is exhausted.
  std::optional<std::vector<size_t>> next(size_t batch_size) override {
    if (next_ >= indices_.size()) return std::nullopt;
    const size_t end = std::min(indices_.size(), next_ + batch_size);
    std::vector<size_t> batch(indices_.begin() + static_cast<std::ptrdiff_t>(next_),
                              indices_.begin() + static_cast<std::ptrdiff_t>(end));
    next_ = end;
    return batch;
  }
  /// Writes the position in the shard.
  void save(torch::serialize::OutputArchive& archive) const override {
    archive.write("next", torch::tensor(static_cast<int64_t>(next_), torch::kInt64), /*is_buffer=*/true);
  }
  /// Reads the position in the shard (of the epoch set before).
  void load(torch::serialize::InputArchive& archive) override {
    auto t = torch::empty(1, torch::kInt64);
    archive.read("next", t, /*is_buffer=*/true);
    next_ = static_cast<size_t>(t.item<int64_t>());
  }

 private:
  bool shuffle_;
  uint64_t seed_;
  std::vector<size_t> indices_;  ///< this rank's shard of the current epoch's order
  size_t next_ = 0;              ///< position of the next index in it
};

}  // namespace policytrain::data
