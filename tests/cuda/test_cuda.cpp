// CUDA tests: built only against a CUDA LibTorch (tests/cuda/CMakeLists.txt). Each GPU case compares with an
// independent oracle: Python PyTorch run side by side (tests/cuda/oracle.py), the CPU path, or the hardware's own
// read-back. Without a visible GPU a GPU case prints "policytrain-cuda: skipped" (CTest then reports it skipped);
// the cases that need no GPU (what the CUDA build itself must provide) always run.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <policytrain/detail/torch_compat.hpp>
#include <policytrain/all.hpp>

#include "fashion_mnist/model.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;
using nlohmann::json;

#ifndef POLICYTRAIN_WITH_CUDA
#error "tests/cuda/test_cuda.cpp is built only against a CUDA LibTorch (POLICYTRAIN_WITH_CUDA)"
#endif
#ifndef USE_C10D_NCCL
#error "tests/cuda/test_cuda.cpp: the CUDA LibTorch was expected to provide c10d's NCCL backend (USE_C10D_NCCL)"
#endif

namespace {

bool gpu_or_skip() {
  if (torch::cuda::is_available()) return true;
  std::printf("policytrain-cuda: skipped (no CUDA device visible)\n");
  return false;
}

fs::path scratch(const std::string& name) {
  auto d = fs::path(POLICYTRAIN_BINARY_DIR) / "cuda-scratch" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void run_oracle(const std::string& args) {
  const std::string cmd = "python3 " + std::string(POLICYTRAIN_SOURCE_DIR) + "/tests/cuda/oracle.py " + args;
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case torch::kFloat: return "float32";
    case torch::kHalf: return "float16";
    case torch::kBFloat16: return "bfloat16";
    default: return c10::toString(t);
  }
}

// The same network as oracle.py's AmpNet (same parameter names), recording each op's output dtype.
struct AmpNetImpl : torch::nn::Module {
  AmpNetImpl()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)))),
        bn(register_module("bn", torch::nn::BatchNorm2d(8))),
        fc(register_module("fc", torch::nn::Linear(8 * 14 * 14, 10))) {}
  torch::Tensor forward(const torch::Tensor& x, std::map<std::string, std::string>& dtypes) {
    auto c = conv(x);
    dtypes["conv"] = dtype_name(c.scalar_type());
    auto b = bn(c);
    dtypes["batch_norm"] = dtype_name(b.scalar_type());
    auto h = torch::max_pool2d(torch::relu(b), 2).flatten(1);
    dtypes["max_pool"] = dtype_name(h.scalar_type());
    auto logits = fc(h);
    dtypes["linear"] = dtype_name(logits.scalar_type());
    dtypes["softmax"] = dtype_name(torch::softmax(logits, 1).scalar_type());
    return logits;
  }
  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
  torch::nn::Linear fc;
};
TORCH_MODULE(AmpNet);

struct AmpTask {
  AmpNet net;
  std::map<std::string, std::string> dtypes;
  double loss = 0;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) {
    auto l = torch::nn::functional::cross_entropy(net->forward(b.x, dtypes), b.y);
    dtypes["loss"] = dtype_name(l.scalar_type());
    loss = l.item<double>();
    return l;
  }
};

c10::Dict<std::string, at::Tensor> state_of(torch::nn::Module& m) {
  c10::Dict<std::string, at::Tensor> d;
  for (const auto& p : m.named_parameters()) d.insert(p.key(), p.value().detach().cpu());
  for (const auto& b : m.named_buffers()) d.insert(b.key(), b.value().detach().cpu());
  return d;
}

