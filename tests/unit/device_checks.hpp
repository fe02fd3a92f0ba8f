#pragma once
// Checks that run on any device: the CUDA tests (tests/cuda/test_cuda.cpp) call them on the GPU, the CPU unit
// tests on the CPU, so that every GPU case has a CPU half that the CPU CI runs (same code, same oracle, same
// file formats).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/all.hpp>

#include "fashion_mnist/model.hpp"

namespace device_checks {

namespace fs = std::filesystem;
namespace pt = policytrain;

inline fs::path scratch(const std::string& name) {
  auto d = fs::path(POLICYTRAIN_BINARY_DIR) / "device-scratch" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case torch::kFloat: return "float32";
    case torch::kHalf: return "float16";
    case torch::kBFloat16: return "bfloat16";
    default: return c10::toString(t);
  }
}

/// The same network as tests/cuda/oracle.py's AmpNet (same parameter names), recording each op's output dtype.
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

inline c10::Dict<std::string, at::Tensor> state_of(torch::nn::Module& m) {
  c10::Dict<std::string, at::Tensor> d;
  for (const auto& p : m.named_parameters()) d.insert(p.key(), p.value().detach().cpu());
  for (const auto& b : m.named_buffers()) d.insert(b.key(), b.value().detach().cpu());
  return d;
}

inline void write_file(const fs::path& f, const std::vector<char>& bytes) {
  std::ofstream(f, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
inline std::vector<char> read_file(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void run_oracle(const std::string& args) {
  const std::string cmd = "python3 " + std::string(POLICYTRAIN_SOURCE_DIR) + "/tests/cuda/oracle.py " + args;
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

/// One training step of AmpNet through Trainer<AmpTask, precision::Autocast> on `device` against Python's
/// torch.autocast(device, dtype) (+ GradScaler for fp16 on CUDA) run on the same weights and batch by
/// tests/cuda/oracle.py, which reads them from a torch::pickle_save file: per-op dtypes, loss, stepped state.
inline void autocast_equals_python(const torch::Device& device, c10::ScalarType dtype) {
  CAPTURE(dtype_name(dtype));
  CAPTURE(device.str());
  const auto dir = scratch(fmt::format("amp_{}_{}", device.is_cuda() ? "cuda" : "cpu", dtype_name(dtype)));
  torch::manual_seed(3);
  AmpTask task{AmpNet(), {}, 0.0};
  auto x = torch::randn({64, 1, 28, 28});
  auto y = torch::randint(0, 10, {64}, torch::kLong);
  auto in = state_of(*task.net);
  in.insert("x", x);
  in.insert("y", y);
  write_file(dir / "in.pt", torch::pickle_save(in));
  run_oracle(fmt::format("amp {} {} {} {} {}", (dir / "in.pt").string(), dtype_name(dtype), (dir / "out.pt").string(),
                         (dir / "out.json").string(), device.is_cuda() ? "cuda" : "cpu"));
  const auto ref = nlohmann::json::parse(std::ifstream(dir / "out.json"));

  task.net->to(device);
  torch::optim::SGD opt(task.net->parameters(), torch::optim::SGDOptions(0.1));
  pt::Trainer<AmpTask, pt::precision::Autocast> trainer(task, opt, pt::precision::Autocast({.dtype = dtype}));
  pt::data::TensorLoader loader(x, y, {.batch_size = 64, .shuffle = false});
  trainer.fit(loader, {.epochs = 1});

  CHECK(ref["dtypes"].size() == 6);
  for (const auto& [op, name] : ref["dtypes"].items()) {
    CAPTURE(op);
    CHECK(task.dtypes[op] == name.get<std::string>());
  }
  CHECK(task.loss == doctest::Approx(ref["loss"].get<double>()).epsilon(2e-3));
  CHECK(trainer.policy<pt::Category::precision>().scaling() == ref["scaling"].get<bool>());
  auto stepped = torch::pickle_load(read_file(dir / "out.pt")).toGenericDict();
  for (const auto& entry : state_of(*task.net)) {
    const std::string k = entry.key();
    const at::Tensor v = entry.value();
    CAPTURE(k);
    auto r = stepped.at(k).toTensor();
    if (!r.is_floating_point()) {
      CHECK(torch::equal(v, r));
      continue;
    }
    CHECK(torch::allclose(v, r, /*rtol=*/2e-3, /*atol=*/2e-4));
  }
}

/// PerfKnobs (channels-last, cuDNN benchmark, TF32) against exact fp32 on the same weights, in eval mode (no
/// dropout masks, running batch-norm statistics). Returns {largest output difference, tolerance}. The
/// tolerance comes from TF32's precision: TF32 keeps 10 mantissa bits (unit roundoff u = 2^-11); a conv or
/// linear layer that rounds both operands errs by at most 2u of its sum of absolute products, the CNN has 4 such
/// layers, and batch norm with unit running statistics scales nothing up: 2 * 4 * u of the largest output.
struct KnobsGap {
  double max_abs_diff, tolerance;
};
inline KnobsGap perf_knobs_gap(const torch::Device& device) {
  torch::manual_seed(5);
  fmnist::Cnn a(16), b(16);
  {
    torch::NoGradGuard ng;
    auto pb = b->named_parameters();
    for (const auto& p : a->named_parameters()) pb[p.key()].copy_(p.value());
  }
  a->to(device);
  b->to(device);
  a->eval();
  b->eval();
  pt::callbacks::PerfKnobs knobs({.channels_last = true, .cudnn_benchmark = true, .tf32 = true});
  knobs.apply(b.get());
  for (const auto& p : b->parameters())
    if (p.dim() == 4) CHECK(p.is_contiguous(at::MemoryFormat::ChannelsLast));
  torch::NoGradGuard ng;
  auto x = torch::randn({128, 1, 28, 28}, device);
  auto yb = b->forward(x.contiguous(at::MemoryFormat::ChannelsLast));
  pt::callbacks::PerfKnobs(pt::callbacks::PerfKnobs::Options{}).apply();  // back to the defaults: exact fp32
  auto ya = a->forward(x);
  constexpr double u_tf32 = 1.0 / 2048.0;
  const double tol = 2 * 4 * u_tf32 * ya.abs().max().item<double>();
  return {(ya - yb).abs().max().item<double>(), tol};
}

/// The Fashion-MNIST CNN learns a task through the Trainer in 2 short epochs: each of 10 classes is a fixed
/// random 28x28 pattern under noise of the same size. Returns the validation accuracy.
inline double cnn_learns(const torch::Device& device, c10::ScalarType autocast_dtype) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(21);
  auto templates = torch::randn({10, 1, 28, 28}, gen);
  auto y = torch::randint(0, 10, {2048}, gen, torch::kLong);
  auto x = templates.index_select(0, y) + torch::randn({2048, 1, 28, 28}, gen);
  torch::manual_seed(4);
  fmnist::Classifier task(16);
  task.module().to(device);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(3e-3));
  pt::Trainer trainer(task, opt, pt::precision::Autocast({.dtype = autocast_dtype}));
  pt::data::TensorLoader train(x, y, {.batch_size = 64, .shuffle = true, .seed = 1});
  pt::data::TensorLoader val(x, y, {.batch_size = 512});
  auto r = trainer.fit(train, val, {.epochs = 2});
  return r.validation.back().accuracy;
}

}  // namespace device_checks
