// Checkpoint size, save time and resume (load) time: the Fashion-MNIST CNN and a ~100M-parameter MLP, each with
// AdamW moments, full precision vs fp16 weights vs fp16 weights + bf16 moments. Files go to a real disk with fsync.
// Run: ./build/bench/bm_checkpoint --benchmark_repetitions=3 (medians are what RESULTS.md records).
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include <torch/torch.h>

#include <policytrain/checkpoint/disk.hpp>

#include "fashion_mnist/model.hpp"

namespace pt = policytrain;
namespace ck = policytrain::checkpoint;
namespace fs = std::filesystem;

namespace {

/// About 100M parameters: 4 Linear(5000, 5000) layers.
struct BigImpl : torch::nn::Module {
  BigImpl() {
    // The name appended, not "l" + std::to_string(i): GCC 12 at -O3 warns of that operator+'s insert
    // (-Wstringop-overflow, a false positive, GCC bug 105651) once enough is inlined around it.
    for (int i = 0; i < 4; ++i) {
      std::string name = "l";
      name += std::to_string(i);
      layers.push_back(register_module(name, torch::nn::Linear(5000, 5000)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& l : layers) x = torch::relu(l(x));
    return x;
  }
  std::vector<torch::nn::Linear> layers;
};
TORCH_MODULE(Big);

struct BigTask {
  Big net;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return net->forward(b.x).mean(); }
};

fs::path bench_dir() {
  static const fs::path d = [] {
    auto p = fs::temp_directory_path() / "policytrain-bench-checkpoint";
    fs::create_directories(p);
    return p;
  }();
  return d;
}

/// A task, its AdamW (one step taken, so the moments exist) and a Trainer with checkpoint::Disk.
template <class Task>
struct Setup {
  Task task;
  std::unique_ptr<torch::optim::AdamW> opt;
  std::unique_ptr<pt::Trainer<Task, ck::Disk>> trainer;
  Setup(torch::Tensor x, torch::Tensor y) {
    opt = std::make_unique<torch::optim::AdamW>(task.module().parameters(), 1e-3);
    trainer = std::make_unique<pt::Trainer<Task, ck::Disk>>(task, *opt);
    task.training_step({x, y}).backward();
    opt->step();
    opt->zero_grad();
  }
};

Setup<fmnist::Classifier>& cnn() {
  static Setup<fmnist::Classifier> s(torch::randn({8, 1, 28, 28}), torch::randint(0, 10, {8}));
  return s;
}
Setup<BigTask>& big() {
  static Setup<BigTask> s(torch::randn({2, 5000}), torch::zeros({2}, torch::kLong));
  return s;
}

const char* kNames[] = {"full", "half_weights", "half_weights_bf16_moments"};
ck::SaveOptions save_options(int64_t kind) { return {.half_weights = kind >= 1, .half_optimizer = kind >= 2}; }

template <class S>
void save_bench(benchmark::State& state, S& s, const std::string& tag) {
  const int64_t kind = state.range(0);
  ck::Disk disk({.directory = bench_dir(), .save = save_options(kind), .export_final = false, .log = nullptr});
  const std::string file = tag + "-" + kNames[kind] + ".ckpt";
  for (auto _ : state) disk.save(s.trainer->context(), {{file, "last"}}, true);
  const auto bytes = fs::file_size(bench_dir() / file);
  state.counters["MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["MB/s"] = benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(kNames[kind]);
}
template <class S>
void load_bench(benchmark::State& state, S& s, const std::string& tag) {
  const int64_t kind = state.range(0);
  const fs::path file = bench_dir() / (tag + "-" + kNames[kind] + ".ckpt");
  if (!fs::exists(file)) {
    ck::Disk disk({.directory = bench_dir(), .save = save_options(kind), .export_final = false, .log = nullptr});
    disk.save(s.trainer->context(), {{file.filename().string(), "last"}}, true);
  }
  for (auto _ : state) ck::load(s.trainer->context(), file);
  state.SetLabel(kNames[kind]);
}

void BM_SaveCnn(benchmark::State& st) { save_bench(st, cnn(), "cnn"); }
void BM_LoadCnn(benchmark::State& st) { load_bench(st, cnn(), "cnn"); }
void BM_Save100M(benchmark::State& st) { save_bench(st, big(), "big"); }
void BM_Load100M(benchmark::State& st) { load_bench(st, big(), "big"); }

/// Step time of the CNN (batch 64, 40 steps per iteration) with no checkpoint, a synchronous one and an
/// asynchronous one every `every` steps (range(1)); range(0): 0 none, 1 sync, 2 async. The async writer's last
/// write is waited for at fit end, inside the timed region.
void BM_StepCnn(benchmark::State& state) {
  const int64_t mode = state.range(0), every = state.range(1);
  torch::manual_seed(0);
  const auto x = torch::randn({64 * 40, 1, 28, 28}), y = torch::randint(0, 10, {64 * 40});
  const auto dir = bench_dir() / ("steps-" + std::to_string(mode));
  fs::remove_all(dir);
  int64_t steps = 0;
  for (auto _ : state) {
    fmnist::Classifier task;
    torch::optim::AdamW opt(task.module().parameters(), 1e-3);
    pt::Trainer<fmnist::Classifier, ck::Disk> t(
        task, opt, ck::Disk({.directory = mode == 0 ? fs::path() : dir, .last = false, .every_steps = every, .keep = 2,
                             .async = mode == 2, .export_final = false, .log = nullptr}));
    pt::data::TensorLoader loader(x, y, {.batch_size = 64, .shuffle = false});
    t.fit(loader, {.epochs = 1});
    steps += t.state().global_step;
  }
  state.counters["ms/step"] = benchmark::Counter(static_cast<double>(steps) / 1000.0,
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  const char* names[] = {"no checkpoint", "sync", "async"};
  state.SetLabel(std::string(names[mode]) + " every " + std::to_string(every) + " steps");
}

}  // namespace

BENCHMARK(BM_StepCnn)->Args({0, 10})->Args({1, 10})->Args({2, 10})->Args({1, 2})->Args({2, 2})
    ->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
BENCHMARK(BM_SaveCnn)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_LoadCnn)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->MinTime(0.5);
BENCHMARK(BM_Save100M)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_Load100M)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->Iterations(2);

BENCHMARK_MAIN();
