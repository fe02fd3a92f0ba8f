// Compile-cost probe: a realistic composition of a user's own program (bench/compile_cost.py, unit "composition").
// A small MLP learns the sign of sin(x) with bf16 autocast, gradient accumulation, a warmup + cosine schedule, an
// EMA of the weights, early stopping, gradient clipping, checkpoints with resume, the metrics log and a callback of
// its own: the ten policies of a first program written from docs/getting-started.md. bench/compile/plain.cpp is
// the same program in plain LibTorch. Both are built and run briefly by CTest (bench.compile_programs), so the
// probe stays a program that compiles and trains.
#include <cstdio>
#include <filesystem>

#include <torch/torch.h>

#include <policytrain/checkpoint.hpp>
#include <policytrain/observe.hpp>
#include <policytrain/policytrain.hpp>

namespace pt = policytrain;

namespace {

struct SineSign {
  torch::nn::Sequential net{torch::nn::Linear(1, 64), torch::nn::Tanh(), torch::nn::Linear(64, 64), torch::nn::Tanh(),
                            torch::nn::Linear(64, 2)};
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = net->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};

// A callback of one's own: counts the optimizer steps and prints the loss of the last validation.
struct StepCounter {
  static constexpr pt::Category category = pt::Category::callback;
  static constexpr std::string_view name = "StepCounter";
  int64_t steps = 0;
  template <class Ctx>
  void after_step(Ctx&, bool stepped) { steps += stepped; }
  template <class Ctx>
  void on_validation_end(Ctx& ctx, const pt::Metrics& m) {
    std::printf("epoch %lld: val loss %.4f after %lld steps\n", static_cast<long long>(ctx.state().epoch),
                m.loss, static_cast<long long>(steps));
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : "composition-run";
  torch::manual_seed(0);
  auto x = torch::rand({2048, 1}) * 12 - 6;
  auto y = (torch::sin(x).squeeze(1) > 0).to(torch::kLong);
  pt::data::TensorLoader train(x.slice(0, 0, 1536), y.slice(0, 0, 1536), {.batch_size = 32, .shuffle = true});
  pt::data::TensorLoader val(x.slice(0, 1536), y.slice(0, 1536), {.batch_size = 256});

  SineSign task;
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(3e-3));
  using Clip = pt::callbacks::GradClip;
  pt::Trainer<SineSign, pt::precision::Autocast, pt::accumulate::Steps, pt::schedule::Lr, pt::checkpoint::Disk,
              pt::callbacks::Ema, pt::callbacks::EarlyStopping, Clip, pt::callbacks::MetricsLog, StepCounter>
      trainer(task, opt, pt::precision::Autocast({.dtype = torch::kBFloat16}), pt::accumulate::Steps(2),
              pt::schedule::Lr({.kind = pt::schedule::Kind::cosine, .warmup_steps = 10}),
              pt::checkpoint::Disk({.directory = dir / "ckpt", .resume = "auto"}),
              pt::callbacks::Ema({.decay = 0.99, .tau = 20}), pt::callbacks::EarlyStopping({.patience = 2}),
              Clip({.mode = Clip::Mode::norm, .max_norm = 1.0}), pt::callbacks::MetricsLog({.dir = dir / "logs"}),
              StepCounter{});
  auto result = trainer.fit(train, val, {.epochs = 3});
  std::printf("%lld optimizer steps\n", static_cast<long long>(result.global_steps));
  return 0;
}
