// Learning-rate schedules: every kind against its closed form (computed here, independently of lr_factor), warmup
// boundaries with momentum and bias lr (the Ultralytics interpolation), per-group bases, the opt-out of counting
// skipped steps, per optimizer step under accumulation, reduce-on-plateau, and the state round trip that resumes the
// exact sequence. The comparison with PyTorch's schedulers themselves is tests/parity/schedules.py.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <vector>

#include <policytrain/accumulation/steps.hpp>
#include <policytrain/schedule/lr.hpp>

#include "unit/fixtures.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace sch = policytrain::schedule;
using testing::LrLog;
using testing::MlpTask;

namespace {

constexpr double kPi = std::numbers::pi;

/// Interrupts a run at the end of its first epoch (a run stopped before its planned end, to be resumed).
struct StopAfterFirstEpoch {
  template <class C> bool on_epoch_end(C&) { return true; }
};

/// A precision policy that skips every step whose attempt index is 1 mod 3 (as a loss scaler does on inf).
struct SkipSome {
  static constexpr pt::Category category = pt::Category::precision;
  template <class C> bool step(C& c) {
    if (c.state().global_step % 3 == 1) return false;
    c.optimizer().step();
    return true;
  }
};

struct Data {
  torch::Tensor x, y;
  Data() { std::tie(x, y) = testing::toy_data(96); }
  pt::data::TensorLoader loader(int64_t batch = 16) const { return pt::data::TensorLoader(x, y, {.batch_size = batch, .shuffle = false}); }
};

/// Group-0 lrs of every step of `epochs` epochs (96 samples, batch 16: 6 steps an epoch), SGD at base lr 0.1.
std::vector<double> run(const sch::LrOptions& o, int64_t epochs = 4) {
  Data d;
  auto loader = d.loader();
  MlpTask t(1);
  torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<std::vector<double>> lr;
  pt::Trainer<MlpTask, sch::Lr, LrLog> trainer(t, opt, sch::Lr(o), LrLog{&lr});
  trainer.fit(loader, {.epochs = epochs});
  std::vector<double> out;
  for (auto& r : lr) out.push_back(r[0]);
  return out;
}

void check_sequence(const std::vector<double>& got, const std::function<double(int64_t)>& expected, int64_t n) {
  REQUIRE(static_cast<int64_t>(got.size()) == n);
  for (int64_t t = 0; t < n; ++t) {
    CAPTURE(t);
    CHECK(got[t] == doctest::Approx(expected(t)).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("Every schedule's lr at every step equals its closed form") {
  const double base = 0.1;
  const int64_t T = 24;  // 4 epochs of 6 steps; the decaying kinds reach lrf at step T - 1 = 23
  SUBCASE("constant") {
    check_sequence(run({.kind = sch::Kind::constant}), [&](int64_t) { return base; }, T);
  }
  SUBCASE("step, in epochs") {
    check_sequence(run({.kind = sch::Kind::step, .unit = sch::Unit::epochs, .step_size = 1, .gamma = 0.5}),
                   [&](int64_t t) { return base * std::pow(0.5, t / 6); }, T);
  }
  SUBCASE("step, in steps") {
    check_sequence(run({.kind = sch::Kind::step, .step_size = 5, .gamma = 0.3}),
                   [&](int64_t t) { return base * std::pow(0.3, t / 5); }, T);
  }
  SUBCASE("multistep, in epochs") {
    check_sequence(run({.kind = sch::Kind::multistep, .unit = sch::Unit::epochs, .milestones = {1, 3}, .gamma = 0.1}),
                   [&](int64_t t) { return t < 6 ? base : t < 18 ? base * 0.1 : base * 0.01; }, T);
  }
  SUBCASE("exponential, per step") {
    check_sequence(run({.kind = sch::Kind::exponential, .gamma = 0.9}), [&](int64_t t) { return base * std::pow(0.9, t); }, T);
  }
  SUBCASE("linear to lrf") {
    check_sequence(run({.kind = sch::Kind::linear, .lrf = 0.1}),
                   [&](int64_t t) { return base * ((1.0 - t / 23.0) * (1 - 0.1) + 0.1); }, T);
  }
  SUBCASE("cosine to lrf") {
    check_sequence(run({.kind = sch::Kind::cosine, .lrf = 0.05}),
                   [&](int64_t t) { return base * (0.05 + 0.95 * 0.5 * (1 + std::cos(kPi * t / 23.0))); }, T);
  }
  SUBCASE("onecycle with a rise phase (PyTorch's OneCycleLR)") {
    // A quarter of the run rises from 1/10 to 1 (steps 0..5 = 0.25 x 24 - 1), then cosine down to lrf at step 23.
    check_sequence(run({.kind = sch::Kind::onecycle, .lrf = 0.01, .pct_start = 0.25, .div_factor = 10}),
                   [&](int64_t t) {
                     if (t <= 5) return base * (0.1 + 0.9 * (1 - std::cos(kPi * t / 5.0)) / 2);
                     const double q = (t - 5) / 18.0;
                     return base * (0.01 + 0.99 * (1 + std::cos(kPi * q)) / 2);
                   }, T);
  }
  SUBCASE("poly") {
    check_sequence(run({.kind = sch::Kind::poly, .lrf = 0, .power = 2}),
                   [&](int64_t t) { return base * (1 - t / 23.0) * (1 - t / 23.0); }, T);
  }
  SUBCASE("warmup-stable-decay") {
    // The last quarter (6 steps) decays linearly from 1 to lrf, reached on the last step, after 17 stable steps.
    check_sequence(run({.kind = sch::Kind::wsd, .lrf = 0.1, .decay_fraction = 0.25}),
                   [&](int64_t t) { return t < 17 ? base : base * (1 - 0.9 * (t - 17) / 6.0); }, T);
  }
  SUBCASE("lr_factor ends the decay kinds at lrf on the last step, or one step later with DecayEnd::after_run") {
    const sch::Horizon h{100, 10};
    for (auto k : {sch::Kind::linear, sch::Kind::cosine, sch::Kind::onecycle, sch::Kind::poly, sch::Kind::wsd}) {
      CAPTURE(sch::to_string(k));
      // onecycle starts at 1 / div_factor (PyTorch's initial_lr).
      CHECK(sch::lr_factor({.kind = k, .lrf = 0.03}, h, 0) == doctest::Approx(k == sch::Kind::onecycle ? 1 / 25.0 : 1.0));
      CHECK(sch::lr_factor({.kind = k, .lrf = 0.03}, h, 99) == doctest::Approx(0.03));
      CHECK(sch::lr_factor({.kind = k, .lrf = 0.03}, h, 150) == doctest::Approx(0.03));  // beyond the run: held
      if (k != sch::Kind::onecycle) {
        CHECK(sch::lr_factor({.kind = k, .lrf = 0.03, .decay_end = sch::DecayEnd::after_run}, h, 99) > 0.03);
        CHECK(sch::lr_factor({.kind = k, .lrf = 0.03, .decay_end = sch::DecayEnd::after_run}, h, 100) == doctest::Approx(0.03));
      }
    }
    CHECK(sch::lr_factor({.kind = sch::Kind::cosine, .lrf = 0, .decay_end = sch::DecayEnd::after_run}, h, 50) ==
          doctest::Approx(0.5));
  }
}

TEST_CASE("Warmup: linear from the start lr to the schedule's lr, momentum ramp, bias lr, per-group bases") {
  Data d;
  auto loader = d.loader();
  MlpTask t(1);
  // Two groups as Ultralytics builds them: weights (lr 0.01), then biases (lr 0.02).
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{t.net->fc1->weight, t.net->fc2->weight},
                      std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.01).momentum(0.9)));
  groups.emplace_back(std::vector<torch::Tensor>{t.net->fc1->bias, t.net->fc2->bias},
                      std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.02).momentum(0.9)));
  torch::optim::SGD opt(std::move(groups), torch::optim::SGDOptions(0.01));

  const sch::LrOptions o{.kind = sch::Kind::cosine, .lrf = 0.1, .warmup_epochs = 0.5,
                         .warmup_mode = sch::WarmupMode::interpolate, .warmup_momentum = 0.8, .warmup_bias_lr = 0.1,
                         .bias_groups = {1}};
  std::vector<std::vector<double>> lr;
  std::vector<double> mom;
  pt::Trainer<MlpTask, sch::Lr, LrLog> trainer(t, opt, sch::Lr(o), LrLog{&lr, &mom});
  trainer.fit(loader, {.epochs = 2});
  REQUIRE(lr.size() == 12);
  const int64_t W = 3;  // round(0.5 epochs x 6 steps)
  auto cosine = [](int64_t s) { return 0.1 + 0.9 * 0.5 * (1 + std::cos(kPi * s / 11.0)); };
  for (int64_t s = 0; s < 12; ++s) {
    CAPTURE(s);
    const double w = 0.01 * cosine(s), b = 0.02 * cosine(s);
    if (s < W) {
      CHECK(lr[s][0] == doctest::Approx(0.0 + (w - 0.0) * s / W).epsilon(1e-12));
      CHECK(lr[s][1] == doctest::Approx(0.1 + (b - 0.1) * s / W).epsilon(1e-12));
      CHECK(mom[s] == doctest::Approx(0.8 + 0.1 * s / W).epsilon(1e-12));
    } else {
      CHECK(lr[s][0] == doctest::Approx(w).epsilon(1e-12));
      CHECK(lr[s][1] == doctest::Approx(b).epsilon(1e-12));
      CHECK(mom[s] == doctest::Approx(0.9).epsilon(1e-12));
    }
  }
  CHECK(lr[0][0] == 0.0);   // the boundaries: the first step starts at the start factor ...
  CHECK(lr[0][1] == 0.1);   // ... or the bias lr,
  CHECK(lr[W][0] == doctest::Approx(0.01 * cosine(W)).epsilon(1e-12));  // and step W is the schedule's own.

  SUBCASE("warmup in steps with a start factor, Adam's beta1 ramped") {
    MlpTask u(1);
    torch::optim::AdamW adamw(u.module().parameters(), torch::optim::AdamWOptions(1e-3).betas({0.9, 0.999}));
    std::vector<std::vector<double>> lr2;
    std::vector<double> beta1;
    pt::Trainer<MlpTask, sch::Lr, LrLog> tr(
        u, adamw, sch::Lr({.kind = sch::Kind::constant, .warmup_steps = 4, .warmup_start_factor = 0.2, .warmup_momentum = 0.5}),
        LrLog{&lr2, &beta1});
    auto l2 = d.loader();
    tr.fit(l2, {.epochs = 1});
    for (int64_t s = 0; s < 6; ++s) {
      CAPTURE(s);
      CHECK(lr2[s][0] == doctest::Approx(s < 4 ? 1e-3 * (0.2 + 0.8 * s / 4.0) : 1e-3).epsilon(1e-12));
      CHECK(beta1[s] == doctest::Approx(s < 4 ? 0.5 + 0.4 * s / 4.0 : 0.9).epsilon(1e-12));
    }
  }
  SUBCASE("invalid warmup options are errors naming the fix") {
    CHECK_THROWS_AS(sch::Lr({.warmup_steps = 3, .warmup_epochs = 1}), std::invalid_argument);
    MlpTask u(1);
    torch::optim::Adagrad adagrad(u.module().parameters(), torch::optim::AdagradOptions(0.1));
    pt::Trainer<MlpTask, sch::Lr> tr(u, adagrad, sch::Lr({.warmup_steps = 2, .warmup_momentum = 0.8}));
    auto l3 = d.loader();
    CHECK_THROWS_WITH_AS(tr.fit(l3, {.epochs = 1}), doctest::Contains("unset warmup_momentum"), std::invalid_argument);
  }
}

