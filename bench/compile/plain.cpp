// Compile-cost probe: bench/compile/composition.cpp's program written in plain LibTorch (bench/compile_cost.py,
// unit "plain"): bf16 autocast, accumulation, warmup + cosine, EMA, early stopping, clipping, checkpoints with
// resume, a CSV log and a step counter, each by hand.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const fs::path dir = argc > 1 ? argv[1] : "plain-run";
  fs::create_directories(dir);
  torch::manual_seed(0);
  auto x = torch::rand({2048, 1}) * 12 - 6;
  auto y = (torch::sin(x).squeeze(1) > 0).to(torch::kLong);
  auto xt = x.slice(0, 0, 1536), yt = y.slice(0, 0, 1536), xv = x.slice(0, 1536), yv = y.slice(0, 1536);
  torch::nn::Sequential net{torch::nn::Linear(1, 64), torch::nn::Tanh(), torch::nn::Linear(64, 64), torch::nn::Tanh(),
                            torch::nn::Linear(64, 2)};
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(3e-3));
  std::vector<torch::Tensor> ema;
  for (auto& p : net->parameters()) ema.push_back(p.detach().clone());
  int64_t step = 0, start_epoch = 0;
  if (fs::exists(dir / "last.pt")) {  // resume
    torch::load(net, (dir / "last.pt").string());
    torch::load(opt, (dir / "last-opt.pt").string());
  }
  const int64_t epochs = 3, accum = 2, batch = 32, warmup = 10;
  const int64_t total = epochs * (xt.size(0) / batch) / accum;
  std::ofstream log(dir / "steps.csv");
  log << "step,loss,lr\n";
  double best = std::numeric_limits<double>::infinity();
  int64_t bad = 0;
  for (int64_t epoch = start_epoch; epoch < epochs; ++epoch) {
    auto perm = torch::randperm(xt.size(0));
    for (int64_t i = 0; i + batch <= xt.size(0); i += batch) {
      auto idx = perm.slice(0, i, i + batch);
      torch::Tensor loss;
      {
        at::autocast::set_autocast_enabled(at::kCPU, true);
        at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
        loss = torch::nn::functional::cross_entropy(net->forward(xt.index({idx})).to(torch::kFloat), yt.index({idx}));
        at::autocast::set_autocast_enabled(at::kCPU, false);
        at::autocast::clear_cache();
      }
      (loss / accum).backward();
      if ((i / batch + 1) % accum != 0) continue;
      torch::nn::utils::clip_grad_norm_(net->parameters(), 1.0);
      const double f = step < warmup ? double(step + 1) / warmup
                                     : 0.01 + 0.99 * 0.5 * (1 + std::cos(M_PI * (step - warmup) / (total - warmup)));
      for (auto& g : opt.param_groups()) g.options().set_lr(3e-3 * f);
      opt.step();
      opt.zero_grad();
      ++step;
      const double d = 0.99 * (1 - std::exp(-step / 20.0));
      torch::NoGradGuard ng;
      auto ps = net->parameters();
      for (size_t k = 0; k < ps.size(); ++k) ema[k].mul_(d).add_(ps[k], 1 - d);
      log << step << ',' << loss.item<double>() << ',' << 3e-3 * f << '\n';
    }
    torch::NoGradGuard ng;
    const double val = torch::nn::functional::cross_entropy(net->forward(xv), yv).item<double>();
    std::printf("epoch %lld: val loss %.4f after %lld steps\n", static_cast<long long>(epoch), val,
                static_cast<long long>(step));
    torch::save(net, (dir / "last.pt").string());
    torch::save(opt, (dir / "last-opt.pt").string());
    if (val < best) best = val, bad = 0;
    else if (++bad >= 2) break;
  }
  std::printf("%lld optimizer steps\n", static_cast<long long>(step));
  return 0;
}
