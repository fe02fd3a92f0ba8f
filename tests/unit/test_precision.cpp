// Mixed precision: the autocast guard's scope semantics, the loss scaler against GradScaler's rule, skipped steps
// through the Trainer, and bf16/fp16 training of the Fashion-MNIST CNN against fp32.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <policytrain/detail/torch_compat.hpp>
#include <policytrain/precision/autocast.hpp>
#include <policytrain/precision/autocast_guard.hpp>
#include <policytrain/precision/loss_scaler.hpp>

#include "fashion_mnist/model.hpp"
#include "unit/device_checks.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
using pt::precision::Autocast;
using pt::precision::AutocastGuard;
using pt::precision::LossScaler;
using pt::precision::LossScaling;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string name(torch::ScalarType t) { return c10::toString(t); }
/// The dtype of a matmul of two fp32 tensors, by name (doctest prints strings).
std::string matmul_dtype() { return name(torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type()); }

/// The scale and growth tracker of GradScaler after one step, by its documented rule.
struct ScaleRule {
  double scale;
  int64_t tracker = 0;
  int grows = 0, backoffs = 0;
  void step(bool finite, double growth, double backoff, int64_t interval) {
    if (!finite) {
      scale *= backoff;
      tracker = 0;
      ++backoffs;
    } else if (++tracker == interval) {
      const float grown = static_cast<float>(scale * growth);  // the scale is a float32 tensor
      if (std::isfinite(grown)) scale = grown, ++grows;
      tracker = 0;
    }
  }
};

/// One step of the scaler on the loss (p * c).sum(), whose true gradient is c; `poison` replaces the first
/// gradient element after backward (finite: no change).
bool scaler_step(LossScaler& s, torch::optim::Optimizer& opt, torch::Tensor p, torch::Tensor c, double poison,
                 torch::Tensor* unscaled_grad = nullptr) {
  s.scale((p * c).sum()).backward();
  if (!std::isfinite(poison)) {
    torch::NoGradGuard g;
    p.mutable_grad()[0] = poison;
  }
  s.unscale(opt);
  if (unscaled_grad) *unscaled_grad = p.grad().clone();
  const bool stepped = s.step(opt);
  s.update();
  opt.zero_grad();
  return stepped;
}

/// Replaces one gradient element with inf or NaN after backward, at the given optimizer steps.
struct InjectNonFinite {
  std::map<int64_t, double> at;  // global step -> value
  template <class C, class F>
  void around_backward(C& c, F&& f) {
    f();
    if (auto it = at.find(c.state().global_step); it != at.end()) {
      torch::NoGradGuard g;
      c.module().parameters().front().mutable_grad().view(-1)[0] = it->second;
    }
  }
};

/// Records what a schedule or EMA would see, and whether a skipped step changed anything.
struct StepWatch {
  std::vector<bool> stepped;
  std::vector<double> scale_before, scale_after;
  std::vector<bool> unchanged;  // per step: parameters and optimizer state bit-identical across the step
  std::vector<torch::Tensor> params, adam;

  static std::vector<torch::Tensor> adam_state(torch::optim::Optimizer& opt) {
    std::vector<torch::Tensor> out;
    for (auto& g : opt.param_groups())
      for (auto& p : g.params()) {
        auto it = opt.state().find(p.unsafeGetTensorImpl());
        if (it == opt.state().end()) continue;
        if (auto* st = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) {
          out.push_back(st->exp_avg().clone());
          out.push_back(st->exp_avg_sq().clone());
          out.push_back(torch::tensor(st->step()));
        }
      }
    return out;
  }
  static std::vector<torch::Tensor> param_copy(torch::nn::Module& m) {
    std::vector<torch::Tensor> out;
    for (auto& p : m.parameters()) out.push_back(p.detach().clone());
    return out;
  }
  static bool equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!torch::equal(a[i], b[i])) return false;
    return true;
  }
  template <class C>
  void before_step(C& c) {  // runs after the precision policy's unscale and before the optimizer step
    scale_before.push_back(c.template policy<pt::Category::precision>().loss_scale());
    params = param_copy(c.module());
    adam = adam_state(c.optimizer());
  }
  template <class C>
  void after_step(C& c, bool s) {
    stepped.push_back(s);
    scale_after.push_back(c.template policy<pt::Category::precision>().loss_scale());
    unchanged.push_back(equal(params, param_copy(c.module())) &&
                        (adam.empty() || equal(adam, adam_state(c.optimizer()))));
  }
};