TEST_CASE("The schedule advances per optimizer step: not per micro-batch, skipped steps optionally not counted") {
  Data d;
  SUBCASE("skipped steps, with count_skipped_steps = false") {
    auto loader = d.loader();
    MlpTask t(1);
    torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1));
    std::vector<std::vector<double>> lr;
    pt::Trainer<MlpTask, sch::Lr, SkipSome, LrLog> trainer(t, opt, sch::Lr({.kind = sch::Kind::exponential, .count_skipped_steps = false, .gamma = 0.5}),
                                                           LrLog{&lr});
    auto r = trainer.fit(loader, {.epochs = 2});
    REQUIRE(lr.size() == 12);
    int64_t taken = 0;  // steps that updated the weights before attempt k
    for (int64_t k = 0; k < 12; ++k) {
      CAPTURE(k);
      CHECK(lr[k][0] == doctest::Approx(0.1 * std::pow(0.5, taken)).epsilon(1e-12));
      if (k % 3 != 1) ++taken;
    }
    CHECK(r.skipped_steps == 4);
    CHECK(trainer.policy<pt::Category::schedule>().step() == 8);
  }
  SUBCASE("accumulation: one schedule step per window, and the horizon counts windows") {
    auto loader = d.loader(8);  // 12 micro-batches an epoch, windows of 5: steps of 5, 5, 2 -> 3 steps an epoch
    MlpTask t(1);
    torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1));
    std::vector<std::vector<double>> lr;
    pt::Trainer<MlpTask, pt::accumulate::Steps, sch::Lr, LrLog> trainer(
        t, opt, pt::accumulate::Steps(5), sch::Lr({.kind = sch::Kind::linear, .lrf = 0}), LrLog{&lr});
    trainer.fit(loader, {.epochs = 2});
    CHECK(trainer.policy<pt::Category::schedule>().horizon().total_steps == 6);
    CHECK(trainer.policy<pt::Category::schedule>().horizon().steps_per_epoch == 3);
    check_sequence([&] { std::vector<double> v; for (auto& r : lr) v.push_back(r[0]); return v; }(),
                   [](int64_t s) { return 0.1 * (1 - s / 5.0); }, 6);
  }
}

