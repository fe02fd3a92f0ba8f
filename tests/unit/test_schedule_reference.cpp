// schedule::Lr against PyTorch's torch.optim.lr_scheduler semantics, written out by hand here (the full
// side-by-side comparison with PyTorch itself is tests/parity/schedules.py, CTest parity.schedules), and where
// the schedule meets other policies: MetricsLog's lr column and DivergenceRollback's lowered lr (against a
// plain LibTorch loop). Each case reproduces a finding of issue 11.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <policytrain/callbacks/divergence_rollback.hpp>
#include <policytrain/callbacks/metrics_log.hpp>
#include <policytrain/schedule/lr.hpp>

#include "unit/fixtures.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace sch = policytrain::schedule;
using testing::LrLog;
using testing::MlpTask;

namespace {

constexpr double kPi = std::numbers::pi;

/// Skips the steps whose attempt index (0-based) is in `skip`, as a loss scaler does on inf gradients.
struct SkipAt {
  static constexpr pt::Category category = pt::Category::precision;
  std::set<int64_t> skip;
  template <class C> bool step(C& c) {
    if (skip.count(c.state().global_step)) return false;
    c.optimizer().step();
    return true;
  }
};

pt::data::TensorLoader loader_of(int64_t steps, torch::Tensor& x, torch::Tensor& y) {
  std::tie(x, y) = testing::toy_data(16 * steps);
  return pt::data::TensorLoader(x, y, {.batch_size = 16, .shuffle = false});
}

/// PyTorch's OneCycleLR._annealing_cos.
double anneal_cos(double start, double end, double pct) { return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1); }

}  // namespace

TEST_CASE("onecycle is PyTorch's OneCycleLR: peak at step pct_start*T - 1, lrf on the last step, momentum cycled") {
  // OneCycleLR(max_lr=0.1, total_steps=10, pct_start=0.3) with SGD(momentum=0.9): phase 1 ends at step
  // 0.3*10 - 1 = 2 (lr 0.1/25 -> 0.1, momentum 0.95 -> 0.85), phase 2 at step 9 (lr -> min_lr, momentum -> 0.95).
  // min_lr = initial_lr / final_div_factor; our lrf = 1 / (div_factor * final_div_factor), so min_lr = 0.1 * lrf.
  torch::Tensor x, y;
  auto loader = loader_of(10, x, y);
  MlpTask t(1);
  torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<std::vector<double>> lr;
  std::vector<double> mom;
  sch::LrOptions o{.kind = sch::Kind::onecycle, .lrf = 0.004, .pct_start = 0.3, .div_factor = 25};
  pt::Trainer<MlpTask, sch::Lr, LrLog> trainer(t, opt, sch::Lr(o), LrLog{&lr, &mom});
  trainer.fit(loader, {.epochs = 1});
  REQUIRE(lr.size() == 10);
  const double max = 0.1, initial = max / 25, min = max * 0.004;
  for (int64_t s = 0; s < 10; ++s) {
    CAPTURE(s);
    const double e = s <= 2 ? anneal_cos(initial, max, s / 2.0) : anneal_cos(max, min, (s - 2) / 7.0);
    const double m = s <= 2 ? anneal_cos(0.95, 0.85, s / 2.0) : anneal_cos(0.85, 0.95, (s - 2) / 7.0);
    CHECK(lr[s][0] == doctest::Approx(e).epsilon(1e-12));
    CHECK(mom[s] == doctest::Approx(m).epsilon(1e-12));
  }
  CHECK(lr[2][0] == doctest::Approx(max).epsilon(1e-12));  // the peak, at step 2 (not 3)
  CHECK(lr[9][0] == doctest::Approx(min).epsilon(1e-12));  // lrf reached on the last step
}

TEST_CASE("The decaying kinds reach lrf on the last step taken (PyTorch's total_iters = T - 1)") {
  torch::Tensor x, y;
  for (auto k : {sch::Kind::linear, sch::Kind::cosine, sch::Kind::poly}) {
    CAPTURE(sch::to_string(k));
    auto loader = loader_of(10, x, y);
    MlpTask t(1);
    torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1));
    std::vector<std::vector<double>> lr;
    pt::Trainer<MlpTask, sch::Lr, LrLog> trainer(t, opt, sch::Lr({.kind = k, .lrf = 0.01}), LrLog{&lr});
    trainer.fit(loader, {.epochs = 1});
    REQUIRE(lr.size() == 10);
    CHECK(lr[0][0] == doctest::Approx(0.1).epsilon(1e-12));
    CHECK(lr[9][0] == doctest::Approx(0.1 * 0.01).epsilon(1e-12));  // was 0.1 x 0.109 for linear
    if (k == sch::Kind::linear)  // LinearLR(start_factor=1, end_factor=0.01, total_iters=9)
      for (int64_t s = 0; s < 10; ++s) CHECK(lr[s][0] == doctest::Approx(0.1 * (1 + (0.01 - 1) * s / 9.0)).epsilon(1e-12));
  }
}

