// What watching a run costs: the main job's CNN (examples/fashion_mnist/model.hpp, width 32) on synthetic
// 28x28 images, one epoch of 20 steps of batch 64 per iteration, through Trainer<Classifier> alone and with
// callbacks::TensorBoard (scalars every step; every 50 steps; every step plus histograms every 50) and
// callbacks::Profiler (enabled but outside its window: inactive; recording every step: active, a trace
// saved per epoch). The same on bm_overhead's small MLP (64 steps of batch 32, about 0.2 ms each), where the
// callbacks' fixed cost per step is not hidden by the convolutions. All in one binary, repetitions
// interleaved; ratios to the baseline go to bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include <filesystem>

#include <torch/torch.h>

#include <policytrain/callbacks/profiler.hpp>
#include <policytrain/callbacks/tensorboard.hpp>
#include <policytrain/all.hpp>

#include "fashion_mnist/model.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kSteps = 20, kBatch = 64;

struct Setup {
  static constexpr int64_t kSteps = ::kSteps;
  fmnist::Classifier task{32};
  torch::optim::SGD opt{task.module().parameters(), torch::optim::SGDOptions(0.01).momentum(0.9)};
  torch::Tensor x = torch::randn({kSteps * kBatch, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {kSteps * kBatch});
  pt::data::TensorLoader loader{x, y, {.batch_size = kBatch, .shuffle = true, .seed = 1}};
};

fs::path scratch(const char* name) {
  auto d = fs::temp_directory_path() / (std::string("policytrain-bench-") + name);
  fs::remove_all(d);
  return d;
}

struct MlpSetup {
  static constexpr int64_t kSteps = 64;
  testing::MlpTask task{1, 64, 128, 10};
  torch::optim::SGD opt{task.module().parameters(), torch::optim::SGDOptions(0.01).momentum(0.9)};
  std::pair<torch::Tensor, torch::Tensor> data = testing::toy_data(kSteps * 32, 64, 10);
  pt::data::TensorLoader loader{data.first, data.second, {.batch_size = 32, .shuffle = true, .seed = 1}};
};

template <class S = Setup, class... Cb>
void run(benchmark::State& st, Cb... cb) {
  torch::set_num_threads(1);
  S s;
  using Task = std::remove_cvref_t<decltype(s.task)>;
  pt::Trainer<Task, Cb...> trainer(s.task, s.opt, std::move(cb)...);
  for (auto _ : st) {
    auto r = trainer.fit(s.loader, {.epochs = trainer.state().epoch + 1});
    benchmark::DoNotOptimize(r.global_steps);
  }
  st.counters["steps/s"] =
      benchmark::Counter(static_cast<double>(st.iterations() * S::kSteps), benchmark::Counter::kIsRate);
}

using TB = pt::callbacks::TensorBoard;
using Prof = pt::callbacks::Profiler;

void BM_Baseline(benchmark::State& st) { run(st); }
void BM_TensorBoardEveryStep(benchmark::State& st) { run(st, TB({.dir = scratch("tb1"), .every = 1})); }
void BM_TensorBoardEvery50(benchmark::State& st) { run(st, TB({.dir = scratch("tb50"), .every = 50})); }
void BM_TensorBoardEveryStepHistograms50(benchmark::State& st) {
  run(st, TB({.dir = scratch("tbh"), .every = 1, .histogram_every = 50}));
}
void BM_ProfilerInactive(benchmark::State& st) {
  run(st, Prof({.dir = scratch("prof0"), .wait = 1'000'000, .warmup = 1, .active = 1, .out = nullptr}));
}
void BM_ProfilerActive(benchmark::State& st) {
  run(st, Prof({.dir = scratch("prof1"), .wait = 0, .warmup = 0, .active = kSteps, .out = nullptr}));
}

void BM_Mlp_Baseline(benchmark::State& st) { run<MlpSetup>(st); }
void BM_Mlp_TensorBoardEveryStep(benchmark::State& st) { run<MlpSetup>(st, TB({.dir = scratch("mtb1"), .every = 1})); }
void BM_Mlp_TensorBoardEvery50(benchmark::State& st) { run<MlpSetup>(st, TB({.dir = scratch("mtb50"), .every = 50})); }
void BM_Mlp_ProfilerInactive(benchmark::State& st) {
  run<MlpSetup>(st, Prof({.dir = scratch("mprof0"), .wait = 1'000'000, .warmup = 1, .active = 1, .out = nullptr}));
}
void BM_Mlp_ProfilerActive(benchmark::State& st) {
  run<MlpSetup>(st, Prof({.dir = scratch("mprof1"), .wait = 0, .warmup = 0, .active = MlpSetup::kSteps, .out = nullptr}));
}

}  // namespace

BENCHMARK(BM_Mlp_Baseline)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mlp_TensorBoardEveryStep)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mlp_TensorBoardEvery50)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mlp_ProfilerInactive)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mlp_ProfilerActive)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Baseline)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TensorBoardEveryStep)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TensorBoardEvery50)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TensorBoardEveryStepHistograms50)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ProfilerInactive)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ProfilerActive)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