TEST_CASE("Reduce-on-plateau follows PyTorch's rule: patience, relative threshold, cooldown, floor at lrf") {
  Data d;
  MlpTask t(1);
  torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1));
  const sch::LrOptions o{.kind = sch::Kind::plateau, .lrf = 0.2, .patience = 1, .factor = 0.5, .threshold = 0.01, .cooldown = 1};
  pt::Trainer<MlpTask, sch::Lr> trainer(t, opt, sch::Lr(o));
  auto loader = d.loader();
  trainer.fit(loader, {.epochs = 1});  // resolves the schedule; no validation data, so no plateau update
  auto& lr = trainer.policy<pt::Category::schedule>();
  auto& ctx = trainer.context();
  // Hand-computed: best, bad count, cooldown (see PyTorch's ReduceLROnPlateau.step).
  const std::vector<double> losses{1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85};
  const std::vector<double> factors{1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2};
  pt::StateDict mid;
  for (size_t i = 0; i < losses.size(); ++i) {
    CAPTURE(i);
    pt::Metrics m;
    m.loss = losses[i];
    lr.on_validation_end(ctx, m);
    CHECK(lr.plateau_factor() == doctest::Approx(factors[i]));
    CHECK(ctx.lr() == doctest::Approx(0.1 * factors[i]));
    if (i == 5) mid = lr.state_dict();
  }
  // Resumed after the 6th validation, the same metrics give the same factors.
  sch::Lr resumed(o);
  resumed.load_state_dict(mid);
  for (size_t i = 6; i < losses.size(); ++i) {
    pt::Metrics m;
    m.loss = losses[i];
    resumed.on_validation_end(ctx, m);
    CHECK(resumed.plateau_factor() == doctest::Approx(factors[i]));
  }
}

