// callbacks::Ema against a hand-computed sequence, callbacks::EarlyStopping on scripted metrics,
// callbacks::DivergenceRollback on scripted non-finite losses.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <regex>
#include <set>
#include <sstream>
#include <limits>
#include <vector>

#include <policytrain/callbacks/divergence_rollback.hpp>
#include <policytrain/callbacks/early_stopping.hpp>
#include <policytrain/callbacks/ema.hpp>
#include <policytrain/callbacks/metrics_log.hpp>
#include <policytrain/callbacks/progress_bar.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;
using pt::callbacks::DivergenceRollback;
using pt::callbacks::EarlyStopping;
using pt::callbacks::Ema;

namespace {

/// One weight vector w; loss = mean over the batch of (w . x); a batch whose first input is NaN gives a NaN
/// loss. validation_step records the weights it sees.
struct LinearTask {
  torch::nn::Linear lin{torch::nn::LinearOptions(3, 1).bias(false)};
  std::vector<torch::Tensor> seen_in_eval;
  bool throw_in_eval = false;
  LinearTask() {
    torch::NoGradGuard g;
    lin->weight.copy_(torch::tensor({{1.0f, -2.0f, 0.5f}}));
  }
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return lin->forward(b.x).mean(); }
  pt::Prediction validation_step(const pt::Batch& b) {
    if (throw_in_eval) throw std::runtime_error("evaluation failed");
    seen_in_eval.push_back(lin->weight.detach().clone());
    auto out = torch::zeros({b.x.size(0), 2});
    return {torch::tensor(0.0), out};
  }
};

/// Records the weights after every step that was taken (placed before Ema, so it sees what Ema averages).
struct WeightLog {
  std::vector<torch::Tensor>* log;
  template <class C>
  void after_step(C& c, bool stepped) {
    if (stepped) log->push_back(c.module().parameters()[0].detach().clone());
  }
};

}  // namespace

TEST_CASE("EMA follows d_t = decay (1 - exp(-t / tau)) over the steps taken, and is what evaluation sees") {
  LinearTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  std::vector<torch::Tensor> weights{task.lin->weight.detach().clone()};
  auto x = torch::randn({24, 3}, torch::TensorOptions().dtype(torch::kFloat));
  x[8][0] = std::numeric_limits<float>::quiet_NaN();  // batch 2 of 6: a non-finite loss, a skipped step
  auto y = torch::zeros({24}, torch::kLong);
  pt::data::TensorLoader loader(x, y, {.batch_size = 4, .shuffle = false});
  pt::data::TensorLoader val(x.slice(0, 0, 4), y.slice(0, 0, 4), {.batch_size = 4, .shuffle = false});
  const double decay = 0.9, tau = 3;
  pt::Trainer<LinearTask, pt::precision::Fp32, WeightLog, Ema> trainer(
      task, opt, pt::precision::Fp32(pt::NonFinite::skip), WeightLog{&weights}, Ema({.decay = decay, .tau = tau}));
  auto r = trainer.fit(loader, val, {.epochs = 2});
  REQUIRE(r.skipped_steps == 2);
  const auto& ema = trainer.get<Ema>();
  CHECK(ema.updates() == 10);
  REQUIRE(weights.size() == 11);

  // The hand computation, in double.
  std::vector<double> e(3);
  for (int j = 0; j < 3; ++j) e[j] = weights[0][0][j].item<double>();
  for (int t = 1; t <= 10; ++t) {
    const double d = decay * (1 - std::exp(-t / tau));
    for (int j = 0; j < 3; ++j) e[j] = d * e[j] + (1 - d) * weights[t][0][j].item<double>();
  }
  for (int j = 0; j < 3; ++j) CHECK(ema.average()[0][0][j].item<double>() == doctest::Approx(e[j]).epsilon(1e-6));
  // Evaluation saw the average (at the end of each epoch), and the trained weights are back afterwards.
  REQUIRE(task.seen_in_eval.size() == 2);
  CHECK(torch::equal(task.seen_in_eval.back(), ema.average()[0]));
  CHECK(torch::equal(task.lin->weight.detach(), weights.back()));
  CHECK_FALSE(torch::equal(task.lin->weight.detach(), ema.average()[0]));

  SUBCASE("an evaluation that throws leaves the trained weights in place") {
    task.throw_in_eval = true;
    CHECK_THROWS_WITH(trainer.evaluate(val), "evaluation failed");
    CHECK(torch::equal(task.lin->weight.detach(), weights.back()));
  }
  SUBCASE("its state round-trips") {
    LinearTask other;
    torch::optim::SGD opt2(other.module().parameters(), 0.1);
    pt::Trainer<LinearTask, Ema> t2(other, opt2, Ema({.decay = decay, .tau = tau}));
    t2.get<Ema>().load_state_dict(ema.state_dict());
    t2.fit(loader, {.epochs = 0});  // binds the average to the model
    CHECK(t2.get<Ema>().updates() == 10);
    CHECK(torch::equal(t2.get<Ema>().average()[0], ema.average()[0]));
  }
  SUBCASE("disabled: no average, evaluation on the trained weights") {
    LinearTask other;
    torch::optim::SGD opt2(other.module().parameters(), 0.1);
    pt::Trainer<LinearTask, pt::precision::Fp32, Ema> t2(other, opt2, pt::precision::Fp32(pt::NonFinite::skip),
                                                         Ema({.enabled = false}));
    t2.fit(loader, val, {.epochs = 1});
    CHECK(t2.get<Ema>().updates() == 0);
    CHECK(torch::equal(other.seen_in_eval.back(), other.lin->weight.detach()));
  }
}