/// MlpTask whose loss is multiplied by NaN on the given calls of training_step.
struct PoisonedLossTask : testing::MlpTask {
  std::set<int64_t> poison;
  int64_t calls = 0;
  using testing::MlpTask::MlpTask;
  torch::Tensor training_step(const pt::Batch& b) {
    auto loss = testing::MlpTask::training_step(b);
    return poison.count(calls++) ? loss * kNaN : loss;
  }
};

}  // namespace

TEST_CASE("AutocastGuard: dtypes inside and outside, nesting, exceptions, the cast cache") {
  REQUIRE_FALSE(pt::detail::autocast_enabled(torch::kCPU));
  const auto original_dtype = pt::detail::autocast_dtype(torch::kCPU);
  CHECK(matmul_dtype() == name(torch::kFloat));

  SUBCASE("inside a bf16 or fp16 scope a matmul yields that dtype; outside fp32; the prior state comes back") {
    {
      AutocastGuard outer(torch::kCPU, torch::kBFloat16);
      CHECK(pt::detail::autocast_enabled(torch::kCPU));
      CHECK(matmul_dtype() == name(torch::kBFloat16));
      {
        AutocastGuard inner(torch::kCPU, torch::kHalf);
        CHECK(matmul_dtype() == name(torch::kHalf));
      }
      CHECK(matmul_dtype() == name(torch::kBFloat16));  // the inner scope restored the outer's dtype
      {
        AutocastGuard off(torch::kCPU, std::nullopt, /*enabled=*/false);
        CHECK_FALSE(pt::detail::autocast_enabled(torch::kCPU));
        CHECK(matmul_dtype() == name(torch::kFloat));
      }
      CHECK(pt::detail::autocast_enabled(torch::kCPU));
      CHECK(matmul_dtype() == name(torch::kBFloat16));
    }
    CHECK_FALSE(pt::detail::autocast_enabled(torch::kCPU));
    CHECK(name(pt::detail::autocast_dtype(torch::kCPU)) == name(original_dtype));
    CHECK(matmul_dtype() == name(torch::kFloat));
  }

  SUBCASE("an exception thrown inside leaves autocast off again") {
    try {
      AutocastGuard g(torch::kCPU, torch::kHalf);
      REQUIRE(matmul_dtype() == name(torch::kHalf));
      throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    CHECK_FALSE(pt::detail::autocast_enabled(torch::kCPU));
    CHECK(name(pt::detail::autocast_dtype(torch::kCPU)) == name(original_dtype));
    CHECK(matmul_dtype() == name(torch::kFloat));
    // And the nesting count is back to zero: a new scope's exit is the outermost one again.
    CHECK(pt::detail::autocast_increment_nesting() == 1);
    CHECK(pt::detail::autocast_decrement_nesting() == 0);
  }

  SUBCASE("the cast cache holds a weight's low-precision copy until the outermost scope ends") {
    // The cache keeps a weak reference to each fp32 leaf it cast, visible in the leaf's weak count.
    auto w = torch::randn({4, 4}, torch::requires_grad());
    const auto weak0 = w.weak_use_count();
    {
      AutocastGuard outer(torch::kCPU, torch::kBFloat16);
      {
        AutocastGuard inner(torch::kCPU, torch::kBFloat16);
        auto y = torch::mm(w, torch::ones({4, 4}));
        CHECK(name(y.scalar_type()) == name(torch::kBFloat16));
        CHECK(w.weak_use_count() == weak0 + 1);
      }
      CHECK(w.weak_use_count() == weak0 + 1);  // an inner scope's end keeps the cache for the outer one
    }
    CHECK(w.weak_use_count() == weak0);  // cleared with the outermost scope
  }

  SUBCASE("a CUDA scope changes only CUDA's state (compiles and runs in a CPU build)") {
    {
      AutocastGuard g(torch::kCUDA, torch::kHalf);
      CHECK(pt::detail::autocast_enabled(torch::kCUDA));
      CHECK_FALSE(pt::detail::autocast_enabled(torch::kCPU));
      CHECK(matmul_dtype() == name(torch::kFloat));
    }
    CHECK_FALSE(pt::detail::autocast_enabled(torch::kCUDA));
  }

  SUBCASE("an unsupported dtype is refused before any state changes") {
    CHECK_THROWS_AS(AutocastGuard(torch::kCPU, torch::kDouble), std::invalid_argument);
    CHECK_FALSE(pt::detail::autocast_enabled(torch::kCPU));
    CHECK(pt::detail::autocast_increment_nesting() == 1);
    CHECK(pt::detail::autocast_decrement_nesting() == 0);
  }
}

TEST_CASE("LossScaler: scale and growth tracker follow GradScaler's rule over a scripted sequence") {
  SUBCASE("defaults are GradScaler's") {
    LossScaler s;
    CHECK(s.options().init_scale == 65536.0);
    CHECK(s.options().growth_factor == 2.0);
    CHECK(s.options().backoff_factor == 0.5);
    CHECK(s.options().growth_interval == 2000);
    CHECK(s.scale_value() == 65536.0);
  }

  const double growth = 2.0, backoff = 0.5;
  const int64_t interval = 3;
  LossScaler scaler({.init_scale = 1024.0, .growth_factor = growth, .backoff_factor = backoff, .growth_interval = interval});
  auto p = torch::zeros({3}, torch::requires_grad());
  torch::optim::SGD opt({p}, torch::optim::SGDOptions(0.1));
  const auto c = torch::tensor({0.5, -1.25, 3.0}, torch::kFloat);

  // finite (0), inf or NaN gradients; growth after runs of `interval` finite steps, backoff on every other one.
  const std::vector<double> script{0, 0, 0, kInf, 0, 0, 0, 0, kNaN, kInf, 0, 0, 0, 0, 0, 0, 0, -kInf, 0};
  ScaleRule rule{1024.0};
  int64_t skipped = 0;
  auto expected_p = torch::zeros({3});
  for (size_t i = 0; i < script.size(); ++i) {
    CAPTURE(i);
    const bool finite = std::isfinite(script[i]);
    const auto p_before = p.detach().clone();
    torch::Tensor g;
    const bool stepped = scaler_step(scaler, opt, p, c, script[i], &g);
    CHECK(stepped == finite);
    if (finite) {
      CHECK(torch::equal(g, c));  // unscaled exactly: S is a power of two
      expected_p -= 0.1 * c;
      CHECK(torch::allclose(p.detach(), expected_p));
    } else {
      ++skipped;
      CHECK(torch::equal(p.detach(), p_before));
    }
    rule.step(finite, growth, backoff, interval);
    CHECK(scaler.scale_value() == rule.scale);
    CHECK(scaler.growth_tracker() == rule.tracker);
    CHECK(scaler.skipped_steps() == skipped);
  }
  CHECK(rule.grows == 4);  // the script exercises both directions
  CHECK(rule.backoffs == 4);

  SUBCASE("state_dict round trip: a fresh scaler continues identically") {
    LossScaler fresh;
    fresh.load_state_dict(scaler.state_dict());
    CHECK(fresh.scale_value() == scaler.scale_value());
    CHECK(fresh.growth_tracker() == scaler.growth_tracker());
    CHECK(fresh.skipped_steps() == scaler.skipped_steps());
    CHECK(fresh.options().growth_interval == interval);
    for (double poison : {0.0, 0.0, 0.0, kNaN}) {
      scaler_step(scaler, opt, p, c, poison);
      scaler_step(fresh, opt, p, c, poison);
      CHECK(fresh.scale_value() == scaler.scale_value());
      CHECK(fresh.growth_tracker() == scaler.growth_tracker());
    }
  }

  SUBCASE("2000 finite steps with the defaults double the scale once") {
    LossScaler s;
    ScaleRule r{65536.0};
    for (int i = 0; i < 2000; ++i) {
      scaler_step(s, opt, p, c, 0);
      r.step(true, 2.0, 0.5, 2000);
      if (i == 1998) CHECK(s.scale_value() == 65536.0);
    }
    CHECK(r.scale == 131072.0);
    CHECK(s.scale_value() == r.scale);
    CHECK(s.growth_tracker() == 0);
  }

  SUBCASE("growth that would overflow float32 keeps the scale") {
    const double big = std::ldexp(1.0, 127);
    LossScaler s({.init_scale = big, .growth_interval = 1});
    auto q = torch::zeros({3}, torch::requires_grad());
    torch::optim::SGD o({q}, torch::optim::SGDOptions(0.1));
    scaler_step(s, o, q, c * 1e-3, 0);
    ScaleRule r{big};
    r.step(true, 2.0, 0.5, 1);
    CHECK(r.scale == big);
    CHECK(s.scale_value() == big);
    CHECK(s.growth_tracker() == 0);
  }

  SUBCASE("misuse: unscaling twice in one step, stepping twice, bad options") {
    LossScaler s;
    s.scale((p * c).sum()).backward();
    s.unscale(opt);
    CHECK_THROWS_AS(s.unscale(opt), std::logic_error);
    s.step(opt);
    CHECK_THROWS_AS(s.step(opt), std::logic_error);
    s.update();
    opt.zero_grad();
    CHECK_THROWS_AS(LossScaler({.growth_factor = 1.0}), std::invalid_argument);
    CHECK_THROWS_AS(LossScaler({.backoff_factor = 1.5}), std::invalid_argument);
  }
}

namespace {

/// Trains the MLP under Autocast with inf at step 2 and NaN at step 5 injected into a gradient.
void check_injected_gradients(Autocast::Options o) {
  auto [x, y] = testing::toy_data(64);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8, .shuffle = false});  // 8 steps
  testing::MlpTask task(3);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-2));
  pt::Trainer<testing::MlpTask, Autocast, InjectNonFinite, StepWatch> trainer(
      task, opt, Autocast(o), InjectNonFinite{{{2, kInf}, {5, kNaN}}});
  auto result = trainer.fit(loader, {.epochs = 1});

  const auto& w = trainer.get<StepWatch>();
  const std::vector<bool> expected{true, true, false, true, true, false, true, true};
  CHECK(w.stepped == expected);  // what a schedule or EMA receives in after_step
  CHECK(result.global_steps == 8);
  CHECK(result.skipped_steps == 2);
  CHECK(trainer.state().skipped_steps == 2);
  auto& policy = trainer.policy<pt::Category::precision>();
  CHECK(policy.scaling());
  CHECK(policy.scaler().skipped_steps() == 2);
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(w.unchanged[i] == !expected[i]);  // a skipped step changes no bit of weights or Adam moments/steps
    CHECK(w.scale_after[i] == (expected[i] ? w.scale_before[i] : 0.5 * w.scale_before[i]));
  }
  CHECK(w.scale_before.front() == 65536.0);
  CHECK(policy.loss_scale() == 16384.0);
  const auto state = trainer.state_dict();
  CHECK(pt::state_double(state, "precision::Autocast/scale") == 16384.0);
  CHECK(pt::state_int(state, "precision::Autocast/growth_tracker") == 2);
  CHECK(pt::state_int(state, "precision::Autocast/skipped_steps") == 2);
}

}  // namespace

