// The fused optimizers (optim::FusedAdamW, FusedAdam, FusedSgd) against LibTorch's own classes on the
// dispatch-bound MLP of bm_overhead: a plain loop (forward, loss, backward, step, zero_grad) over one epoch of small
// batches, the optimizer the only difference. Run with --benchmark_enable_random_interleaving=true and read the
// medians of the repetitions (bench/RESULTS.md).
#include <benchmark/benchmark.h>

#include <torch/torch.h>

#include <policytrain/all.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;

namespace {

constexpr int64_t kSamples = 2048, kBatch = 32, kIn = 64, kHidden = 128, kOut = 10;

template <class Opt, class Options>
void run_loop(benchmark::State& st, Options opts) {
  torch::set_num_threads(1);
  testing::MlpTask task{1, kIn, kHidden, kOut};
  Opt opt(task.module().parameters(), opts);
  auto data = testing::toy_data(kSamples, kIn, kOut);
  pt::data::TensorLoader loader{data.first, data.second, {.batch_size = kBatch, .shuffle = true, .seed = 1}};
  int64_t epoch = 0;
  for (auto _ : st) {
    loader.set_epoch(epoch++);
    for (auto b : loader) {
      task.training_step(b).backward();
      opt.step();
      opt.zero_grad(true);
    }
  }
  st.counters["steps/s"] = benchmark::Counter(static_cast<double>(st.iterations() * loader.size()), benchmark::Counter::kIsRate);
}

const auto kAdamW = torch::optim::AdamWOptions(1e-3).weight_decay(0.01);
const auto kAdam = torch::optim::AdamOptions(1e-3);
const auto kSgd = torch::optim::SGDOptions(1e-2).momentum(0.937).nesterov(true).weight_decay(5e-4);

}  // namespace

#define POLICYTRAIN_BM(name, Opt, opts)                               \
  void BM_##name(benchmark::State& st) { run_loop<Opt>(st, opts); } \
  BENCHMARK(BM_##name)->Unit(benchmark::kMillisecond)->MinTime(0.5)->Repetitions(5)
POLICYTRAIN_BM(libtorch_AdamW, torch::optim::AdamW, kAdamW);
POLICYTRAIN_BM(fused_AdamW, pt::optim::FusedAdamW, kAdamW);
POLICYTRAIN_BM(libtorch_Adam, torch::optim::Adam, kAdam);
POLICYTRAIN_BM(fused_Adam, pt::optim::FusedAdam, kAdam);
POLICYTRAIN_BM(libtorch_SGD_nesterov, torch::optim::SGD, kSgd);
POLICYTRAIN_BM(fused_SGD_nesterov, pt::optim::FusedSgd, kSgd);
BENCHMARK_MAIN();
