// Loader throughput (samples/s): policytrain::data::PrefetchLoader against LibTorch's stock
// torch::data::make_data_loader, on the same data (Fashion-MNIST's 60000 training images, as read from the IDX files
// in [0, 1]) and the same transforms: normalise, then random crop with 4-pixel padding and horizontal flip.
// The stock pipeline applies the transforms per example with ATen ops (Normalize, then a TensorLambda) and stacks
// the batch; ours assembles each batch on its workers with plain loops. One full epoch per iteration, batch 64,
// 0/1/2 workers, wall time (the work happens on worker threads). Also: normalise only, without augmentation.
#include <random>

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <policytrain/data/fashion_mnist.hpp>
#include <policytrain/data/prefetch_loader.hpp>

namespace pd = policytrain::data;

namespace {

constexpr int64_t kBatch = 64;
constexpr int64_t kPad = 4;
const float kMean = static_cast<float>(pd::kFashionMnistMean), kStd = static_cast<float>(pd::kFashionMnistStd);

/// Fashion-MNIST's training images in [0, 1] (not standardised: both pipelines normalise), or random images
/// of the same shape when the files are absent.
const pd::TensorPair& raw_data() {
  static const pd::TensorPair d = [] {
    try {
      auto raw = pd::read_idx_pair(pd::default_fashion_mnist_dir(), "train", 10);
      return pd::TensorPair{raw.images.unsqueeze(1).to(torch::kFloat).div_(255.0).contiguous(), raw.labels};
    } catch (const std::exception&) {
      return pd::TensorPair{torch::rand({60000, 1, 28, 28}), torch::randint(0, 10, {60000}, torch::kLong)};
    }
  }();
  return d;
}

struct ImageDataset : torch::data::datasets::Dataset<ImageDataset> {
  torch::Tensor x, y;
  ImageDataset(torch::Tensor x, torch::Tensor y) : x(std::move(x)), y(std::move(y)) {}
  torch::data::Example<> get(size_t i) override { return {x[static_cast<int64_t>(i)], y[static_cast<int64_t>(i)]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(x.size(0)); }
};

/// Random crop with zero padding and horizontal flip of one [C, H, W] example, with ATen ops.
torch::Tensor crop_flip(torch::Tensor img) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<int64_t> shift(0, 2 * kPad);
  const int64_t h = img.size(1), w = img.size(2);
  auto padded = torch::constant_pad_nd(img, {kPad, kPad, kPad, kPad}, -kMean / kStd);
  auto out = padded.narrow(1, shift(rng), h).narrow(2, shift(rng), w);
  if (rng() >> 63) out = torch::flip(out, {-1});
  return out.contiguous();
}

void BM_StockDataLoader(benchmark::State& state) {
  const auto& d = raw_data();
  const bool augment = state.range(1) != 0;
  // A named object set in place: copying the chained temporary made GCC 12 warn at -O1 that LibTorch's optional
  // max_jobs_ "is used uninitialized" (-Wuninitialized, a false positive; it is an empty std::optional).
  torch::data::DataLoaderOptions options(kBatch);
  options.workers(static_cast<size_t>(state.range(0)));
  int64_t samples = 0;
  auto run = [&](auto loader) {
    for (auto _ : state) {
      for (auto& b : *loader) {
        benchmark::DoNotOptimize(b.data.data_ptr());
        samples += b.data.size(0);
      }
    }
  };
  auto base = ImageDataset(d.x, d.y).map(torch::data::transforms::Normalize<>(static_cast<double>(kMean), static_cast<double>(kStd)));
  if (augment) {
    auto ds = std::move(base).map(torch::data::transforms::TensorLambda<>(crop_flip)).map(torch::data::transforms::Stack<>());
    run(torch::data::make_data_loader<torch::data::samplers::RandomSampler>(std::move(ds), options));
  } else {
    auto ds = std::move(base).map(torch::data::transforms::Stack<>());
    run(torch::data::make_data_loader<torch::data::samplers::RandomSampler>(std::move(ds), options));
  }
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
}

void BM_PrefetchLoader(benchmark::State& state) {
  const auto& d = raw_data();
  pd::PrefetchOptions po{.workers = state.range(0), .prefetch = 2};
  po.normalize = {.enabled = true, .mean = kMean, .std = kStd};
  po.augment.enabled = state.range(1) != 0;
  po.augment.fill = -kMean / kStd;
  pd::PrefetchLoader loader(d.x, d.y, {.batch_size = kBatch, .shuffle = true, .seed = 1}, po);
  int64_t samples = 0, epoch = 0;
  for (auto _ : state) {
    loader.set_epoch(epoch++);
    for (auto&& b : loader) {
      benchmark::DoNotOptimize(b.x.data_ptr());
      samples += b.x.size(0);
    }
  }
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"workers", "augment"});
  for (int64_t augment : {1, 0})
    for (int64_t w : {0, 1, 2}) b->Args({w, augment});
  b->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true)->MinTime(0.5);
}

}  // namespace

BENCHMARK(BM_StockDataLoader)->Apply(args);
BENCHMARK(BM_PrefetchLoader)->Apply(args);
BENCHMARK_MAIN();