namespace {

/// Trains an MLP; its validation "loss" and "accuracy" follow a script, one entry per evaluation.
struct ScriptedTask : testing::MlpTask {
  std::vector<double> losses, accuracies;
  size_t calls = 0;
  pt::Prediction validation_step(const pt::Batch& b) {
    const size_t i = calls++;
    const int64_t n = b.x.size(0);
    auto out = torch::zeros({n, 3});
    const double acc = i < accuracies.size() ? accuracies[i] : 0.0;
    const int64_t correct = std::llround(acc * static_cast<double>(n));
    for (int64_t k = 0; k < n; ++k) out[k][k < correct ? b.y[k].item<int64_t>() : (b.y[k].item<int64_t>() + 1) % 3] = 1.0;
    return {torch::tensor(i < losses.size() ? losses[i] : 0.0), out};
  }
};

struct StopResult {
  int64_t epochs_run;
  bool stopped_early;
  int64_t best_epoch;
  double best;
};

StopResult early_stop(std::vector<double> losses, std::vector<double> accuracies, EarlyStopping::Options o) {
  ScriptedTask task;
  task.losses = std::move(losses);
  task.accuracies = std::move(accuracies);
  torch::optim::SGD opt(task.module().parameters(), 0.05);
  auto [x, y] = testing::toy_data(20);
  pt::data::TensorLoader train(x, y, {.batch_size = 10});
  pt::data::TensorLoader val(x, y, {.batch_size = 20, .shuffle = false});
  o.log = nullptr;
  pt::Trainer<ScriptedTask, EarlyStopping> trainer(task, opt, EarlyStopping(o));
  auto r = trainer.fit(train, val, {.epochs = 10});
  return {r.epochs_run, r.stopped_early, trainer.state().best_epoch, trainer.state().best_metric};
}

}  // namespace

