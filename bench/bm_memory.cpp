// What the memory techniques save: activation checkpointing (memory::recompute) off, of every block and of every
// second block; bf16 autocast against fp32; gradient accumulation (the batch in 1, 2 or 4 micro-batches). Models: the 24-layer MLP of the memory test (blocks Linear(2048, 2048) -> GELU, batch
// 256, fp32) and the main job's CNN (width 32, batch 128; recompute of its 3 blocks), one SGD step per iteration
// (zero_grad, forward, backward, step).
// Counters: peak_tensor_MiB = the most tensor memory alive during a step (CPU: every LibTorch CPU allocation,
// counted exactly by memory::TensorBytesMeter; CUDA: the caching allocator's allocated_bytes peak), minus what
// was alive before it (weights, gradients, optimizer state, data); peak_rss_MiB = the process's resident set peak
// during the step (VmHWM, reset before each step; glibc set to return blocks of 1 MiB or more to the system so
// that RSS follows the tensors).
//   ./build/bench/bm_memory [--device cpu|cuda] --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// `--device cuda` needs a LibTorch with CUDA (POLICYTRAIN_WITH_CUDA) and a GPU.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <malloc.h>

#include <torch/torch.h>
#ifdef POLICYTRAIN_WITH_CUDA
#include <torch/cuda.h>
#endif

#include <policytrain/memory/peak.hpp>
#include <policytrain/memory/recompute.hpp>
#include <policytrain/precision/autocast_guard.hpp>

#include "fashion_mnist/model.hpp"
#include "unit/deep_mlp.hpp"

namespace mem = policytrain::memory;

