#pragma once
// The deep MLP of the activation-checkpointing tests and benchmark: blocks Linear -> GELU -> Dropout(p) whose
// parameter names are those of Python's nn.Sequential(nn.Linear, nn.GELU(), nn.Dropout(p)) ("0.weight", ...).
// (A torch::nn::Sequential cannot hold another: its forward is a template.)
#include <torch/torch.h>

namespace testing {

struct MlpBlockImpl : torch::nn::Module {
  MlpBlockImpl(int64_t width, double p)
      : lin(register_module("0", torch::nn::Linear(width, width))),
        act(register_module("1", torch::nn::GELU())),
        drop(register_module("2", torch::nn::Dropout(p))) {}
  torch::Tensor forward(const torch::Tensor& x) { return drop(act(lin(x))); }
  torch::nn::Linear lin;
  torch::nn::GELU act;
  torch::nn::Dropout drop;
};
TORCH_MODULE(MlpBlock);

/// `depth` blocks of `width`, then a Linear to `classes` (none when `classes` is 0), initialised from `seed`.
inline torch::nn::Sequential deep_mlp(int64_t depth, int64_t width, int64_t classes, double p, uint64_t seed) {
  torch::manual_seed(seed);
  torch::nn::Sequential s;
  for (int64_t i = 0; i < depth; ++i) s->push_back(MlpBlock(width, p));
  if (classes > 0) s->push_back(torch::nn::Linear(width, classes));
  return s;
}

}  // namespace testing
