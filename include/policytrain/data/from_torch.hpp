#pragma once
/// \file
/// data::from_torch: LibTorch's own DataLoader (torch::data::StatelessDataLoader, with its worker threads and any
/// sampler) as a Trainer input. It takes torch::data::make_data_loader's arguments — a dataset mapped with
/// `Stack<>`, a sampler, DataLoaderOptions — and builds that DataLoader around a handle to the sampler that it keeps,
/// which a loader made by make_data_loader cannot give back (its sampler is a private member). Through the handle:
/// - set_epoch(e) reaches the sampler: a DistributedRandomSampler / DistributedSequentialSampler gets set_epoch(e)
///   (its order is a function of the epoch); a RandomSampler, which draws from the global CPU generator, draws its
///   permutation from a generator seeded by (seed, epoch), so the epoch's order is the same in a resumed run;
/// - size() is the number of batches when the sampler says how many samples it gives (the four samplers above and
///   data::UnrepeatedDistributedSampler);
/// - evaluation: padding() says how many repeated samples end this rank's shard (a DistributedSequentialSampler
///   with allow_duplicates), which Trainer::evaluate leaves out; a sampler that would leave samples out of an
///   evaluation or count some twice is refused there (evaluation_refusal()). data::UnrepeatedDistributedSampler
///   gives every sample once;
/// - begin_at(k) replays the epoch's order and skips its first k batches before any worker loads them (exact
///   mid-epoch resume: the Trainer calls it with the batches a checkpoint says were trained);
/// - begin() drains a pass left early (limit_train_batches, max_steps, evaluate's limit) first, where LibTorch's
///   own begin() throws "Attempted to get a new DataLoader iterator while another iterator is not yet exhausted".
/// Requires: the dataset's BatchType is one stacked torch::data::Example (map with torch::data::transforms::Stack<>).
/// Example: docs/your-data.md, examples/tabular_regression.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/data/dataloader.h>
#include <torch/data/dataloader_options.h>
#include <torch/data/samplers.h>
#include <torch/types.h>

#include <policytrain/data/unrepeated_distributed_sampler.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::data {

namespace detail {

/// A batch of LibTorch's data API that the Trainer can take: one Example whose data and target are tensors.
template <class B>
concept StackedExample = requires(B b) {
  { b.data } -> std::convertible_to<torch::Tensor>;
  { b.target } -> std::convertible_to<torch::Tensor>;
};

/// Reads DistributedSampler's protected local_sample_count() (the samples one rank gives per epoch) and its
/// settings: a member pointer named through a derived class may be applied to the base.
template <class S>
struct DistributedPeek : S {
  static size_t local_count(S& s) { return (s.*(&DistributedPeek::local_sample_count))(); }
  static size_t size(const S& s) { return s.*(&DistributedPeek::size_); }
  static size_t replicas(const S& s) { return s.*(&DistributedPeek::num_replicas_); }
  static size_t rank(const S& s) { return s.*(&DistributedPeek::rank_); }
  static bool duplicates(const S& s) { return s.*(&DistributedPeek::allow_duplicates_); }
};

/// What the loader and its TorchLoader share: the user's sampler, the epoch, the seed and a pending skip.
template <class S>
struct SamplerState {
  S sampler;
  uint64_t seed = 0;
  int64_t epoch = 0;
  size_t skip = 0;  ///< samples the next reset passes over (begin_at)

  /// A new pass over the epoch's order: the sampler's own reset, with the epoch (or a seed made of it), then the skip.
  void reset() {
    if constexpr (requires(S& s) { s.set_epoch(size_t{}); }) sampler.set_epoch(static_cast<size_t>(epoch));
    if constexpr (std::is_same_v<S, torch::data::samplers::RandomSampler>) {
      // RandomSampler::reset draws torch::randperm from the default CPU generator: seed it for the draw and give
      // it its state back, so that the order depends on (seed, epoch) only and the rest of the run is unaffected.
      auto gen = at::detail::getDefaultCPUGenerator();
      torch::Tensor saved;
      {
        std::lock_guard<std::mutex> lock(gen.mutex());
        saved = gen.get_state();
        gen.set_current_seed(seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch + 1));
      }
      sampler.reset();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(saved);
    } else {
      sampler.reset();
    }
    if (skip > 0) (void)sampler.next(std::exchange(skip, 0));
  }
};

/// The sampler the DataLoader holds: forwards to the shared state.
template <class S>
class SharedSampler : public torch::data::samplers::Sampler<typename S::BatchRequestType> {
 public:
  using BatchRequestType = typename S::BatchRequestType;
  explicit SharedSampler(std::shared_ptr<SamplerState<S>> st) : st_(std::move(st)) {}
  void reset(std::optional<size_t> new_size = std::nullopt) override {
    if (new_size) st_->sampler.reset(new_size);
    st_->reset();
  }
  std::optional<BatchRequestType> next(size_t batch_size) override { return st_->sampler.next(batch_size); }
  void save(torch::serialize::OutputArchive& a) const override { st_->sampler.save(a); }
  void load(torch::serialize::InputArchive& a) override { st_->sampler.load(a); }