TEST_CASE("Autocast policy: injected inf/NaN gradients skip the step, halve the scale, leave weights and optimizer state intact") {
  SUBCASE("fp16 autocast, loss scaling automatic") {
    check_injected_gradients({.dtype = torch::kHalf});
  }
  SUBCASE("bf16 autocast, loss scaling asked for") {
    check_injected_gradients({.dtype = torch::kBFloat16, .loss_scaling = LossScaling::on});
  }
  SUBCASE("fp32, loss scaling asked for") {
    check_injected_gradients({.dtype = torch::kFloat, .loss_scaling = LossScaling::on});
  }
}

TEST_CASE("Autocast policy: fp32 with loss scaling computes bit for bit what a plain loop computes") {
  // Scaling by a power of two and unscaling by its reciprocal are exact, so the scaled run must equal the plain one.
  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16, .shuffle = true, .seed = 5});
  testing::MlpTask a(1), b(2);
  testing::copy_weights(b.module(), a.module());
  torch::optim::AdamW opt_a(a.module().parameters(), torch::optim::AdamWOptions(1e-2));
  pt::Trainer<testing::MlpTask, Autocast> trainer(a, opt_a, Autocast({.dtype = torch::kFloat, .loss_scaling = LossScaling::on}));
  auto result = trainer.fit(loader, {.epochs = 2});
  CHECK(trainer.policy<pt::Category::precision>().loss_scale() == 65536.0);
  CHECK(result.skipped_steps == 0);

  torch::optim::AdamW opt_b(b.module().parameters(), torch::optim::AdamWOptions(1e-2));
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    loader.set_epoch(epoch);
    for (auto batch : loader) {
      torch::nn::functional::cross_entropy(b.net->forward(batch.x), batch.y).backward();
      opt_b.step();
      opt_b.zero_grad(true);
    }
  }
  CHECK(testing::same_params(a.module(), b.module()));
}