TEST_CASE("early stopping stops at the right epoch on scripted metrics") {
  const std::vector<double> losses{1.0, 0.8, 0.85, 0.79, 0.9, 0.95, 0.97, 0.99, 1.0, 1.0};
  SUBCASE("patience 2, min_delta 0.02: 0.79 is not enough of an improvement on 0.8") {
    auto r = early_stop(losses, {}, {.monitor = {.metric = "loss", .min_delta = 0.02}, .patience = 2});
    CHECK(r.epochs_run == 4);
    CHECK(r.stopped_early);
    CHECK(r.best_epoch == 1);
    CHECK(r.best == doctest::Approx(0.8));
  }
  SUBCASE("patience 2, no min_delta: best at epoch 3, stop two epochs later") {
    auto r = early_stop(losses, {}, {.patience = 2});
    CHECK(r.epochs_run == 6);
    CHECK(r.best_epoch == 3);
  }
  SUBCASE("accuracy, mode max: an equal value is no improvement") {
    auto r = early_stop({}, {0.1, 0.3, 0.3, 0.2, 0.9}, {.monitor = {.metric = "accuracy", .mode = pt::Mode::max}, .patience = 2});
    CHECK(r.epochs_run == 4);
    CHECK(r.best_epoch == 1);
    CHECK(r.best == doctest::Approx(0.3));
  }
  SUBCASE("accuracy, mode not given: it follows the metric (max), as mode max does") {
    // Issue 30: Monitor{.metric = "accuracy"} kept mode min, so the worst epoch counted as the best.
    auto r = early_stop({}, {0.1, 0.3, 0.3, 0.2, 0.9}, {.monitor = {.metric = "accuracy"}, .patience = 2});
    CHECK(r.epochs_run == 4);
    CHECK(r.best_epoch == 1);
    CHECK(r.best == doctest::Approx(0.3));
  }
  SUBCASE("a non-finite metric stops at once") {
    auto r = early_stop({1.0, 0.9, std::nan(""), 0.5}, {}, {.patience = 5});
    CHECK(r.epochs_run == 3);
    CHECK(r.best_epoch == 1);
  }
  SUBCASE("the stopping threshold: good enough") {
    auto r = early_stop({1.0, 0.6, 0.4, 0.3}, {}, {.patience = 5, .stopping_threshold = 0.5});
    CHECK(r.epochs_run == 3);
    CHECK(r.best_epoch == 2);
  }
  SUBCASE("the divergence threshold: hopeless") {
    auto r = early_stop({1.0, 3.0, 0.5}, {}, {.patience = 5, .divergence_threshold = 2.0});
    CHECK(r.epochs_run == 2);
    CHECK(r.best_epoch == 0);
  }
  SUBCASE("disabled: runs every epoch") {
    auto r = early_stop(losses, {}, {.enabled = false, .patience = 1});
    CHECK(r.epochs_run == 10);
    CHECK_FALSE(r.stopped_early);
  }
}

namespace {

/// An MLP whose training loss is NaN on the scripted training_step calls (1-based).
struct NanTask : testing::MlpTask {
  std::vector<int64_t> nan_at;
  int64_t from = -1;  ///< NaN on every call from here on
  int64_t calls = 0;
  torch::Tensor training_step(const pt::Batch& b) {
    ++calls;
    auto loss = testing::MlpTask::training_step(b);
    const bool nan = std::find(nan_at.begin(), nan_at.end(), calls) != nan_at.end() || (from > 0 && calls >= from);
    return nan ? loss * std::numeric_limits<float>::quiet_NaN() : loss;
  }
};

struct ParamLog {
  std::vector<torch::Tensor>* log;
  template <class C>
  void after_step(C& c, bool) { log->push_back(c.module().parameters()[0].detach().clone()); }
};

}  // namespace

