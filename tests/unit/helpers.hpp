#pragma once
// Small models, tasks and data shared by the unit tests.
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <policytrain/all.hpp>

namespace testing {

/// An MLP without batch norm or dropout, so that results depend only on the data and the arithmetic.
struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in = 8, int64_t hidden = 16, int64_t out = 3)
      : fc1(register_module("fc1", torch::nn::Linear(in, hidden))), fc2(register_module("fc2", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

struct MlpTask {
  Mlp net;
  explicit MlpTask(uint64_t seed = 1, int64_t in = 8, int64_t hidden = 16, int64_t out = 3) : net(nullptr) {
    torch::manual_seed(seed);
    net = Mlp(in, hidden, out);
  }
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const policytrain::Batch& b) {
    return torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
  }
  policytrain::Prediction validation_step(const policytrain::Batch& b) {
    auto out = net->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};

/// A fixed classification data set of n samples.
inline std::pair<torch::Tensor, torch::Tensor> toy_data(int64_t n = 96, int64_t in = 8, int64_t classes = 3, uint64_t seed = 7) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  auto x = torch::randn({n, in}, gen);
  auto y = torch::randint(0, classes, {n}, gen, torch::kLong);
  return {x, y};
}

/// Copies every parameter and buffer of `from` into `to` (same architecture).
inline void copy_weights(torch::nn::Module& to, const torch::nn::Module& from) {
  torch::NoGradGuard g;
  auto src = from.named_parameters(true);
  for (auto& p : to.named_parameters(true)) p.value().copy_(src[p.key()]);
}

inline bool same_params(const torch::nn::Module& a, const torch::nn::Module& b) {
  auto pb = b.named_parameters(true);
  for (const auto& p : a.named_parameters(true))
    if (!torch::equal(p.value(), pb[p.key()])) return false;
  return true;
}

inline double max_rel_diff(const torch::nn::Module& a, const torch::nn::Module& b) {
  double worst = 0;
  auto pb = b.named_parameters(true);
  for (const auto& p : a.named_parameters(true)) {
    auto d = (p.value() - pb[p.key()]).abs().max().item<double>();
    auto s = pb[p.key()].abs().max().item<double>();
    worst = std::max(worst, d / std::max(s, 1e-12));
  }
  return worst;
}

/// A fresh, empty directory under the system's temp dir.
inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("policytrain-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace testing