TEST_CASE("State round trip: a resumed run continues the exact lr sequence") {
  Data d;
  const sch::LrOptions o{.kind = sch::Kind::cosine, .lrf = 0.02, .warmup_steps = 8, .warmup_momentum = 0.7};
  std::vector<std::vector<double>> full;
  std::vector<double> full_mom;
  {
    MlpTask t(1);
    torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    auto loader = d.loader();
    pt::Trainer<MlpTask, sch::Lr, LrLog> trainer(t, opt, sch::Lr(o), LrLog{&full, &full_mom});
    trainer.fit(loader, {.epochs = 4});
  }
  REQUIRE(full.size() == 24);
  pt::StateDict saved;
  {
    MlpTask t(1);
    torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    auto loader = d.loader();
    std::vector<std::vector<double>> first;
    pt::Trainer<MlpTask, sch::Lr, LrLog, StopAfterFirstEpoch> trainer(t, opt, sch::Lr(o), LrLog{&first});
    auto r = trainer.fit(loader, {.epochs = 4});  // interrupted after 6 steps, inside the warmup
    CHECK(r.epochs_run == 1);
    saved = trainer.state_dict();
    CHECK(first == std::vector<std::vector<double>>(full.begin(), full.begin() + 6));
  }
  // A fresh optimizer at the base lr, a fresh schedule: everything comes from the state.
  MlpTask t(1);
  torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto loader = d.loader();
  std::vector<std::vector<double>> rest;
  std::vector<double> rest_mom;
  // [snippet:resume]
  pt::Trainer<MlpTask, sch::Lr, LrLog> trainer(t, opt, sch::Lr(o), LrLog{&rest, &rest_mom});
  trainer.load_state_dict(saved);
  CHECK(pt::state_int(saved, "schedule::Lr/step") == 6);
  trainer.fit(loader, {.epochs = 4});
  // [/snippet:resume]
  REQUIRE(rest.size() == 18);
  for (size_t i = 0; i < rest.size(); ++i) {
    CAPTURE(i);
    CHECK(rest[i][0] == full[i + 6][0]);  // bit for bit
    CHECK(rest_mom[i] == full_mom[i + 6]);
  }
}

