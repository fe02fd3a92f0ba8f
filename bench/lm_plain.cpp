// The plain LibTorch loop of tiny_lm's recipe, for bench/lm_tokens.py: the same GPT (examples/tiny_lm/model.hpp),
// the same windows (data::TokenStream), nanoGPT's get_lr set by hand, clip_grad_norm_, the fused AdamW kernel of
// `tiny_lm --fused` (optim::FusedAdamW: the optimizer, not the loop, so both loops run the same update) and, for bf16,
// LibTorch's CPU autocast switched on around the forward. No Trainer: what a user writes without policytrain.
// Usage: lm_plain DATA_DIR STEPS BATCH BLOCK LAYERS D_MODEL HEADS THREADS fp32|bf16
// Prints one JSON line: steps, tokens, seconds (the training loop's wall time) and tokens_per_second.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <policytrain/data/token_stream.hpp>
#include <policytrain/optim/fused_adamw.hpp>

#include "tiny_lm/model.hpp"

int main(int argc, char** argv) {
  if (argc != 10) {
    std::fprintf(stderr, "usage: lm_plain DATA_DIR STEPS BATCH BLOCK LAYERS D_MODEL HEADS THREADS fp32|bf16\n");
    return 2;
  }
  const std::string data = argv[1];
  const int64_t steps = std::stoll(argv[2]), batch = std::stoll(argv[3]);
  tiny_lm::GptConfig c{.block = std::stoll(argv[4]), .layers = std::stoll(argv[5]), .d_model = std::stoll(argv[6]),
                       .heads = std::stoll(argv[7])};
  torch::set_num_threads(std::stoi(argv[8]));
  const bool bf16 = std::string(argv[9]) == "bf16";
  const double lr = 2e-3, min_lr = 2e-4;
  const int64_t warmup = 10;
  torch::manual_seed(1337);
  tiny_lm::Gpt gpt(c);
  policytrain::optim::FusedAdamW opt(tiny_lm::decay_groups(*gpt, 0.1, lr, 0.95), torch::optim::AdamWOptions(lr));
  policytrain::data::TokenStream train(data + "/train.bin", policytrain::data::TokenType::uint16,
                                       {.block_size = c.block, .batch_size = batch, .seed = 1337});
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t it = 0; it < steps; ++it) {
    const double step_lr = it < warmup ? lr * static_cast<double>(it + 1) / static_cast<double>(warmup + 1)
                                       : min_lr + 0.5 * (1 + std::cos(M_PI * static_cast<double>(it - warmup) /
                                                                      static_cast<double>(steps - warmup))) *
                                                      (lr - min_lr);
    for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(step_lr);
    const auto b = train.batch(it);
    torch::Tensor loss;
    if (bf16) {
      at::autocast::set_autocast_enabled(at::kCPU, true);
      at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
      at::autocast::increment_nesting();
      const auto logits = gpt->forward(b.x);
      loss = torch::nn::functional::cross_entropy(logits.flatten(0, 1), b.y.flatten());
      if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
      at::autocast::set_autocast_enabled(at::kCPU, false);
    } else {
      const auto logits = gpt->forward(b.x);
      loss = torch::nn::functional::cross_entropy(logits.flatten(0, 1), b.y.flatten());
    }
    opt.zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(gpt->parameters(), 1.0);
    opt.step();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t tokens = steps * batch * c.block;
  std::printf("{\"steps\": %lld, \"tokens\": %lld, \"seconds\": %.6f, \"tokens_per_second\": %.3f}\n",
              static_cast<long long>(steps), static_cast<long long>(tokens), s, static_cast<double>(tokens) / s);
  return 0;
}