void write_file(const fs::path& f, const std::vector<char>& bytes) {
  std::ofstream(f, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::vector<char> read_file(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("CUDA build: CUDA-only code is compiled in, with c10d's NCCL backend") {
  // Runs everywhere: a CUDA LibTorch must turn the CUDA paths on (CMake decides from the LibTorch found).
  CHECK(pt::detail::built_with_cuda());
  CHECK(torch::cuda::is_available() == (torch::cuda::device_count() > 0));
}

TEST_CASE("CUDA autocast fp16 and bf16: per-op dtypes, loss and the stepped weights equal Python's torch.autocast") {
  if (!gpu_or_skip()) return;
  for (auto dtype : {torch::kHalf, torch::kBFloat16}) {
    CAPTURE(dtype_name(dtype));
    const auto dir = scratch("amp_" + dtype_name(dtype));
    torch::manual_seed(3);
    AmpTask task{AmpNet(), {}, 0.0};
    auto x = torch::randn({64, 1, 28, 28});
    auto y = torch::randint(0, 10, {64}, torch::kLong);
    auto in = state_of(*task.net);
    in.insert("x", x);
    in.insert("y", y);
    write_file(dir / "in.pt", torch::pickle_save(in));
    run_oracle(fmt::format("amp {} {} {} {}", (dir / "in.pt").string(), dtype_name(dtype),
                           (dir / "out.pt").string(), (dir / "out.json").string()));
    const json ref = json::parse(std::ifstream(dir / "out.json"));

    task.net->to(torch::kCUDA);
    torch::optim::SGD opt(task.net->parameters(), torch::optim::SGDOptions(0.1));
    pt::Trainer<AmpTask, pt::precision::Autocast> trainer(task, opt, pt::precision::Autocast({.dtype = dtype}));
    pt::data::TensorLoader loader(x, y, {.batch_size = 64, .shuffle = false});
    trainer.fit(loader, {.epochs = 1});

    for (const auto& [op, name] : ref["dtypes"].items()) {
      CAPTURE(op);
      CHECK(task.dtypes[op] == name.get<std::string>());
    }
    CHECK(task.loss == doctest::Approx(ref["loss"].get<double>()).epsilon(2e-3));
    CHECK(trainer.policy<pt::Category::precision>().scaling() == (dtype == torch::kHalf));
    auto stepped = torch::pickle_load(read_file(dir / "out.pt")).toGenericDict();
    for (const auto& entry : state_of(*task.net)) {
      const std::string k = entry.key();
      const at::Tensor v = entry.value();
      CAPTURE(k);
      auto r = stepped.at(k).toTensor();
      if (!r.is_floating_point()) { CHECK(torch::equal(v, r)); continue; }
      CHECK(torch::allclose(v, r, /*rtol=*/2e-3, /*atol=*/2e-4));
    }
  }
}

TEST_CASE("CUDA LossScaler equals torch.amp.GradScaler over a scripted inf/NaN sequence, state_dict included") {
  if (!gpu_or_skip()) return;
  const auto dir = scratch("scaler");
  const std::vector<double> c{0.5, -1.25, 3.0};
  const std::vector<std::string> script{"0", "0", "0", "inf", "0", "0", "0", "0", "nan", "inf", "0", "0",
                                        "0", "0", "0", "0", "0", "-inf", "0"};
  json spec{{"init_scale", 1024.0}, {"growth_interval", 3}, {"c", c}, {"script", json::array()}};
  for (const auto& s : script) s == "0" ? spec["script"].push_back(0) : spec["script"].push_back(s);
  std::ofstream(dir / "in.json") << spec.dump();
  run_oracle(fmt::format("scaler {} {}", (dir / "in.json").string(), (dir / "out.json").string()));
  const json ref = json::parse(std::ifstream(dir / "out.json"));

  pt::precision::LossScaler scaler({.init_scale = 1024.0, .growth_interval = 3});
  auto p = torch::zeros({3}, torch::TensorOptions(torch::kCUDA).requires_grad(true));
  auto ct = torch::tensor(c, torch::kFloat).to(torch::kCUDA);
  torch::optim::SGD opt({p}, torch::optim::SGDOptions(0.1));
  for (size_t i = 0; i < script.size(); ++i) {
    CAPTURE(i);
    auto loss = (p * ct).sum();
    if (script[i] != "0") loss = loss * std::stod(script[i]);
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    opt.zero_grad(true);
    const auto& r = ref["steps"][i];
    CHECK(stepped == r["stepped"].get<bool>());
    CHECK(scaler.scale_value() == r["scale"].get<double>());
    CHECK(scaler.growth_tracker() == r["growth_tracker"].get<int64_t>());
    auto rp = torch::tensor(r["p"].get<std::vector<double>>(), torch::kFloat);
    CHECK(torch::allclose(p.detach().cpu(), rp, 1e-6, 1e-7));
  }
  const auto& sd = ref["state_dict"];
  auto ours = scaler.state_dict();
  CHECK(ours.at("scale").item<double>() == sd["scale"].get<double>());
  CHECK(ours.at("growth_tracker").item<int64_t>() == sd["_growth_tracker"].get<int64_t>());
  pt::precision::LossScaler restored;
  restored.load_state_dict(ours);
  CHECK(restored.scale_value() == sd["scale"].get<double>());
  CHECK(restored.growth_tracker() == sd["_growth_tracker"].get<int64_t>());
}

TEST_CASE("CUDA PrefetchLoader: pinned host batches copied on a side stream equal the CPU path's batches") {
  if (!gpu_or_skip()) return;
  auto x = torch::rand({1000, 1, 28, 28});
  auto y = torch::randint(0, 10, {1000}, torch::kLong);
  const pt::data::LoaderOptions lo{.batch_size = 96, .shuffle = true, .seed = 11};
  for (int64_t workers : {0, 2}) {
    CAPTURE(workers);
    pt::data::PrefetchOptions cpu_o{.workers = workers}, gpu_o{.workers = workers, .device = torch::kCUDA};
    cpu_o.augment.enabled = gpu_o.augment.enabled = true;
    pt::data::PrefetchLoader on_cpu(x, y, lo, cpu_o), on_gpu(x, y, lo, gpu_o);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      on_cpu.set_epoch(epoch);
      on_gpu.set_epoch(epoch);
      std::vector<pt::Batch> a(on_cpu.begin(), on_cpu.end());
      size_t i = 0;
      for (auto b : on_gpu) {
        REQUIRE(i < a.size());
        CHECK(b.x.is_cuda());
        // A step's compute on the default stream while the next batch is copied on the side stream.
        (void)torch::mm(torch::rand({512, 512}, torch::kCUDA), torch::rand({512, 512}, torch::kCUDA));
        CHECK(torch::equal(b.x.cpu(), a[i].x));
        CHECK(torch::equal(b.y.cpu(), a[i].y));
        ++i;
      }
      CHECK(i == a.size());
    }
  }
}

TEST_CASE("CUDA PerfKnobs: channels-last, cuDNN benchmark and TF32 are really set, and results stay within tolerance") {
  if (!gpu_or_skip()) return;
  auto& g = at::globalContext();
  torch::manual_seed(5);
  fmnist::Cnn a(16), b(16);
  {
    torch::NoGradGuard ng;
    auto pb = b->named_parameters();
    for (const auto& p : a->named_parameters()) pb[p.key()].copy_(p.value());
  }
  a->to(torch::kCUDA);
  b->to(torch::kCUDA);
  pt::callbacks::PerfKnobs knobs({.channels_last = true, .cudnn_benchmark = true, .tf32 = true});
  knobs.apply(b.get());
  CHECK(g.benchmarkCuDNN());
  CHECK(g.allowTF32CuBLAS());
  CHECK(g.allowTF32CuDNN());
  for (const auto& p : b->parameters())
    if (p.dim() == 4) CHECK(p.is_contiguous(at::MemoryFormat::ChannelsLast));
  auto x = torch::randn({128, 1, 28, 28}, torch::kCUDA);
  auto yb = b->forward(x.contiguous(at::MemoryFormat::ChannelsLast));
  pt::callbacks::PerfKnobs(pt::callbacks::PerfKnobs::Options{}).apply();  // back to the defaults: exact fp32
  CHECK_FALSE(g.allowTF32CuBLAS());
  auto ya = a->forward(x);
  CHECK(torch::allclose(ya, yb, /*rtol=*/1e-2, /*atol=*/1e-2));
}

TEST_CASE("CUDA AutoBatch: the batch found fits the memory fraction, and a real out-of-memory error backs off while training goes on") {
  if (!gpu_or_skip()) return;
  const auto device = torch::Device(torch::kCUDA, 0);
  torch::manual_seed(1);
  fmnist::Cnn net(64);
  net->to(device);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
  const int64_t budget = pt::accumulate::cuda_memory_budget(device.index());
  CHECK(budget > (int64_t{1} << 30));
  const double fraction = 0.02;  // about 1.6 GB of an 80 GB card: the search ends well inside max_batch
  pt::accumulate::AutoBatch ab({.global_batch = 0, .min_batch = 8, .max_batch = 1 << 16, .memory_fraction = fraction},
                               budget);
  auto probe = [&](int64_t batch) {
    return pt::accumulate::cuda_peak_bytes(
        [&](int64_t b) {
          auto x = torch::randn({b, 1, 28, 28}, device);
          auto y = torch::randint(0, 10, {b}, torch::TensorOptions(torch::kLong).device(device));
          torch::nn::functional::cross_entropy(net->forward(x), y).backward();
          opt.zero_grad(true);
        },
        batch, device.index());
  };
  const int64_t found = ab.search(probe);
  CAPTURE(found);
  CHECK(found >= 8);
  CHECK(found < (1 << 16));  // the fraction, not max_batch, ended the search
  // Measured again, independently of the search's own bookkeeping: the batch found fits, one more sample does not.
  CHECK(static_cast<double>(probe(found)) <= fraction * static_cast<double>(budget));
  CHECK(static_cast<double>(probe(found + 1)) > fraction * static_cast<double>(budget));

  // A real out-of-memory error from the caching allocator in the third step of the first plan.
  struct OomTask {
    fmnist::Cnn net;
    int64_t calls = 0, oom_at = 3;
    torch::nn::Module& module() { return *net; }
    torch::Tensor training_step(const pt::Batch& b) {
      if (++calls == oom_at) (void)torch::empty({int64_t{1} << 40}, b.x.options());  // 4 TiB
      return torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
    }
    pt::Prediction validation_step(const pt::Batch& b) {
      auto out = net->forward(b.x);
      return {torch::nn::functional::cross_entropy(out, b.y), out};
    }
  } task{net};
  auto x = torch::randn({512, 1, 28, 28});
  auto y = torch::randint(0, 10, {512}, torch::kLong);
  pt::Trainer<OomTask, pt::accumulate::Steps> trainer(task, opt, pt::accumulate::Steps(1));
  pt::accumulate::BatchPlan p{.micro_batch = 64, .accumulate = 1};
  pt::accumulate::AutoBatch backoff({.global_batch = 64}, budget);
  pt::data::TensorLoader val(x, y, {.batch_size = 256});
  auto result = pt::accumulate::fit_auto_batch(
      trainer, backoff, p,
      [&](int64_t b) { return pt::data::TensorLoader(x, y, {.batch_size = b, .shuffle = false}); }, val,
      pt::FitOptions{.epochs = 1});
  CHECK(p.micro_batch == 32);
  CHECK(p.accumulate == 2);
  CHECK(result.samples_seen == 512);
}

TEST_CASE("CUDA RNG state: a checkpoint round-trips the CUDA generator bit-exactly") {
  if (!gpu_or_skip()) return;
  const auto dir = scratch("rng");
  torch::manual_seed(9);
  struct Task {
    torch::nn::Linear net{4, 2};
    torch::nn::Module& module() { return *net; }
    torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::mse_loss(net(b.x), b.y); }
  } task;
  task.net->to(torch::kCUDA);
  torch::optim::SGD opt(task.net->parameters(), torch::optim::SGDOptions(0.1));
  auto x = torch::randn({16, 4});
  auto y = torch::randn({16, 2});
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  {
    pt::Trainer trainer(task, opt, pt::checkpoint::Disk({.directory = dir, .export_final = false}));
    trainer.fit(loader, {.epochs = 1});
  }
  const auto after_save = torch::rand({1000}, torch::kCUDA);
  (void)torch::rand({777}, torch::kCUDA);  // move the generator on
  pt::Trainer again(task, opt, pt::checkpoint::Disk({.directory = dir, .resume = "auto", .export_final = false}));
  again.fit(loader, {.epochs = 1});  // resumes the finished run: restores the state, trains nothing more
  CHECK(torch::equal(torch::rand({1000}, torch::kCUDA), after_save));
}

TEST_CASE("CUDA: the Fashion-MNIST CNN trains through the Trainer on the GPU as on the CPU") {
  if (!gpu_or_skip()) return;
  auto x = torch::randn({2048, 1, 28, 28});
  auto y = (x.mean({1, 2, 3}) > 0).to(torch::kLong);  // learnable: the sign of the mean
  double acc[2];
  for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
    torch::manual_seed(4);
    fmnist::Classifier task(16);
    if (on_gpu) task.module().to(torch::kCUDA);
    torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(3e-3));
    pt::Trainer trainer(task, opt, pt::precision::Autocast({.dtype = on_gpu ? torch::kHalf : torch::kFloat}));
    pt::data::TensorLoader train(x, y, {.batch_size = 64, .shuffle = true, .seed = 1});
    pt::data::TensorLoader val(x, y, {.batch_size = 512});
    auto r = trainer.fit(train, val, {.epochs = 2});
    acc[on_gpu] = r.validation.back().accuracy;
  }
  CHECK(acc[0] > 0.9);
  CHECK(acc[1] == doctest::Approx(acc[0]).epsilon(0.02));
}