TEST_CASE("Monitor's mode follows its metric unless given") {
  using pt::Mode;
  for (const char* score : {"accuracy", "val_accuracy", "acc", "top1", "f1", "macro/f1", "auc", "recall", "iou"})
    CHECK_MESSAGE(pt::Monitor{.metric = score}.effective_mode() == Mode::max, score);
  for (const char* loss : {"loss", "val_loss", "error", "mse", "perplexity", "accuracy_drop"})
    CHECK_MESSAGE(pt::Monitor{.metric = loss}.effective_mode() == Mode::min, loss);
  CHECK(pt::Monitor{.metric = "accuracy", .mode = Mode::min}.effective_mode() == Mode::min);
  CHECK(pt::Monitor{.metric = "loss", .mode = Mode::max}.effective_mode() == Mode::max);
  // improves() uses it: a higher accuracy improves, a lower one does not.
  CHECK(pt::Monitor{.metric = "accuracy"}.improves(0.9, 0.8));
  CHECK_FALSE(pt::Monitor{.metric = "accuracy"}.improves(0.7, 0.8));
}

namespace {
/// Records ctx.state().epoch at every epoch's end: the oracle the printed and logged epochs must equal.
struct EpochRecorder {
  std::vector<int64_t>* seen;
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) { seen->push_back(ctx.state().epoch); }
};
}  // namespace

// Issue 30: epochs were 1-based in the bar, the epoch line and the messages, 0-based in ctx.state().epoch and the
// CSV logs. One convention now (docs/trainer.md, "Epochs"): the 0-based epoch index everywhere.
TEST_CASE("every output numbers epochs as ctx.state().epoch does") {
  const auto dir = testing::temp_dir("epoch-convention");
  ScriptedTask task;
  task.losses = {1.0, 0.5, 0.6, 0.7};  // best at epoch 1; patience 2 stops after epoch 3
  torch::optim::SGD opt(task.module().parameters(), 0.05);
  auto [x, y] = testing::toy_data(20);
  pt::data::TensorLoader train(x, y, {.batch_size = 10});
  pt::data::TensorLoader val(x, y, {.batch_size = 20, .shuffle = false});
  std::FILE* bar_out = std::tmpfile();
  std::FILE* stop_out = std::tmpfile();
  REQUIRE((bar_out && stop_out));
  std::vector<int64_t> seen;
  using Bar = pt::callbacks::ProgressBar;
  using Log = pt::callbacks::MetricsLog;
  pt::Trainer<ScriptedTask, EarlyStopping, Bar, Log, EpochRecorder> trainer(
      task, opt, EarlyStopping({.patience = 2, .log = stop_out}), Bar({.every = 1, .force_tty = 0, .out = bar_out}),
      Log({.dir = dir, .print_summary = false}), EpochRecorder{&seen});
  trainer.fit(train, val, {.epochs = 6});
  REQUIRE(seen == std::vector<int64_t>{0, 1, 2, 3});
  auto slurp = [](std::FILE* f) {
    std::rewind(f);
    std::string s;
    for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
    std::fclose(f);
    return s;
  };
  const std::string bar = slurp(bar_out), stop = slurp(stop_out);
  CAPTURE(bar);
  CAPTURE(stop);
  // The epoch lines (one per epoch, with the loss and validation) and the progress lines: "epoch E/L", L = epochs - 1.
  std::vector<int64_t> epoch_lines;
  std::set<int64_t> progress_epochs;
  const std::regex line_re(R"(^epoch (\d+)/(\d+) +(\[|loss))");
  std::istringstream in(bar);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, line_re)) continue;
    CHECK(std::stoll(m[2]) == 5);
    if (m[3] == "loss") epoch_lines.push_back(std::stoll(m[1]));
    else progress_epochs.insert(std::stoll(m[1]));
  }
  CHECK(epoch_lines == seen);
  CHECK(progress_epochs == std::set<int64_t>(seen.begin(), seen.end()));
  // epochs.csv's epoch column.
  std::vector<int64_t> csv;
  std::istringstream ein(testing::read_text(dir / "epochs.csv"));
  std::string row;
  std::getline(ein, row);  // header
  while (std::getline(ein, row)) csv.push_back(std::stoll(row.substr(0, row.find(','))));
  CHECK(csv == seen);
  // EarlyStopping's message: the epoch it stopped after and the best epoch, as the state says.
  CHECK(trainer.state().best_epoch == 1);
  CHECK(stop.find("stopping after epoch 3:") != std::string::npos);
  CHECK(stop.find("at epoch 1)") != std::string::npos);
}

