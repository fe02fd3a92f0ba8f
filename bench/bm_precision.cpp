// Training step time of the example's Fashion-MNIST CNN (width 32, batch 128) on the CPU with 2 threads, through
// the Trainer: fp32 (the default precision::Fp32), precision::Autocast with dtype fp32 (the policy switched off),
// bf16 autocast, fp16 autocast with loss scaling. Ratios against the fp32 row are in bench/RESULTS.md.
// CPU time is the whole process's (both intra-op threads), which a loaded machine distorts less than wall time.
//   ./build/bench/bm_precision --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <torch/torch.h>

#include <policytrain/all.hpp>
#include <policytrain/precision/autocast.hpp>

#include "fashion_mnist/model.hpp"

namespace pt = policytrain;
using pt::precision::Autocast;

namespace {

constexpr int64_t kBatch = 128;

/// One iteration = one optimizer step on one batch of random images (the network is compute-bound, the data's
/// values do not matter).
template <class... Precision>
void train_step(benchmark::State& state, Precision... precision) {
  torch::set_num_threads(2);
  torch::manual_seed(0);
  auto x = torch::randn({kBatch, 1, 28, 28});
  auto y = torch::randint(0, 10, {kBatch}, torch::kLong);
  pt::data::TensorLoader loader(x, y, {.batch_size = kBatch, .shuffle = false});
  fmnist::Classifier task(32);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
  pt::Trainer<fmnist::Classifier, Precision...> trainer(task, opt, std::move(precision)...);
  trainer.fit(loader, {.epochs = 1});  // warm-up: first-call allocations, oneDNN primitive creation
  for (auto _ : state) {
    trainer.state().epoch = 0;
    auto r = trainer.fit(loader, {.epochs = 1});
    benchmark::DoNotOptimize(r);
  }
  state.counters["samples_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kBatch), benchmark::Counter::kIsRate);
  state.counters["skipped_steps"] = static_cast<double>(trainer.state().skipped_steps);
}

void BM_fp32(benchmark::State& s) { train_step(s); }
void BM_autocast_off_fp32(benchmark::State& s) { train_step(s, Autocast({.dtype = torch::kFloat})); }
void BM_bf16_autocast(benchmark::State& s) { train_step(s, Autocast({.dtype = torch::kBFloat16})); }
void BM_fp16_autocast_loss_scaling(benchmark::State& s) { train_step(s, Autocast({.dtype = torch::kHalf})); }

}  // namespace

BENCHMARK(BM_fp32)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(3.0);
BENCHMARK(BM_autocast_off_fp32)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(3.0);
BENCHMARK(BM_bf16_autocast)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(3.0);
BENCHMARK(BM_fp16_autocast_loss_scaling)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime()->MinTime(3.0);

BENCHMARK_MAIN();