 private:
  std::shared_ptr<SamplerState<S>> st_;
};

}  // namespace detail

/// What from_torch adds to DataLoaderOptions.
struct FromTorchOptions {
  /// Seed of a RandomSampler's per-epoch order (the distributed samplers are seeded by the epoch alone, as in
  /// LibTorch).
  uint64_t seed = 0;
};

/// LibTorch's StatelessDataLoader over `Dataset` and `Sampler`, made a Trainer input; see the file's description.
template <class Dataset, class Sampler>
class TorchLoader {
  static_assert(detail::StackedExample<typename Dataset::BatchType>,
                "policytrain::data::from_torch: the dataset yields a std::vector of separate examples, not one "
                "batch; map it with `.map(torch::data::transforms::Stack<>())` so that it yields one stacked "
                "torch::data::Example");

 public:
  /// The DataLoader type inside.
  using loader_type = torch::data::StatelessDataLoader<Dataset, detail::SharedSampler<Sampler>>;

  /// Builds LibTorch's DataLoader from make_data_loader's arguments. Throws std::invalid_argument when the dataset
  /// does not know its size.
  TorchLoader(Dataset dataset, Sampler sampler, torch::data::DataLoaderOptions options, FromTorchOptions o = {})
      : st_(std::make_shared<detail::SamplerState<Sampler>>(detail::SamplerState<Sampler>{std::move(sampler), o.seed})),
        batch_size_(options.batch_size()),
        drop_last_(options.drop_last()) {
    const std::optional<size_t> n = dataset.size();
    if constexpr (std::is_base_of_v<UnrepeatedDistributedSampler, Sampler>)
      samples_ = static_cast<int64_t>(st_->sampler.num_samples());
    else if constexpr (std::is_base_of_v<torch::data::samplers::DistributedSampler<>, Sampler>)
      samples_ = static_cast<int64_t>(detail::DistributedPeek<Sampler>::local_count(st_->sampler));
    else if constexpr (std::is_same_v<Sampler, torch::data::samplers::RandomSampler> ||
                       std::is_same_v<Sampler, torch::data::samplers::SequentialSampler>)
      samples_ = n ? static_cast<int64_t>(*n) : -1;
    loader_ = std::make_unique<loader_type>(std::move(dataset), detail::SharedSampler<Sampler>(st_), options);
  }

