#pragma once
// tiny_lm's model: a byte-level GPT as nanoGPT builds it (model.py): token and position embeddings, pre-norm blocks of
// causal self-attention (scaled_dot_product_attention) and a GELU MLP, a final LayerNorm, and the output projection
// tied to the token embedding. Module names follow nanoGPT's (wte, wpe, h.<i>.attn.c_attn, ..., ln_f), so the
// exported weights load into a torch.nn model of the same names (tests/parity/tiny_lm.py).
// With `units` (tiny_lm's `--zero 3`), each block is a parallel::FullyShard unit in h's place (the embeddings, ln_f
// and the tied head stay in the root): the wrapper registers the block's children under their own names, so the
// parameter names, their order and the checkpoints are those of the model without units.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include <policytrain/parallel/fully_shard.hpp>

namespace tiny_lm {

/// The model's sizes.
struct GptConfig {
  int64_t vocab = 256;  // bytes
  int64_t block = 128;  // tokens of context
  int64_t layers = 4;
  int64_t d_model = 128;
  int64_t heads = 4;
};

// A Linear module applied as Python's nn.Linear applies it: ATen's linear (one fused matrix product with the bias,
// autocast's linear under precision::Autocast). LibTorch's torch::nn::Linear::forward on an input of more than two
// dimensions runs a matmul and then adds the bias in place; under bf16 autocast that add is an fp32 bias on a bf16
// product, computed in fp32 and cast back, forward and backward (bench/RESULTS.md, "tiny_lm": the casts of a step
// took 1.4x Python's time).
inline torch::Tensor linear(const torch::nn::Linear& l, const torch::Tensor& x) {
  return at::linear(x, l->weight, l->bias);
}

struct AttentionImpl : torch::nn::Module {
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  int64_t heads;
  AttentionImpl(const GptConfig& c) : heads(c.heads) {
    c_attn = register_module("c_attn", torch::nn::Linear(c.d_model, 3 * c.d_model));
    c_proj = register_module("c_proj", torch::nn::Linear(c.d_model, c.d_model));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
    auto qkv = linear(c_attn, x).split(d, 2);
    auto heads_of = [&](const torch::Tensor& v) { return v.view({b, t, heads, d / heads}).transpose(1, 2); };
    auto y = at::scaled_dot_product_attention(heads_of(qkv[0]), heads_of(qkv[1]), heads_of(qkv[2]), {}, 0.0,
                                              /*is_causal=*/true);
    return linear(c_proj, y.transpose(1, 2).contiguous().view({b, t, d}));
  }
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  explicit MlpImpl(const GptConfig& c) {
    c_fc = register_module("c_fc", torch::nn::Linear(c.d_model, 4 * c.d_model));
    c_proj = register_module("c_proj", torch::nn::Linear(4 * c.d_model, c.d_model));
  }
  // nn.GELU's exact (erf) form, as nanoGPT's.
  torch::Tensor forward(const torch::Tensor& x) { return linear(c_proj, torch::gelu(linear(c_fc, x))); }
};
TORCH_MODULE(Mlp);

struct BlockImpl : torch::nn::Module {
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};
  explicit BlockImpl(const GptConfig& c) {
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
    attn = register_module("attn", Attention(c));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
    mlp = register_module("mlp", Mlp(c));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = x + attn->forward(ln_1->forward(x));
    return x + mlp->forward(ln_2->forward(x));
  }
};
TORCH_MODULE(Block);

struct GptImpl : torch::nn::Module {
  GptConfig config;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  torch::nn::ModuleList h;
  torch::nn::LayerNorm ln_f{nullptr};

  /// With `units`, each block is a parallel::FullyShard unit (see the file comment); without stage 3 a unit calls
  /// its block directly.
  explicit GptImpl(GptConfig c, bool units = false) : config(c) {
    wte = register_module("wte", torch::nn::Embedding(c.vocab, c.d_model));
    wpe = register_module("wpe", torch::nn::Embedding(c.block, c.d_model));
    h = register_module("h", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.layers; ++i) {
      if (units) h->push_back(policytrain::parallel::FullyShard<Block>(Block(c)));
      else h->push_back(Block(c));
    }
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
    init_weights();
  }

  /// Logits [batch, tokens, vocab] of token ids [batch, tokens] (tokens <= block).
  torch::Tensor forward(const torch::Tensor& idx) {
    const auto pos = torch::arange(idx.size(1), torch::TensorOptions().dtype(torch::kLong).device(idx.device()));
    auto x = wte->forward(idx) + wpe->forward(pos);
    for (const auto& block : *h) {
      if (auto* unit = block->as<policytrain::parallel::FullyShard<Block>>()) x = unit->forward(x);
      else x = block->as<Block>()->forward(x);
    }
    // The output projection is the token embedding (weight tying): one matrix, counted once by the optimizer.
    return at::linear(ln_f->forward(x), wte->weight);
  }

  /// nanoGPT's _init_weights: N(0, 0.02) for linear and embedding weights, zero biases, and the residual
  /// projections (c_proj) scaled down by sqrt(2 · layers) (GPT-2's residual scaling).
  void init_weights() {
    torch::NoGradGuard no_grad;
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      torch::Tensor& p = item.value();
      if (name.ends_with(".bias")) {
        p.zero_();  // LayerNorm's biases are zero already
      } else if (name.find("ln_") == std::string::npos) {  // LayerNorm's gains stay 1
        const bool residual = name.ends_with("c_proj.weight");
        p.normal_(0.0, residual ? 0.02 / std::sqrt(2.0 * static_cast<double>(config.layers)) : 0.02);
      }
    }
  }
};
TORCH_MODULE(Gpt);

/// nanoGPT's configure_optimizers rule: every parameter of two or more dimensions (matrices, embeddings) decays,
/// the others (biases, LayerNorm gains) do not. Two param groups, decay first, in the order of parameters().
inline std::vector<torch::optim::OptimizerParamGroup> decay_groups(torch::nn::Module& m, double weight_decay,
                                                                  double lr, double beta2) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : m.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(lr).betas({0.9, beta2}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(decay), options(weight_decay));
  groups.emplace_back(std::move(no_decay), options(0.0));
  return groups;
}

}  // namespace tiny_lm