TEST_CASE("Skipped steps count: the schedule follows attempted steps, as PyTorch and Lightning step it") {
  // With torch.amp.GradScaler a skipped optimizer.step() is still followed by scheduler.step(), so the lr of
  // attempt k is the schedule's value at k whatever was skipped, and the run ends at lrf.
  torch::Tensor x, y;
  auto loader = loader_of(12, x, y);
  MlpTask t(1);
  torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1));
  std::vector<std::vector<double>> lr;
  pt::Trainer<MlpTask, sch::Lr, SkipAt, LrLog> trainer(t, opt, sch::Lr({.kind = sch::Kind::linear, .lrf = 0.05}),
                                                         SkipAt{{1, 4, 5, 10}}, LrLog{&lr});
  auto r = trainer.fit(loader, {.epochs = 1});
  CHECK(r.skipped_steps == 4);
  REQUIRE(lr.size() == 12);
  for (int64_t k = 0; k < 12; ++k) {
    CAPTURE(k);
    CHECK(lr[k][0] == doctest::Approx(0.1 * (1 + (0.05 - 1) * k / 11.0)).epsilon(1e-12));
  }
  CHECK(trainer.policy<pt::Category::schedule>().step() == 12);
}

TEST_CASE("MetricsLog's lr column holds the lr each step was taken with") {
  torch::Tensor x, y;
  auto loader = loader_of(8, x, y);
  MlpTask t(1);
  torch::optim::SGD opt(t.module().parameters(), torch::optim::SGDOptions(0.1));
  std::vector<std::vector<double>> lr;
  const auto dir = testing::temp_dir("schedule-metrics-log");
  pt::Trainer<MlpTask, sch::Lr, LrLog, pt::callbacks::MetricsLog> trainer(
      t, opt, sch::Lr({.kind = sch::Kind::exponential, .gamma = 0.5}), LrLog{&lr},
      pt::callbacks::MetricsLog({.dir = dir, .print_summary = false}));
  trainer.fit(loader, {.epochs = 1});
  REQUIRE(lr.size() == 8);
  std::ifstream in(dir / "steps.jsonl");
  std::string line;
  int64_t k = 0;
  while (std::getline(in, line)) {
    CAPTURE(k);
    const auto j = nlohmann::json::parse(line);
    REQUIRE(k < 8);
    CHECK(j.at("lr").get<double>() == doctest::Approx(0.1 * std::pow(0.5, k)).epsilon(1e-12));  // ExponentialLR
    CHECK(j.at("lr").get<double>() == lr[k][0]);
    ++k;
  }
  CHECK(k == 8);
}

namespace {
/// The MLP task whose loss is NaN on the given training_step calls (0-based).
struct NanAt : MlpTask {
  std::set<int64_t> nan_at;
  int64_t calls = 0;
  torch::Tensor training_step(const pt::Batch& b) {
    auto l = MlpTask::training_step(b);
    return nan_at.count(calls++) ? l * std::numeric_limits<float>::quiet_NaN() : l;
  }
};
}  // namespace

TEST_CASE("DivergenceRollback x schedule::Lr: the lowered lr persists, as in a plain LibTorch loop") {
  // Linear decay over 12 steps; NaN losses at steps 4 and 8 each halve the lr for the rest of the run.
  const std::set<int64_t> nans{4, 8};
  const int64_t T = 12;
  auto factor = [&](int64_t s) { return 1 + (0.1 - 1) * s / double(T - 1); };
  torch::Tensor x, y;
  auto loader = loader_of(T, x, y);

  NanAt task;
  task.nan_at = nans;
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<std::vector<double>> lr;
  pt::Trainer<NanAt, pt::precision::Fp32, sch::Lr, pt::callbacks::DivergenceRollback, LrLog> trainer(
      task, opt, pt::precision::Fp32(pt::NonFinite::rollback), sch::Lr({.kind = sch::Kind::linear, .lrf = 0.1}),
      pt::callbacks::DivergenceRollback({.lr_factor = 0.5, .snapshot_every = 1, .log = nullptr}), LrLog{&lr});
  trainer.fit(loader, {.epochs = 1});
  CHECK(trainer.get<pt::callbacks::DivergenceRollback>().rollbacks() == 2);

  // The plain loop: lr from the formula times the rollbacks' factor; a NaN loss skips the step, the weights and
  // momentum stay those of the last good step (the snapshot), and the factor halves.
  MlpTask ref(1);
  torch::optim::SGD ropt(ref.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  double scale = 1;
  std::vector<double> ref_lr;
  for (int64_t s = 0; s < T; ++s) {
    const double l = 0.1 * factor(s) * scale;
    ropt.param_groups()[0].options().set_lr(l);
    ref_lr.push_back(l);
    if (nans.count(s)) {
      scale *= 0.5;
      continue;
    }
    ropt.zero_grad();
    auto bx = x.slice(0, 16 * s, 16 * (s + 1)), by = y.slice(0, 16 * s, 16 * (s + 1));
    ref.training_step({bx, by}).backward();
    ropt.step();
  }
  REQUIRE(lr.size() == static_cast<size_t>(T));
  for (int64_t s = 0; s < T; ++s) {
    CAPTURE(s);
    CHECK(lr[s][0] == doctest::Approx(ref_lr[s]).epsilon(1e-12));
  }
  CHECK(testing::max_rel_diff(task.module(), ref.module()) < 1e-6);
}
