// Policies that meet on the same state, each pair against a plain LibTorch loop written by hand for it:
//   pair                                  shared state                              test
//   EMA x checkpoint x resume             the average (params + BN buffers)         "EMA x checkpoint x resume" (here)
//   clip x tied weights                   one gradient under two names              "clip x tied weights" (here)
//   accumulation x max_steps              the open window, the epoch position       "accumulation x max_steps" (here)
//   precision (loss scaling) x rollback   the NaN loss, the skipped step, the lr    "precision (loss scaling) x rollback" (here)
//   precision (loss scaling) x auto batch the scaler's state after a failed step    test_policy_meetings.cpp, "fit_auto_batch
//                                                                                     recovers ... with loss scaling"
//   logs x resume                         the run directory's CSV/JSONL rows        test_policy_meetings.cpp, "MetricsLog
//                                                                                     continues a resumed run's logs" (rows
//                                                                                     and values vs the uninterrupted run)
//   rollback x schedule                   the lr                                    test_schedule_reference.cpp,
//                                                                                     "DivergenceRollback x schedule::Lr"
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <policytrain/callbacks/divergence_rollback.hpp>
#include <policytrain/callbacks/ema.hpp>
#include <policytrain/callbacks/grad_clip.hpp>
#include <policytrain/checkpoint/disk.hpp>
#include <policytrain/core/parameters.hpp>

#include "unit/fixtures.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;

namespace {

struct BnMlpImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
  BnMlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(8, 12));
    bn = register_module("bn", torch::nn::BatchNorm1d(12));
    fc2 = register_module("fc2", torch::nn::Linear(12, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(bn(fc1(x)))); }
};
TORCH_MODULE(BnMlp);

struct BnTask {
  BnMlp net;
  explicit BnTask(uint64_t seed) : net(nullptr) {
    torch::manual_seed(seed);
    net = BnMlp();
  }
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
};

}  // namespace

TEST_CASE("EMA x checkpoint x resume: the average of a stopped and resumed run equals a plain loop's") {
  const auto dir = testing::temp_dir("compose-ema");
  auto [x, y] = testing::toy_data(60);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8, .shuffle = true, .seed = 4});  // 8 batches an epoch
  const double decay = 0.9, tau = 4;
  const int64_t epochs = 3;
  using Ema = pt::callbacks::Ema;

  // Plain loop: SGD with momentum, then Ultralytics' update over parameters and float buffers.
  BnTask ref(5);
  torch::optim::SGD opt_ref(ref.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  std::map<std::string, torch::Tensor> avg;
  for (auto& p : ref.module().named_parameters(true)) avg[p.key()] = p.value().detach().clone();
  for (auto& b : ref.module().named_buffers(true))
    if (b.value().is_floating_point()) avg[b.key()] = b.value().detach().clone();
  int64_t t = 0;
  for (int64_t e = 0; e < epochs; ++e) {
    loader.set_epoch(e);
    for (auto&& b : loader) {
      opt_ref.zero_grad();
      torch::nn::functional::cross_entropy(ref.net->forward(b.x), b.y).backward();
      opt_ref.step();
      const double d = decay * (1 - std::exp(-static_cast<double>(++t) / tau));
      torch::NoGradGuard g;
      for (auto& p : ref.module().named_parameters(true)) avg[p.key()].mul_(d).add_(p.value(), 1 - d);
      for (auto& b2 : ref.module().named_buffers(true))
        if (b2.value().is_floating_point()) avg[b2.key()].mul_(d).add_(b2.value(), 1 - d);
    }
  }

  {  // stopped mid-epoch by max_steps (epoch 1, batch 3)
    BnTask task(5);
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    pt::Trainer<BnTask, pt::checkpoint::Disk, Ema> trainer(
        task, opt, pt::checkpoint::Disk({.directory = dir, .export_final = false, .log = nullptr}),
        Ema({.decay = decay, .tau = tau}));
    trainer.fit(loader, {.epochs = epochs, .max_steps = 11});
  }
  BnTask task(99);  // other initial weights: everything comes from the checkpoint
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  pt::Trainer<BnTask, pt::checkpoint::Disk, Ema> trainer(
      task, opt, pt::checkpoint::Disk({.directory = dir, .resume = "auto", .export_final = false, .log = nullptr}),
      Ema({.decay = decay, .tau = tau}));
  trainer.fit(loader, {.epochs = epochs});
  CHECK(trainer.state().global_step == t);
  CHECK(testing::max_rel_diff(task.module(), ref.module()) < 1e-5);
  auto sd = trainer.get<Ema>().state_dict();
  CHECK(sd.at("updates").item<int64_t>() == t);
  for (auto& [k, v] : avg) {
    CAPTURE(k);
    const std::string key = (k.find("running_") != std::string::npos ? "buffer/" : "average/") + k;
    REQUIRE(sd.count(key) == 1);
    CHECK(torch::allclose(sd.at(key), v, 1e-5, 1e-6));
  }
}