TEST_CASE("divergence rollback restores the last good state, lowers the lr, and gives up after max_rollbacks") {
  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16, .shuffle = false});
  NanTask task;
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<torch::Tensor> log;
  using T = pt::Trainer<NanTask, pt::precision::Fp32, DivergenceRollback, ParamLog>;
  SUBCASE("one NaN at step 5: back to the snapshot of step 4, lr halved, training goes on") {
    task.nan_at = {5};
    T trainer(task, opt, pt::precision::Fp32(pt::NonFinite::rollback),
              DivergenceRollback({.lr_factor = 0.5, .snapshot_every = 2, .log = nullptr}), ParamLog{&log});
    auto r = trainer.fit(loader, {.epochs = 2});
    CHECK(r.global_steps == 12);
    CHECK(r.skipped_steps == 1);
    CHECK(trainer.get<DivergenceRollback>().rollbacks() == 1);
    CHECK(opt.param_groups()[0].options().get_lr() == doctest::Approx(0.05));
    REQUIRE(log.size() == 12);
    CHECK(torch::equal(log[4], log[3]));        // step 5 ended with the weights of step 4
    CHECK_FALSE(torch::equal(log[5], log[4]));  // and training went on
    CHECK(std::isfinite(log.back().sum().item<double>()));
  }
  SUBCASE("NaN with NonFinite::ignore: the step poisons the weights, the rollback undoes it") {
    task.nan_at = {3};
    T trainer(task, opt, pt::precision::Fp32(pt::NonFinite::ignore),
              DivergenceRollback({.snapshot_every = 2, .log = nullptr}), ParamLog{&log});
    trainer.fit(loader, {.epochs = 1});
    CHECK(trainer.get<DivergenceRollback>().rollbacks() == 1);
    CHECK(torch::equal(log[2], log[1]));
    CHECK(std::isfinite(log.back().sum().item<double>()));
  }
  SUBCASE("diverging for good: DivergenceError after max_rollbacks") {
    task.from = 3;
    T trainer(task, opt, pt::precision::Fp32(pt::NonFinite::rollback),
              DivergenceRollback({.max_rollbacks = 3, .snapshot_every = 1, .log = nullptr}), ParamLog{&log});
    CHECK_THROWS_AS(trainer.fit(loader, {.epochs = 1}), pt::callbacks::DivergenceError);
    CHECK(trainer.get<DivergenceRollback>().rollbacks() == 3);
    CHECK(opt.param_groups()[0].options().get_lr() == doctest::Approx(0.1 * 0.125));
  }
  SUBCASE("a spike: a finite loss far above its running mean") {
    struct SpikeTask : testing::MlpTask {
      int64_t calls = 0;
      torch::Tensor training_step(const pt::Batch& b) {
        auto l = testing::MlpTask::training_step(b);
        return ++calls == 30 ? l * 1000 : l;
      }
    } spiky;
    torch::optim::SGD sopt(spiky.module().parameters(), 0.01);
    pt::Trainer<SpikeTask, DivergenceRollback> trainer(
        spiky, sopt, DivergenceRollback({.spike_factor = 20, .warmup_steps = 10, .log = nullptr}));
    trainer.fit(loader, {.epochs = 6});
    CHECK(trainer.get<DivergenceRollback>().rollbacks() == 1);
  }
  SUBCASE("refused with a precision policy that throws on non-finite losses") {
    T trainer(task, opt, pt::precision::Fp32(pt::NonFinite::error), DivergenceRollback({.log = nullptr}), ParamLog{&log});
    CHECK_THROWS_WITH_AS(trainer.fit(loader, {.epochs = 1}), doctest::Contains("NonFinite::rollback"), std::invalid_argument);
  }
}
