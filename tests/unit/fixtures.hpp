// Fixtures shared by a few unit test files (kept out of helpers.hpp, which every test includes): the lr/momentum
// log of the schedule tests, the tied-weight network of the policy-meeting tests, and a FILE* reader.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <policytrain/schedule/lr.hpp>
#include <torch/torch.h>

namespace testing {

/// Records the lr of every group, and (with `momentum`) the momentum of group 0, that each optimizer step is taken
/// with: before_step runs after every policy, the schedule included, has set them for this step.
struct LrLog {
  std::vector<std::vector<double>>* lr;
  std::vector<double>* momentum = nullptr;
  template <class C> void before_step(C& c) {
    std::vector<double> row;
    for (auto& g : c.optimizer().param_groups()) row.push_back(g.options().get_lr());
    lr->push_back(row);
    if (momentum) momentum->push_back(policytrain::schedule::momentum_of(c.optimizer().param_groups()[0].options()));
  }
};

/// Registers a given tensor as its parameter "weight" (so two holders can share one tensor).
struct HolderImpl : torch::nn::Module {
  torch::Tensor weight;
  explicit HolderImpl(torch::Tensor w) { weight = register_parameter("weight", std::move(w)); }
};
TORCH_MODULE(Holder);

/// y = dec.W tanh(enc.W x) + b, with enc.weight and dec.weight one `width` x `width` tensor (tied), plus an untied
/// bias (random, or zeros without `random_bias`).
struct TiedNetImpl : torch::nn::Module {
  Holder enc{nullptr}, dec{nullptr};
  torch::Tensor bias;
  explicit TiedNetImpl(uint64_t seed = 3, int64_t width = 4, bool random_bias = true) {
    torch::manual_seed(seed);
    auto w = torch::randn({width, width}) * 0.5;
    enc = register_module("enc", Holder(w));
    dec = register_module("dec", Holder(w));
    bias = register_parameter("bias", random_bias ? torch::randn({width}) * 0.1 : torch::zeros({width}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::tanh(x.matmul(enc->weight.t())).matmul(dec->weight.t()) + bias;
  }
};
TORCH_MODULE(TiedNet);

/// Everything written to `f` so far.
inline std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) s.append(buf, n);
  return s;
}

}  // namespace testing