namespace {
struct TiedTask {
  testing::TiedNet net{3, 8, false};  // 8 x 8 tied weight, zero bias
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::mse_loss(net->forward(b.x), b.x.flip(1)); }
};
}  // namespace

TEST_CASE("clip x tied weights: Trainer with GradClip equals a loop with clip_grad_norm_ over the unique parameters") {
  auto [x, y] = testing::toy_data(64);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16, .shuffle = true, .seed = 1});
  using GC = pt::callbacks::GradClip;
  for (const double p : {2.0, std::numeric_limits<double>::infinity()}) {
    CAPTURE(p);
    TiedTask task, ref;
    torch::optim::SGD opt(pt::unique_parameters(task.module()), 0.1);
    torch::optim::SGD opt_ref(pt::unique_parameters(ref.module()), 0.1);
    pt::Trainer<TiedTask, GC> trainer(task, opt, GC({.mode = GC::Mode::norm, .max_norm = 0.1, .p = p}));
    trainer.fit(loader, {.epochs = 2});
    std::vector<double> norms;
    for (int64_t e = 0; e < 2; ++e) {
      loader.set_epoch(e);
      for (auto&& b : loader) {
        opt_ref.zero_grad();
        ref.training_step(pt::Batch{b.x, b.y}).backward();
        norms.push_back(torch::nn::utils::clip_grad_norm_(pt::unique_parameters(ref.module()), 0.1, p));
        opt_ref.step();
      }
    }
    REQUIRE(norms.back() > 0.1);  // it clips
    CHECK(trainer.get<GC>().last_norm() == doctest::Approx(norms.back()).epsilon(1e-5));
    CHECK(testing::max_rel_diff(task.module(), ref.module()) < 1e-5);
  }
}

TEST_CASE("accumulation x max_steps: a run cut by max_steps and continued equals a plain accumulating loop") {
  auto [x, y] = testing::toy_data(88);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8, .shuffle = true, .seed = 6});  // 11 batches an epoch
  const int64_t acc = 3, epochs = 2;
  testing::MlpTask task(4), ref(4);
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD opt_ref(ref.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  pt::Trainer<testing::MlpTask, pt::accumulate::Steps> trainer(task, opt, pt::accumulate::Steps(acc));
  trainer.fit(loader, {.epochs = epochs, .max_steps = 5});  // epoch 1, after its second window
  trainer.fit(loader, {.epochs = epochs});
  // Plain loop: windows of 3 micro-batches, the trailing window of 2 stepped at the epoch's end; the gradient of
  // the mean loss over the window's samples.
  int64_t steps = 0;
  for (int64_t e = 0; e < epochs; ++e) {
    loader.set_epoch(e);
    std::vector<pt::Batch> window;
    auto flush = [&] {
      int64_t n = 0;
      for (auto& b : window) n += b.size();
      opt_ref.zero_grad();
      for (auto& b : window) (ref.training_step(b) * (static_cast<double>(b.size()) / n)).backward();
      opt_ref.step();
      ++steps;
      window.clear();
    };
    for (auto&& b : loader) {
      window.push_back(pt::Batch{b.x, b.y});
      if (static_cast<int64_t>(window.size()) == acc) flush();
    }
    if (!window.empty()) flush();
  }
  CHECK(trainer.state().global_step == steps);
  CHECK(testing::max_rel_diff(task.module(), ref.module()) < 1e-5);
}