TEST_CASE("Schedule options are checked, and an unknown length is an error naming the fix") {
  CHECK(sch::kind_from_string("wsd") == sch::Kind::wsd);
  CHECK_THROWS_AS(sch::kind_from_string("cosin"), std::invalid_argument);
  CHECK_THROWS_AS(sch::Lr({.kind = sch::Kind::step, .step_size = 0}), std::invalid_argument);
  CHECK_THROWS_AS(sch::Lr({.kind = sch::Kind::multistep, .milestones = {3, 1}}), std::invalid_argument);
  CHECK_THROWS_AS(sch::Lr({.kind = sch::Kind::onecycle, .pct_start = 1}), std::invalid_argument);

  // A loader without a size: cosine cannot know its length unless told.
  struct Unsized {
    pt::data::TensorLoader l;
    auto begin() const { return l.begin(); }
    auto end() const { return l.end(); }
  };
  Data d;
  Unsized u{d.loader()};
  MlpTask t(1);
  torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1));
  pt::Trainer<MlpTask, sch::Lr> a(t, opt, sch::Lr({.kind = sch::Kind::cosine}));
  CHECK_THROWS_WITH_AS(a.fit(u, {.epochs = 1}), doctest::Contains("total_steps"), std::invalid_argument);
  std::vector<std::vector<double>> lr;
  pt::Trainer<MlpTask, sch::Lr, LrLog> b(t, opt, sch::Lr({.kind = sch::Kind::linear, .total_steps = 12, .lrf = 0}), LrLog{&lr});
  b.fit(u, {.epochs = 1});
  REQUIRE(lr.size() == 6);
  CHECK(lr[5][0] == doctest::Approx(0.1 * (1 - 5 / 11.0)));
}

