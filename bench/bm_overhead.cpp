// Zero overhead, measured: one epoch of a small MLP through Trainer<Task> with every default, against a
// hand-written LibTorch loop (forward, loss, backward, AdamW step, zero_grad) on the same batches, without and
// with a host read of the loss per step (the finiteness check a careful loop makes; the Trainer's default keeps
// it on the device and reads it every 64 micro-batches). All in one binary, interleaved repetitions.
// bench/python/overhead.py is the same step in Python eager; bench/python/overhead_vs_python.py runs both.
#include <benchmark/benchmark.h>

#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

#include <policytrain/all.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;

namespace {

constexpr int64_t kSamples = 2048, kBatch = 32, kIn = 64, kHidden = 128, kOut = 10;

struct Setup {
  testing::MlpTask task{1, kIn, kHidden, kOut};
  torch::optim::AdamW opt{task.module().parameters(), torch::optim::AdamWOptions(1e-3)};
  std::pair<torch::Tensor, torch::Tensor> data = testing::toy_data(kSamples, kIn, kOut);
  pt::data::TensorLoader loader{data.first, data.second, {.batch_size = kBatch, .shuffle = true, .seed = 1}};
};

template <bool ReadLoss>
void hand_written_loop(benchmark::State& st) {
  torch::set_num_threads(1);
  Setup s;
  int64_t epoch = 0;
  for (auto _ : st) {
    s.loader.set_epoch(epoch++);
    for (auto b : s.loader) {
      auto loss = s.task.training_step(b);
      if constexpr (ReadLoss)
        if (!std::isfinite(loss.detach().to(torch::kDouble).item<double>())) throw std::runtime_error("non-finite loss");
      loss.backward();
      s.opt.step();
      s.opt.zero_grad(true);
    }
  }
  st.counters["steps/s"] = benchmark::Counter(static_cast<double>(st.iterations() * s.loader.size()), benchmark::Counter::kIsRate);
}
void BM_HandWrittenLoop(benchmark::State& st) { hand_written_loop<false>(st); }
void BM_HandWrittenLoopReadingLoss(benchmark::State& st) { hand_written_loop<true>(st); }

void BM_TrainerDefaults(benchmark::State& st) {
  torch::set_num_threads(1);
  Setup s;
  pt::Trainer<testing::MlpTask> trainer(s.task, s.opt);
  for (auto _ : st) {
    auto r = trainer.fit(s.loader, {.epochs = trainer.state().epoch + 1});
    benchmark::DoNotOptimize(r.global_steps);
  }
  st.counters["steps/s"] = benchmark::Counter(static_cast<double>(st.iterations() * s.loader.size()), benchmark::Counter::kIsRate);
}

/// The same Trainer with policytrain's fused AdamW: where a C++ trainer gains on dispatch-bound work.
void BM_TrainerFusedAdamW(benchmark::State& st) {
  torch::set_num_threads(1);
  Setup s;
  pt::optim::FusedAdamW opt(s.task.module().parameters(), torch::optim::AdamWOptions(1e-3));
  pt::Trainer<testing::MlpTask> trainer(s.task, opt);
  for (auto _ : st) {
    auto r = trainer.fit(s.loader, {.epochs = trainer.state().epoch + 1});
    benchmark::DoNotOptimize(r.global_steps);
  }
  st.counters["steps/s"] = benchmark::Counter(static_cast<double>(st.iterations() * s.loader.size()), benchmark::Counter::kIsRate);
}

}  // namespace

BENCHMARK(BM_TrainerFusedAdamW)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_HandWrittenLoop)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_HandWrittenLoopReadingLoss)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_TrainerDefaults)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK_MAIN();