namespace {

torch::Device g_device(torch::kCPU);

void sync() {
#ifdef POLICYTRAIN_WITH_CUDA
  if (g_device.is_cuda()) torch::cuda::synchronize();
#endif
}

/// Runs `step` once per iteration; reports the peak tensor memory and peak RSS of a step above what was alive
/// before it.
template <class Step>
void measure(benchmark::State& state, int64_t batch, Step&& step) {
  step();  // warm-up: gradients allocated, oneDNN primitives created
  sync();
  double peak_tensor = 0, peak_rss = 0;
  for (auto _ : state) {
    mem::reset_peak_rss();
    const auto rss0 = mem::current_rss_bytes().value_or(0);
    if (g_device.is_cuda()) {
      mem::reset_cuda_peak();
      state.PauseTiming();
      sync();
      state.ResumeTiming();
#ifdef POLICYTRAIN_WITH_CUDA
      const auto before = c10::cuda::CUDACachingAllocator::getDeviceStats(g_device.index() < 0 ? 0 : g_device.index())
                              .allocated_bytes[0].current;
#else
      const int64_t before = 0;
#endif
      step();
      sync();
      peak_tensor = std::max(peak_tensor, static_cast<double>(mem::cuda_peak_allocated_bytes().value_or(0) - before));
    } else {
      mem::TensorBytesMeter meter;
      step();
      peak_tensor = std::max(peak_tensor, static_cast<double>(meter.peak()));
    }
    peak_rss = std::max(peak_rss, static_cast<double>(mem::peak_rss_bytes().value_or(0) - rss0));
  }
  state.counters["peak_tensor_MiB"] = peak_tensor / 1048576.0;
  state.counters["peak_rss_MiB"] = peak_rss / 1048576.0;
  state.SetLabel(g_device.str());
  state.counters["samples_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations() * batch), benchmark::Counter::kIsRate);
}

/// The 24-layer MLP; `every` = 0: no recompute, else segments of `every` blocks.
void BM_mlp24(benchmark::State& state) {
  const int64_t every = state.range(0);
  constexpr int64_t kDepth = 24, kWidth = 2048, kBatch = 256;
  auto net = testing::deep_mlp(kDepth, kWidth, 0, 0.0, 0);  // Dropout(0): the identity, keeps nothing
  net->to(g_device);
  net->train();
  torch::optim::SGD opt(net->parameters(), 1e-3);
  auto x = torch::randn({kBatch, kWidth}, g_device);
  auto y = torch::randint(0, kWidth, {kBatch}, torch::TensorOptions(g_device).dtype(torch::kLong));
  measure(state, kBatch, [&] {
    opt.zero_grad(/*set_to_none=*/false);
    auto out = every == 0 ? net->forward(x) : mem::recompute_sequential(net, every, x);
    torch::nn::functional::cross_entropy(out, y).backward();
    opt.step();
  });
}

/// The main job's CNN; range(0) = 1: recompute of its blocks.
void BM_cnn(benchmark::State& state) {
  constexpr int64_t kBatch = 128;
  torch::manual_seed(0);
  fmnist::Cnn net(32, /*recompute=*/state.range(0) == 1);
  net->to(g_device);
  net->train();
  torch::optim::SGD opt(net->parameters(), 1e-3);
  auto x = torch::randn({kBatch, 1, 28, 28}, g_device);
  auto y = torch::randint(0, 10, {kBatch}, torch::TensorOptions(g_device).dtype(torch::kLong));
  measure(state, kBatch, [&] {
    opt.zero_grad(/*set_to_none=*/false);
    torch::nn::functional::cross_entropy(net->forward(x), y).backward();
    opt.step();
  });
}

/// The CNN under bf16 autocast (range(0) = 1) or in fp32; plain forward.
void BM_cnn_bf16(benchmark::State& state) {
  constexpr int64_t kBatch = 128;
  torch::manual_seed(0);
  fmnist::Cnn net(32);
  net->to(g_device);
  net->train();
  torch::optim::SGD opt(net->parameters(), 1e-3);
  auto x = torch::randn({kBatch, 1, 28, 28}, g_device);
  auto y = torch::randint(0, 10, {kBatch}, torch::TensorOptions(g_device).dtype(torch::kLong));
  const bool bf16 = state.range(0) == 1;
  measure(state, kBatch, [&] {
    opt.zero_grad(/*set_to_none=*/false);
    torch::Tensor loss;
    {
      std::optional<policytrain::precision::AutocastGuard> ac;
      if (bf16) ac.emplace(g_device.type(), torch::kBFloat16);
      loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    }
    loss.backward();
    opt.step();
  });
}

/// The CNN with the batch of 128 in range(0) micro-batches, gradients accumulated (the loss of each divided by
/// their number): one optimizer step per iteration.
void BM_cnn_accumulate(benchmark::State& state) {
  constexpr int64_t kBatch = 128;
  const int64_t k = state.range(0);
  torch::manual_seed(0);
  fmnist::Cnn net(32);
  net->to(g_device);
  net->train();
  torch::optim::SGD opt(net->parameters(), 1e-3);
  auto x = torch::randn({kBatch, 1, 28, 28}, g_device);
  auto y = torch::randint(0, 10, {kBatch}, torch::TensorOptions(g_device).dtype(torch::kLong));
  const auto xs = x.chunk(k), ys = y.chunk(k);
  measure(state, kBatch, [&] {
    opt.zero_grad(/*set_to_none=*/false);
    for (int64_t i = 0; i < k; ++i)
      (torch::nn::functional::cross_entropy(net->forward(xs[i]), ys[i]) / static_cast<double>(k)).backward();
    opt.step();
  });
}

}  // namespace

BENCHMARK(BM_cnn_bf16)->ArgName("bf16")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_cnn_accumulate)->ArgName("micro")->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_mlp24)->ArgName("every")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_cnn)->ArgName("recompute")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

int main(int argc, char** argv) {
  // --device cpu|cuda (removed before Google Benchmark reads the rest).
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d == "cuda") {
#ifdef POLICYTRAIN_WITH_CUDA
        if (!torch::cuda::is_available()) {
          std::fprintf(stderr, "bm_memory: --device cuda: no CUDA device is available\n");
          return 2;
        }
        g_device = torch::Device(torch::kCUDA, 0);
#else
        std::fprintf(stderr, "bm_memory: --device cuda: built against a LibTorch without CUDA; rebuild with a "
                             "CUDA LibTorch\n");
        return 2;
#endif
      } else if (d != "cpu") {
        std::fprintf(stderr, "bm_memory: --device '%s': expected cpu or cuda\n", d.c_str());
        return 2;
      }
    } else {
      args.push_back(argv[i]);
    }
  }
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);  // RSS follows the tensors (see the file comment)
  int n = static_cast<int>(args.size());
  benchmark::AddCustomContext("device", g_device.str());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