// Issue 37: a run stopped by max_steps and resumed with a larger budget followed a second one-cycle over the new
// length (the lr jumped back up). The horizon is the run's, saved with the state; horizon_per_fit opts back in.
TEST_CASE("a run stopped by max_steps and resumed with a larger budget keeps the one-cycle horizon it started with") {
  Data d;
  const double base = 0.1;
  const sch::LrOptions o{.kind = sch::Kind::onecycle, .lrf = 0.01, .pct_start = 0.25, .div_factor = 10};
  // Independent closed forms (PyTorch's OneCycleLR, cosine annealing) over T steps: a quarter of the run rises from
  // 1/10 to 1 (to step T/4 - 1), then falls to lrf at step T - 1; past the run it holds lrf.
  auto onecycle = [&](int64_t T, int64_t t) {
    const double up = T / 4.0 - 1;
    if (t >= T - 1) return base * 0.01;
    if (t <= up) return base * (0.1 + 0.9 * (1 - std::cos(kPi * t / up)) / 2);
    return base * (0.01 + 0.99 * (1 + std::cos(kPi * (t - up) / (T - 1 - up))) / 2);
  };
  pt::StateDict saved;
  {
    MlpTask t(1);
    torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(base).momentum(0.9));
    auto loader = d.loader();
    std::vector<std::vector<double>> first;
    pt::Trainer<MlpTask, sch::Lr, LrLog> trainer(t, opt, sch::Lr(o), LrLog{&first});
    trainer.fit(loader, {.epochs = 4, .max_steps = 12});  // 4 epochs of 6 steps planned, stopped at 12
    REQUIRE(first.size() == 12);
    CHECK(trainer.policy<pt::Category::schedule>().horizon().total_steps == 12);
    for (int64_t i = 0; i < 12; ++i) CHECK(first[i][0] == doctest::Approx(onecycle(12, i)).epsilon(1e-12));
    saved = trainer.state_dict();
  }
  CHECK(pt::state_int(saved, "schedule::Lr/horizon/total_steps") == 12);
  auto resume = [&](sch::LrOptions opts) {
    MlpTask t(1);
    torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(base).momentum(0.9));
    auto loader = d.loader();
    std::vector<std::vector<double>> rest;
    pt::Trainer<MlpTask, sch::Lr, LrLog> trainer(t, opt, sch::Lr(opts), LrLog{&rest});
    trainer.load_state_dict(saved);
    trainer.fit(loader, {.epochs = 4});  // the larger budget: all 24 planned steps
    REQUIRE(rest.size() == 12);
    return std::make_pair(rest, trainer.policy<pt::Category::schedule>().horizon().total_steps);
  };
  SUBCASE("by default: the horizon it started with (12), the lr holds lrf past it") {
    const auto [rest, horizon] = resume(o);
    CHECK(horizon == 12);
    for (int64_t i = 0; i < 12; ++i) CHECK(rest[i][0] == doctest::Approx(onecycle(12, 12 + i)).epsilon(1e-12));
  }
  SUBCASE("horizon_per_fit: the resumed fit's own horizon (24), as the user asked") {
    auto per_fit = o;
    per_fit.horizon_per_fit = true;
    const auto [rest, horizon] = resume(per_fit);
    CHECK(horizon == 24);
    for (int64_t i = 0; i < 12; ++i) CHECK(rest[i][0] == doctest::Approx(onecycle(24, 12 + i)).epsilon(1e-12));
  }
}

TEST_CASE("a param group added to the optimizer between two fits joins the schedule at its own lr") {
  // Found by the composition fuzzer (seeds 2, 12, 29): the schedule recorded its groups at the first fit only and
  // refused the second fit ("the optimizer has 2 param groups but the schedule has 1; resume with ..."). The
  // oracle: cosine annealing to lrf at the run's last step (23 of 4 epochs of 6), each group at its own base lr.
  Data d;
  const sch::LrOptions o{.kind = sch::Kind::cosine, .total_steps = 24, .lrf = 0.01};
  auto cosine = [](double base, int64_t t) { return base * (0.01 + 0.99 * (1 + std::cos(kPi * t / 23.0)) / 2); };
  MlpTask t(1);
  MlpTask extra(2);  // the part that joins the optimizer for the second fit (its own parameters)
  torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto loader = d.loader();
  std::vector<std::vector<double>> lr;
  pt::Trainer<MlpTask, sch::Lr, LrLog> trainer(t, opt, sch::Lr(o), LrLog{&lr});
  trainer.fit(loader, {.epochs = 2});
  REQUIRE(lr.size() == 12);
  opt.add_param_group(torch::optim::OptimizerParamGroup(
      extra.module().parameters(), std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.02).momentum(0.9))));
  trainer.fit(loader, {.epochs = 4});  // two more epochs: steps 12..23
  REQUIRE(lr.size() == 24);
  for (int64_t s = 0; s < 24; ++s) {
    CAPTURE(s);
    CHECK(lr[s][0] == doctest::Approx(cosine(0.1, s)).epsilon(1e-12));
    if (s >= 12) {
      REQUIRE(lr[s].size() == 2);
      CHECK(lr[s][1] == doctest::Approx(cosine(0.02, s)).epsilon(1e-12));
    }
  }
  // Its base is in the state, so a resume continues both groups.
  const auto state = trainer.state_dict();
  CHECK(pt::state_int(state, "schedule::Lr/groups") == 2);
  CHECK(pt::state_double(state, "schedule::Lr/base_lr/1") == doctest::Approx(0.02));
}