TEST_CASE("Autocast policy: options resolve per device, and a non-finite loss without scaling is an error or a skip") {
  auto [x, y] = testing::toy_data(48);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8, .shuffle = false});  // 6 steps

  SUBCASE("defaults: CPU autocast in bf16, no loss scaling; fp16 scales; off turns scaling off") {
    testing::MlpTask task(1);
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::Trainer<testing::MlpTask, Autocast> t1(task, opt);
    t1.fit(loader, {.epochs = 1});
    CHECK(name(t1.policy<pt::Category::precision>().dtype()) == name(torch::kBFloat16));
    CHECK_FALSE(t1.policy<pt::Category::precision>().scaling());
    CHECK(t1.policy<pt::Category::precision>().loss_scale() == 0.0);
    pt::Trainer<testing::MlpTask, Autocast> t2(task, opt, Autocast({.dtype = torch::kHalf}));
    t2.fit(loader, {.epochs = 1});
    CHECK(t2.policy<pt::Category::precision>().scaling());
    pt::Trainer<testing::MlpTask, Autocast> t3(task, opt, Autocast({.dtype = torch::kHalf, .loss_scaling = LossScaling::off}));
    t3.fit(loader, {.epochs = 1});
    CHECK_FALSE(t3.policy<pt::Category::precision>().scaling());
    CHECK_THROWS_AS(Autocast({.dtype = torch::kDouble}), std::invalid_argument);
#ifndef POLICYTRAIN_WITH_CUDA
    pt::Trainer<testing::MlpTask, Autocast> t4(task, opt, Autocast({.device = torch::kCUDA}));
    CHECK_THROWS_AS(t4.fit(loader, {.epochs = 1}), std::invalid_argument);
#endif
  }

  SUBCASE("evaluation runs under autocast too, and outside it autocast is off") {
    testing::MlpTask task(1);
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::Trainer<testing::MlpTask, Autocast> t(task, opt);
    auto m = t.evaluate(loader);
    CHECK(std::isfinite(m.loss));
    CHECK_FALSE(pt::detail::autocast_enabled(torch::kCPU));
  }

  SUBCASE("bf16, NonFinite::error: the error names epoch and step, and autocast is off afterwards") {
    PoisonedLossTask task(1);
    task.poison = {3};
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::Trainer<PoisonedLossTask, Autocast> t(task, opt, Autocast({.dtype = torch::kBFloat16}));
    try {
      t.fit(loader, {.epochs = 1});
      FAIL("no error");
    } catch (const pt::NonFiniteLoss& e) {
      CHECK(std::string(e.what()).find("epoch 0, step 3") != std::string::npos);
    }
    CHECK_FALSE(pt::detail::autocast_enabled(torch::kCPU));
  }

  SUBCASE("bf16, NonFinite::skip: the step is skipped, counted, and the weights are untouched by it") {
    PoisonedLossTask task(1);
    task.poison = {2, 3};
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::Trainer<PoisonedLossTask, Autocast, StepWatch> t(
        task, opt, Autocast({.dtype = torch::kBFloat16, .on_nonfinite = pt::NonFinite::skip}));
    auto result = t.fit(loader, {.epochs = 1});
    CHECK(result.skipped_steps == 2);
    CHECK(t.get<StepWatch>().stepped == std::vector<bool>{true, true, false, false, true, true});
    CHECK(t.get<StepWatch>().unchanged[2]);
    CHECK(t.get<StepWatch>().unchanged[3]);
  }
}