  /// The order of `epoch` for the next pass (the Trainer calls it at every epoch's start).
  void set_epoch(int64_t epoch) {
    drain();
    st_->epoch = epoch;
  }
  /// The epoch of the next pass.
  int64_t epoch() const { return st_->epoch; }
  /// Samples per epoch (this rank's, under a distributed sampler), or -1 when the sampler does not say.
  int64_t num_samples() const { return samples_; }
  /// Of num_samples(), the repeated samples at the end of this rank's shard that pad it to the others' length: a
  /// DistributedSequentialSampler with allow_duplicates wraps around to the data set's start on the last ranks.
  /// Trainer::evaluate leaves them out, so an evaluation counts every sample once.
  int64_t padding() const {
    using Sequential = torch::data::samplers::DistributedSequentialSampler;
    if constexpr (std::is_base_of_v<Sequential, Sampler>) {
      using Peek = detail::DistributedPeek<Sequential>;
      const Sequential& s = st_->sampler;
      if (!Peek::duplicates(s)) return 0;
      const int64_t n = static_cast<int64_t>(Peek::size(s)), w = static_cast<int64_t>(Peek::replicas(s));
      const int64_t per_rank = (n + w - 1) / w, begin = static_cast<int64_t>(Peek::rank(s)) * per_rank;
      return std::max<int64_t>(0, begin + per_rank - std::max(begin, n));  // positions n and beyond wrap
    } else {
      return 0;
    }
  }
  /// Why an evaluation through this loader cannot count every sample once over the ranks (empty when it can):
  /// LibTorch's distributed samplers with a data set that does not divide by the ranks leave the last samples out
  /// (allow_duplicates = false) or shuffle repeated ones into the shards (DistributedRandomSampler). Trainer::evaluate
  /// refuses such a loader with this message.
  std::string evaluation_refusal() const {
    using Random = torch::data::samplers::DistributedRandomSampler;
    using Sequential = torch::data::samplers::DistributedSequentialSampler;
    constexpr bool random = std::is_base_of_v<Random, Sampler>, sequential = std::is_base_of_v<Sequential, Sampler>;
    if constexpr (random || sequential) {
      using Peek = detail::DistributedPeek<std::conditional_t<random, Random, Sequential>>;
      const auto& s = st_->sampler;
      const size_t n = Peek::size(s), w = Peek::replicas(s);
      if (w <= 1 || n % w == 0 || (sequential && Peek::duplicates(s))) return {};
      const char* name = random ? "DistributedRandomSampler" : "DistributedSequentialSampler";
      return policytrain::detail::error_message(
          "policytrain::data::from_torch",
          Peek::duplicates(s)
              ? policytrain::detail::format("a {} of {} samples over {} ranks pads the shards with {} repeated "
                                            "samples shuffled among the others, which an evaluation would count twice",
                                            name, n, w, w - n % w)
              : policytrain::detail::format("a {} of {} samples over {} ranks (allow_duplicates = false) gives each "
                                            "rank {}, so the last {} samples are never evaluated",
                                            name, n, w, n / w, n % w),
          {},
          policytrain::detail::format("evaluate through policytrain::data::UnrepeatedDistributedSampler({}, {}, "
                                      "rank), which gives every sample once over the ranks",
                                      n, w));
    } else {
      return {};
    }
  }
  /// Why training through this loader would desynchronise the ranks (empty when it would not): the shards of a
  /// data::UnrepeatedDistributedSampler differ in length when the data set does not divide by the ranks, so the
  /// ranks would step a different number of times. Trainer::fit refuses such a loader with this message.
  std::string training_refusal() const {
    if constexpr (std::is_base_of_v<UnrepeatedDistributedSampler, Sampler>) {
      using Peek = detail::DistributedPeek<torch::data::samplers::DistributedSampler<>>;
      const auto& s = st_->sampler;
      const size_t n = Peek::size(s), w = Peek::replicas(s);
      if (w <= 1 || n % w == 0) return {};
      return policytrain::detail::error_message(
          "policytrain::data::from_torch",
          policytrain::detail::format("an UnrepeatedDistributedSampler of {} samples over {} ranks gives shards of {} "
                                      "and {} samples, so the ranks would take different numbers of steps",
                                      n, w, n / w + 1, n / w),
          {},
          "train through a DistributedRandomSampler (its shards are padded to one length) and keep "
          "UnrepeatedDistributedSampler for validation");
    } else {
      return {};
    }
  }
  /// Batches per epoch, or -1 when the sampler does not say how many samples it gives.
  int64_t batches_per_epoch() const {
    if (samples_ < 0) return -1;
    const auto b = static_cast<int64_t>(batch_size_);
    return drop_last_ ? samples_ / b : (samples_ + b - 1) / b;
  }

  /// A pass over the epoch's batches (a pass left early is drained first).
  torch::data::Iterator<typename Dataset::BatchType> begin() {
    drain();
    return loader_->begin();
  }
  /// A pass that starts at batch `k` of the epoch's order: the first k batches are never loaded.
  torch::data::Iterator<typename Dataset::BatchType> begin_at(int64_t k) {
    drain();
    st_->skip = static_cast<size_t>(k) * batch_size_;
    return loader_->begin();
  }
  /// The end of a pass.
  torch::data::Iterator<typename Dataset::BatchType> end() { return loader_->end(); }

  /// LibTorch's DataLoader inside (its options, join()).
  loader_type& loader() { return *loader_; }
  /// The sampler (shared with the DataLoader).
  Sampler& sampler() { return st_->sampler; }

 private:
  /// Waits for the batches the workers still load for a pass left early and drops them, so that a new pass may
  /// start (DataLoaderBase::shuttle_, protected, reached through a derived class).
  struct ShuttlePeek : loader_type {
    static void drain(loader_type& l) { (l.*(&ShuttlePeek::shuttle_)).drain(); }
  };
  void drain() { ShuttlePeek::drain(*loader_); }

  std::shared_ptr<detail::SamplerState<Sampler>> st_;
  std::unique_ptr<loader_type> loader_;
  size_t batch_size_;
  bool drop_last_;
  int64_t samples_ = -1;
};

/// LibTorch's DataLoader from make_data_loader's arguments, as a Trainer input (see TorchLoader):
/// `auto train = data::from_torch(MyDataset(...).map(Stack<>()), DistributedRandomSampler(n, world, rank),
/// DataLoaderOptions().batch_size(64).workers(2));`
template <class Dataset, class Sampler>
TorchLoader<Dataset, Sampler> from_torch(Dataset dataset, Sampler sampler, torch::data::DataLoaderOptions options,
                                         FromTorchOptions o = {}) {
  return TorchLoader<Dataset, Sampler>(std::move(dataset), std::move(sampler), options, o);
}

}  // namespace policytrain::data