namespace {
// A dispatch-bound MLP with dropout, for the graph and sync tests.
struct DropMlpImpl : torch::nn::Module {
  DropMlpImpl()
      : fc1(register_module("fc1", torch::nn::Linear(64, 256))), fc2(register_module("fc2", torch::nn::Linear(256, 256))),
        fc3(register_module("fc3", torch::nn::Linear(256, 10))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::dropout(torch::relu(fc1(x)), 0.2, is_training());
    h = torch::dropout(torch::relu(fc2(h)), 0.2, is_training());
    return fc3(h);
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(DropMlp);
struct DropMlpTask {
  DropMlp net;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
};
// `n` batches of 32 on the GPU (and one of 20 after them when `short_last`): no host copy inside the loop.
std::vector<pt::Batch> gpu_batches(int64_t n, bool short_last) {
  torch::manual_seed(11);
  std::vector<pt::Batch> v;
  for (int64_t i = 0; i < n + (short_last ? 1 : 0); ++i) {
    const int64_t b = i < n ? 32 : 20;
    auto x = torch::randn({b, 64});
    v.push_back({x.to(torch::kCUDA), (x.sum(1) > 0).to(torch::kLong).to(torch::kCUDA)});
  }
  return v;
}
// Turns on the C++ form of torch.cuda.set_sync_debug_mode("error") after step `from` and off after step `to`, so
// that every synchronising CUDA call of the steps between throws.
struct SyncDebug {
  int64_t from = 1, to = 100;
  template <class Ctx>
  void on_step_end(Ctx& ctx) {
    const int64_t s = ctx.state().global_step;
    if (s == from) c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
    if (s == to) c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
  }
};
struct SyncDebugOff {
  ~SyncDebugOff() { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED); }
};
}  // namespace

TEST_CASE("CUDA: the default and the AMP step synchronise nowhere (sync debug mode \"error\" over 100 steps)") {
  if (!gpu_or_skip()) return;
  SyncDebugOff off;
  auto data = gpu_batches(101, false);
  SUBCASE("defaults: Fp32 with the deferred loss check, a plain optimizer step") {
    torch::manual_seed(1);
    DropMlpTask task{DropMlp()};
    task.net->to(torch::kCUDA);
    pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
    pt::precision::Fp32 fp32;
    fp32.check_every = 1000;  // its interval read (every 64 micro-batches by default) is the one sync it asks for
    pt::Trainer<DropMlpTask, pt::precision::Fp32, SyncDebug> trainer(task, opt, fp32, SyncDebug{1, 101});
    CHECK_NOTHROW(trainer.fit(data, {.epochs = 1}));
    CHECK(trainer.state().global_step == 101);
  }
  SUBCASE("fp16 autocast, loss scaling with the device skip, FusedAdamW, clipping, a schedule") {
    torch::manual_seed(1);
    DropMlpTask task{DropMlp()};
    task.net->to(torch::kCUDA);
    pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
    using AC = pt::precision::Autocast;
    pt::Trainer<DropMlpTask, AC, pt::schedule::Lr, pt::callbacks::GradClip, SyncDebug> trainer(
        task, opt, AC({.dtype = torch::kHalf}), pt::schedule::Lr({.kind = pt::schedule::Kind::cosine, .warmup_steps = 10}),
        pt::callbacks::GradClip({.mode = pt::callbacks::GradClip::Mode::norm, .max_norm = 1.0}), SyncDebug{1, 101});
    CHECK_NOTHROW(trainer.fit(data, {.epochs = 1}));
    CHECK(trainer.get<AC>().scaling());
  }
}

TEST_CASE("CUDA step::CudaGraph: replaying the captured whole step gives the eager step's parameters and every "
          "step's reported loss, norm, lr and stepped flag over 51 steps (dropout on, fp16 AMP with loss scaling, a "
          "schedule moving the lr, clipping, a short last batch)") {
  if (!gpu_or_skip()) return;
  SyncDebugOff off;
  auto data = gpu_batches(50, true);
  using AC = pt::precision::Autocast;
  struct Run {
    torch::Tensor weights;
    testing::StepStream stream;
  };
  const auto run = [&](bool graph, uint64_t dropout_seed, int64_t* replays = nullptr, int64_t* fallbacks = nullptr) {
    torch::manual_seed(5);
    DropMlpTask task{DropMlp()};
    task.net->to(torch::kCUDA);
    torch::cuda::manual_seed_all(dropout_seed);  // the same masks in both runs, if the graph advances the generator
    pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(2e-3));
    AC amp({.dtype = torch::kHalf});
    pt::schedule::Lr lr({.kind = pt::schedule::Kind::cosine, .warmup_steps = 10});
    pt::callbacks::GradClip clip({.mode = pt::callbacks::GradClip::Mode::norm, .max_norm = 1.0});
    Run r;
    r.stream.read_now = false;  // the losses and norms are the tensors each step handed over, read after the fit
    std::vector<torch::Tensor> out;
    if (graph) {
      // Replays synchronise nowhere either: sync debug mode "error" from step 5 (after the capture) to step 50.
      pt::Trainer<DropMlpTask, AC, pt::schedule::Lr, pt::callbacks::GradClip, pt::step::CudaGraph,
                  testing::StepStream, SyncDebug>
          t(task, opt, amp, lr, clip, pt::step::CudaGraph({.warmup_steps = 3}), r.stream, SyncDebug{5, 50});
      t.fit(data, {.epochs = 1});
      *replays = t.get<pt::step::CudaGraph>().replays();
      *fallbacks = t.get<pt::step::CudaGraph>().fallbacks();
    } else {
      pt::Trainer<DropMlpTask, AC, pt::schedule::Lr, pt::callbacks::GradClip, testing::StepStream> t(task, opt, amp,
                                                                                                       lr, clip, r.stream);
      t.fit(data, {.epochs = 1});
    }
    for (auto& p : task.module().parameters()) out.push_back(p.detach().flatten().cpu());
    r.weights = torch::cat(out);
    return r;
  };
  int64_t replays = 0, fallbacks = 0;
  const Run eager = run(false, 9), graph = run(true, 9, &replays, &fallbacks);
  // The scale of a real difference: the same eager run with other dropout masks. A graph that replayed one mask,
  // or a stale lr, or a lost step, lands about that far away; kernels that round differently under capture land
  // orders of magnitude closer.
  const Run other_masks = run(false, 10);
  CHECK(replays == 47);
  CHECK(fallbacks == 1);
  const double diff = (eager.weights - graph.weights).abs().max().item<double>();
  const double spread = (eager.weights - other_masks.weights).abs().max().item<double>();
  INFO("max |eager - graph| = " << diff << ", max |eager - eager with other masks| = " << spread);
  CHECK(spread > 1e-4);
  CHECK(diff <= 0.01 * spread);
  CHECK(torch::isfinite(graph.weights).all().item<bool>());
  // The stream a callback saw, step by step, the same way: each step's loss and gradient norm (the tensors it was
  // handed, read after the fit: a graph that rewrites them in place would show the last step's values), its lr and
  // stepped flag.
  REQUIRE(eager.stream.rows->size() == 51);  // 50 full batches and the short one
  REQUIRE(graph.stream.rows->size() == 51);
  for (const auto& [get, what] : {std::pair{&testing::StepStream::kept_losses, "loss"},
                                  std::pair{&testing::StepStream::kept_norms, "gradient norm"}}) {
    const auto e = torch::tensor((eager.stream.*get)(), torch::kDouble),
               g = torch::tensor((graph.stream.*get)(), torch::kDouble),
               o = torch::tensor((other_masks.stream.*get)(), torch::kDouble);
    const double d = (e - g).abs().max().item<double>(), sp = (e - o).abs().max().item<double>();
    INFO(what << ": max |eager - graph| over the steps = " << d << ", against other masks " << sp);
    CHECK(sp > 1e-4);
    CHECK(d <= 0.01 * sp);
  }
  for (size_t i = 0; i < eager.stream.rows->size(); ++i) {
    const auto &e = (*eager.stream.rows)[i], &g = (*graph.stream.rows)[i];
    INFO("step " << e.step);
    CHECK(g.step == e.step);
    CHECK(g.lr == e.lr);
    CHECK(g.stepped == e.stepped);
  }
}