namespace {

struct FmnistSubset {
  pt::data::TensorPair train, test;
  static const FmnistSubset& get() {
    static const FmnistSubset d = [] {
      const auto dir = pt::data::default_fashion_mnist_dir();
      auto test = pt::data::load_fashion_mnist(dir, false);
      return FmnistSubset{pt::data::load_fashion_mnist(dir, true),
                          {test.x.slice(0, 0, kTestImages), test.y.slice(0, 0, kTestImages)}};
    }();
    return d;
  }
  static constexpr int64_t kTestImages = 2000;
};

constexpr int64_t kCnnWidth = 8, kBatch = 32, kSteps = 200;
constexpr double kLr = 3e-3;

/// The learning rate decays linearly to 0 over the run, advancing only on steps taken (as a schedule must).
/// Without the decay, the accuracy of a 200-step run still swings by a few points from step to step, and two runs
/// differing only in rounding would differ by that much.
struct LinearDecay {
  int64_t taken = 0;
  template <class C>
  void on_fit_begin(C& c) { set(c, kLr); }
  template <class C>
  void after_step(C& c, bool stepped) {
    if (stepped) ++taken;
    set(c, kLr * (1.0 - static_cast<double>(taken) / kSteps));
  }
  template <class C>
  static void set(C& c, double lr) {
    for (auto& g : c.optimizer().param_groups()) g.options().set_lr(lr);
  }
};

/// A short, seeded training run of the example's CNN (a subset: kSteps batches); the test accuracy on the first
/// 2000 test images under the run's own precision, and the steps skipped.
template <class... Precision>
std::pair<double, int64_t> train_cnn(Precision&&... precision) {
  const auto& d = FmnistSubset::get();
  pt::data::TensorLoader train(d.train.x, d.train.y, {.batch_size = kBatch, .shuffle = true, .seed = 11});
  pt::data::TensorLoader test(d.test.x, d.test.y, {.batch_size = 500, .shuffle = false});
  torch::manual_seed(11);
  fmnist::Classifier task(kCnnWidth);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(kLr));
  pt::Trainer<fmnist::Classifier, std::remove_cvref_t<Precision>..., LinearDecay> trainer(
      task, opt, std::forward<Precision>(precision)...);
  auto result = trainer.fit(train, {.epochs = 1, .limit_train_batches = kSteps});
  REQUIRE(result.global_steps == kSteps);
  return {trainer.evaluate(test).accuracy, result.skipped_steps};
}

}  // namespace