namespace {
/// MlpTask whose micro-batch number `nan_at` (1-based, counting every call) has a NaN loss.
struct NanOnce : testing::MlpTask {
  int64_t calls = 0, nan_at;
  NanOnce(uint64_t seed, int64_t nan_at) : MlpTask(seed), nan_at(nan_at) {}
  torch::Tensor training_step(const pt::Batch& b) {
    auto loss = MlpTask::training_step(b);
    return ++calls == nan_at ? loss * std::numeric_limits<float>::quiet_NaN() : loss;
  }
};
}  // namespace

TEST_CASE("precision (loss scaling) x rollback: a NaN loss is skipped by the scaler and rolled back, as a plain loop") {
  auto [x, y] = testing::toy_data(80);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8, .shuffle = true, .seed = 3});  // 10 batches an epoch
  using AC = pt::precision::Autocast;
  using DR = pt::callbacks::DivergenceRollback;
  const int64_t nan_at = 7, every = 2;
  const double lr = 0.1, factor = 0.5;
  NanOnce task(6, nan_at);
  testing::MlpTask ref(6);
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(lr).momentum(0.9));
  torch::optim::SGD opt_ref(ref.module().parameters(), torch::optim::SGDOptions(lr).momentum(0.9));
  // fp32 with loss scaling on: power-of-two scales make the scaled run exact, so the plain loop needs no scaler.
  pt::Trainer<NanOnce, AC, DR> trainer(
      task, opt,
      AC({.dtype = torch::kFloat, .loss_scaling = pt::precision::LossScaling::on,
          .scaler = {.init_scale = 1024.0, .growth_interval = 1000}, .on_nonfinite = pt::NonFinite::rollback}),
      DR({.lr_factor = factor, .snapshot_every = every, .log = nullptr}));
  trainer.fit(loader, {.epochs = 2});

  // Plain loop: snapshot (weights + optimizer) at the start and every `every` attempted steps after a good one;
  // on the NaN batch: no step, restore the snapshot, lr *= factor.
  auto snapshot = [&] {
    std::vector<torch::Tensor> w;
    for (auto& p : ref.module().parameters()) w.push_back(p.detach().clone());
    std::vector<torch::Tensor> m;
    for (auto& p : ref.module().parameters()) {
      auto it = opt_ref.state().find(p.unsafeGetTensorImpl());
      m.push_back(it == opt_ref.state().end()
                      ? torch::Tensor()
                      : static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer().clone());
    }
    return std::pair(w, m);
  };
  auto snap = snapshot();
  int64_t step = 0, snap_step = 0, calls = 0;
  double cur_lr = lr;
  for (int64_t e = 0; e < 2; ++e) {
    loader.set_epoch(e);
    for (auto&& b : loader) {
      ++step;
      opt_ref.zero_grad();
      if (++calls == nan_at) {
        torch::NoGradGuard g;
        auto params = ref.module().parameters();
        for (size_t i = 0; i < params.size(); ++i) {
          params[i].copy_(snap.first[i]);
          auto it = opt_ref.state().find(params[i].unsafeGetTensorImpl());
          if (snap.second[i].defined())
            static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer().copy_(snap.second[i]);
          else if (it != opt_ref.state().end())
            opt_ref.state().erase(it);
        }
        cur_lr *= factor;
        opt_ref.param_groups()[0].options().set_lr(cur_lr);
        continue;
      }
      ref.training_step(pt::Batch{b.x, b.y}).backward();
      opt_ref.step();
      if (step - snap_step >= every) {
        snap = snapshot();
        snap_step = step;
      }
    }
  }
  CHECK(trainer.get<DR>().rollbacks() == 1);
  CHECK(trainer.state().skipped_steps == 1);
  CHECK(trainer.policy<pt::Category::precision>().loss_scale() == 512.0);  // backed off once, never grown
  CHECK(opt.param_groups()[0].options().get_lr() == doctest::Approx(cur_lr));
  CHECK(testing::max_rel_diff(task.module(), ref.module()) < 1e-5);
}