TEST_CASE("Fashion-MNIST CNN: bf16 autocast reaches the accuracy of fp32 within 1 point on the same short run" * doctest::test_suite("extended")) {
  const auto [fp32, fp32_skipped] = train_cnn();  // the Trainer's default, precision::Fp32
  const auto [bf16, bf16_skipped] = train_cnn(Autocast({.dtype = torch::kBFloat16}));
  MESSAGE("test accuracy after ", kSteps, " steps: fp32 ", fp32, ", bf16 ", bf16);
  CHECK(fp32 > 0.6);  // far above chance (0.1): the run trains
  CHECK(std::abs(bf16 - fp32) <= 0.01);
  CHECK(fp32_skipped == 0);
  CHECK(bf16_skipped == 0);
}

TEST_CASE("Fashion-MNIST CNN: fp16 autocast with loss scaling on the CPU reaches the accuracy of fp32 within 1 point" * doctest::test_suite("extended")) {
  // LibTorch 2.13's CPU autocast has fp16 kernels (matmul and convolution run in fp16, see the guard's test).
  const auto [fp32, fp32_skipped] = train_cnn();
  const auto [fp16, fp16_skipped] = train_cnn(Autocast({.dtype = torch::kHalf}));
  MESSAGE("test accuracy after ", kSteps, " steps: fp32 ", fp32, ", fp16 + loss scaling ", fp16, " (", fp16_skipped,
          " steps skipped)");
  CHECK(fp32 > 0.6);
  CHECK(std::abs(fp16 - fp32) <= 0.01);
  CHECK(fp16_skipped < kSteps / 10);  // the scaler backs off a few times at most
}

TEST_CASE("Autocast bf16 and fp16 on the CPU: per-op dtypes, loss and the stepped weights equal Python's torch.autocast") {
  // The CPU half of the CUDA test: the same Trainer, the same oracle (tests/cuda/oracle.py) reading the same
  // torch::pickle_save file, so its format and the comparison run in the CPU CI.
  for (auto dtype : {torch::kBFloat16, torch::kHalf}) device_checks::autocast_equals_python(torch::kCPU, dtype);
}

TEST_CASE("The Fashion-MNIST CNN learns a 10-pattern task through the Trainer in 2 epochs (the CUDA test's CPU half)") {
  const double acc = device_checks::cnn_learns(torch::kCPU, torch::kFloat);
  CAPTURE(acc);
  CHECK(acc > 0.9);
}
