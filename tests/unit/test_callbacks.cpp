// callbacks::Ema against a hand-computed sequence, callbacks::EarlyStopping on scripted metrics,
// callbacks::DivergenceRollback on scripted non-finite losses, callbacks::Preemption by signals raised at chosen
// moments (1 process, and 3 ranks over Gloo: this binary started by parallel::launch_local with
// POLICYTRAIN_TEST_WORKER set), each stopped run resumed to the end and compared with the uninterrupted one.
#include <doctest/doctest.h>

#include <algorithm>
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
#include <policytrain/callbacks/preemption.hpp>
#include <policytrain/callbacks/progress_bar.hpp>
#include <policytrain/checkpoint/disk.hpp>
#include <policytrain/parallel.hpp>

#include <csignal>
#include <fcntl.h>
#include <unistd.h>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include <pthread.h>

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

TEST_CASE("EMA every k steps: the average moves at every k-th step taken by d_t^k, is what evaluation sees, and every < 1 is refused") {
  // Seeded inputs, a skipped step in the middle, and k picked by the generator: the hand computation in double is the
  // oracle (airbench's EMA every 5 steps, ema = d^k ema + (1 - d^k) live at every k-th step).
  torch::manual_seed(55);
  const int64_t k = 2 + torch::randint(4, {1}).item<int64_t>();  // 2..5
  LinearTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  std::vector<torch::Tensor> weights{task.lin->weight.detach().clone()};
  auto x = torch::randn({40, 3}, torch::TensorOptions().dtype(torch::kFloat));
  x[12][1] = std::numeric_limits<float>::quiet_NaN();  // batch 4 of 10: a skipped step, not counted
  auto y = torch::zeros({40}, torch::kLong);
  pt::data::TensorLoader loader(x, y, {.batch_size = 4, .shuffle = false});
  pt::data::TensorLoader val(x.slice(0, 0, 4), y.slice(0, 0, 4), {.batch_size = 4, .shuffle = false});
  const double decay = 0.8, tau = 4;
  pt::Trainer<LinearTask, pt::precision::Fp32, WeightLog, Ema> trainer(
      task, opt, pt::precision::Fp32(pt::NonFinite::skip), WeightLog{&weights},
      Ema({.decay = decay, .tau = tau, .every = k}));
  trainer.fit(loader, val, {.epochs = 2});
  const auto& ema = trainer.get<Ema>();
  REQUIRE(ema.updates() == 18);
  REQUIRE(weights.size() == 19);
  std::vector<double> e(3);
  for (int j = 0; j < 3; ++j) e[j] = weights[0][0][j].item<double>();
  for (int64_t t = 1; t <= 18; ++t) {
    if (t % k != 0) continue;
    const double d = std::pow(decay * (1 - std::exp(-static_cast<double>(t) / tau)), static_cast<double>(k));
    for (int j = 0; j < 3; ++j) e[j] = d * e[j] + (1 - d) * weights[t][0][j].item<double>();
  }
  for (int j = 0; j < 3; ++j) CHECK(ema.average()[0][0][j].item<double>() == doctest::Approx(e[j]).epsilon(1e-6));
  CHECK(torch::equal(task.seen_in_eval.back(), ema.average()[0]));
  // Not the every-step average: the test tells the placements apart.
  std::vector<double> e1(3);
  for (int j = 0; j < 3; ++j) e1[j] = weights[0][0][j].item<double>();
  for (int t = 1; t <= 18; ++t) {
    const double d = decay * (1 - std::exp(-t / tau));
    for (int j = 0; j < 3; ++j) e1[j] = d * e1[j] + (1 - d) * weights[t][0][j].item<double>();
  }
  CHECK(std::abs(ema.average()[0][0][0].item<double>() - e1[0]) > 1e-6);
  CHECK_THROWS_WITH(Ema({.every = 0}),
                    "policytrain::callbacks::Ema: every is 0; expected >= 1; set every = 1 to move the average at every step taken");
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

// --- callbacks::Preemption ---------------------------------------------------------------------------------------

namespace {

namespace fs = std::filesystem;

/// Where a test raises the signal: inside the forward of optimizer step k, its backward, just before its optimizer
/// step, during an asynchronous checkpoint write (right after checkpoint::Disk started one at step k), during the
/// validation of epoch k (0-based), at step k's forward and again once the stop's checkpoint is written, or at
/// start-up, before the first step: k = 0 during the process group's setup (the rendezvous: the other ranks come
/// 300 ms late, and a thread sends the signal to the main thread once the handlers are in), k = 1 just before the
/// first batch is fetched.
enum class Moment { forward, backward, optimizer_step, async_write, validation, twice, startup };
constexpr Moment kMoments[] = {Moment::forward, Moment::backward,   Moment::optimizer_step, Moment::async_write,
                               Moment::validation, Moment::twice, Moment::startup};
const char* moment_name(Moment m) {
  switch (m) {
    case Moment::forward: return "forward";
    case Moment::backward: return "backward";
    case Moment::optimizer_step: return "optimizer step";
    case Moment::async_write: return "asynchronous checkpoint write";
    case Moment::validation: return "validation";
    case Moment::twice: return "forward, and again after the checkpoint";
    case Moment::startup: return "start-up";
  }
  return "?";
}

/// What to inject into one run (`at` < 0: nothing; `rank`: which rank raises).
struct Injection {
  Moment moment = Moment::forward;
  int64_t at = -1;
  int sig = SIGTERM;
  int rank = 0;
};

constexpr int64_t kPreemptEpochs = 3;

/// testing::MlpTask raising the signal from its forward (training or validation) when told.
struct PreemptTask {
  testing::MlpTask inner{1};
  Injection inj;
  int64_t forwards = 0, validations = 0, val_batches_per_epoch = 0;
  bool armed = false;  // this rank injects
  torch::nn::Module& module() { return inner.module(); }
  int step_sleep_ms = 0;  // slows each forward (the launcher-kill test kills mid-run)
  std::string progress;   // if set, each forward writes the count of forwards there
  torch::Tensor training_step(const pt::Batch& b) {
    ++forwards;
    if (step_sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_sleep_ms));
    if (!progress.empty()) std::ofstream(progress) << forwards << "\n";
    if (armed && (inj.moment == Moment::forward || inj.moment == Moment::twice) && forwards == inj.at) std::raise(inj.sig);
    return inner.training_step(b);
  }
  pt::Prediction validation_step(const pt::Batch& b) {
    if (armed && inj.moment == Moment::validation && validations == inj.at * val_batches_per_epoch) std::raise(inj.sig);
    ++validations;
    return inner.validation_step(b);
  }
};

/// Raises the signal inside a backward, before an optimizer step, after checkpoint::Disk's step-end save began, or
/// once the fit's last checkpoint is written (placed between Disk and Preemption); at start-up (Moment::startup).
struct Injector {
  Injection inj;
  bool armed = false;
  std::shared_ptr<std::thread> raiser;  // Moment::startup at 0: sends the signal during the group's setup
  template <class C>
  void on_fit_begin(C&) {
    if (inj.at != 0 || inj.moment != Moment::startup) return;
    if (!armed) {  // come late to the rendezvous, so that the armed rank waits in it when the signal comes
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return;
    }
    const pthread_t main = ::pthread_self();
    const int sig = inj.sig;
    raiser = std::make_shared<std::thread>([main, sig] {
      // Once Preemption (the next policy) installed its handler: DataParallel's setup runs by then.
      for (;;) {
        struct sigaction now {};
        ::sigaction(sig, nullptr, &now);
        if (reinterpret_cast<void*>(now.sa_handler) == reinterpret_cast<void*>(&pt::callbacks::detail::preemption_handler)) break;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ::pthread_kill(main, sig);
    });
  }
  template <class C>
  void on_epoch_begin(C& c) {
    if (!armed || inj.moment != Moment::startup || c.state().global_step != 0) return;
    if (raiser) {  // the signal came before the first batch
      raiser->join();
      raiser.reset();
    } else if (inj.at == 1) {
      std::raise(inj.sig);
    }
  }
  template <class C, class F>
  void around_backward(C& c, F&& fn) {
    fn();
    if (armed && inj.moment == Moment::backward && c.state().global_step + 1 == inj.at) std::raise(inj.sig);
  }
  template <class C>
  void before_step(C& c) {
    if (armed && inj.moment == Moment::optimizer_step && c.state().global_step + 1 == inj.at) std::raise(inj.sig);
  }
  template <class C>
  void on_step_end(C& c) {
    if (armed && inj.moment == Moment::async_write && c.state().global_step == inj.at) std::raise(inj.sig);
  }
  template <class C>
  void on_fit_end(C& c) {
    if (armed && inj.moment == Moment::twice && c.state().stop_at_step) std::raise(inj.sig);
  }
};

struct PreemptOutcome {
  bool stopped = false;
  int64_t stopped_at = -1, global_steps = 0;
  int stopped_by = 0, received = 0;
  bool requeue = false;
  std::vector<torch::Tensor> params;
};

/// One fit of 3 epochs (64 samples, batches of 8, shuffled; 16 validation samples), on this process's rank,
/// checkpointing into `dir` (asynchronously for Moment::async_write, every 2 steps), resumed from it when `resume`.
PreemptOutcome preempt_run(const fs::path& dir, const Injection& inj, bool resume, int rank, int world) {
  auto [x, y] = testing::toy_data(64, 8, 3, 7);
  auto [vx, vy] = testing::toy_data(16, 8, 3, 8);
  pt::data::TensorLoader train(x, y, {.batch_size = 8, .shuffle = true, .seed = 5, .rank = rank, .world_size = world});
  pt::data::TensorLoader val(vx, vy, {.batch_size = 8, .shuffle = false, .rank = rank, .world_size = world});
  PreemptTask task;
  task.inj = inj;
  task.armed = inj.at >= 0 && inj.rank == rank;
  task.val_batches_per_epoch = static_cast<int64_t>(val.size());
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  const bool async = inj.moment == Moment::async_write;
  pt::Trainer<PreemptTask, pt::checkpoint::Disk, Injector, pt::callbacks::Preemption, pt::parallel::DataParallel> t(
      task, opt,
      pt::checkpoint::Disk({.directory = dir, .every_steps = async ? 2 : 0, .resume = resume ? "auto" : "",
                            .async = async, .export_final = false, .log = nullptr}),
      Injector{inj, task.armed, nullptr}, pt::callbacks::Preemption({.log = nullptr}), pt::parallel::DataParallel());
  const auto r = t.fit(train, val, {.epochs = kPreemptEpochs});
  PreemptOutcome o;
  o.stopped = r.stopped_at_step;
  o.global_steps = r.global_steps;
  const auto& p = t.get<pt::callbacks::Preemption>();
  o.stopped_at = p.stopped_at();
  o.stopped_by = p.stopped_by();
  o.received = p.signals_received();
  o.requeue = p.requeue_asked();
  for (const auto& q : task.module().parameters()) o.params.push_back(q.detach().clone());
  return o;
}

/// The optimizer step at which the ranks must stop (steps per epoch `spe`).
int64_t expected_stop(const Injection& inj, int64_t spe) {
  if (inj.moment == Moment::startup) return 1;  // at the first step's end
  return inj.moment == Moment::validation ? (inj.at + 1) * spe + 1 : inj.at;
}

/// A worker rank: runs preempt_run from the environment, writes outcome<rank>.txt and params<rank>.pt.
const int kPreemptWorker = [] {
  const char* scenario = std::getenv("POLICYTRAIN_TEST_WORKER");
  if (!scenario || std::string(scenario) != "preempt") return 0;
  const fs::path out = std::getenv("POLICYTRAIN_TEST_OUT");
  const int rank = std::atoi(std::getenv("RANK"));
  const int world = std::atoi(std::getenv("WORLD_SIZE"));
  std::freopen((out / ("stderr" + std::to_string(rank) + ".txt")).c_str(), "a", stderr);
  testing::run_worker_and_exit([&] {
    Injection inj;
    inj.moment = static_cast<Moment>(std::atoi(std::getenv("PT_MOMENT")));
    inj.at = std::atoll(std::getenv("PT_AT"));
    inj.sig = std::atoi(std::getenv("PT_SIG"));
    inj.rank = std::atoi(std::getenv("PT_RANK"));
    const bool resume = std::string(std::getenv("PT_RESUME")) == "1";
    const auto o = preempt_run(std::getenv("PT_DIR"), inj, resume, rank, world);
    std::ofstream(out / ("outcome" + std::to_string(rank) + ".txt"))
        << o.stopped << " " << o.stopped_at << " " << o.stopped_by << " " << o.received << " " << o.global_steps << "\n";
    torch::save(o.params, (out / ("params" + std::to_string(rank) + ".pt")).string());
    return 0;
  });
}();

/// Runs preempt_run on `world` ranks (launch_local) and reads back every rank's outcome.
std::vector<PreemptOutcome> preempt_ranks(const fs::path& out, const fs::path& dir, const Injection& inj, bool resume,
                                          int world) {
  fs::create_directories(out);
  const int rc = pt::parallel::launch_local(
      {.nproc = world,
       .env = {{"POLICYTRAIN_TEST_WORKER", "preempt"}, {"POLICYTRAIN_TEST_OUT", out.string()}, {"OMP_NUM_THREADS", "1"},
               {"PT_MOMENT", std::to_string(static_cast<int>(inj.moment))}, {"PT_AT", std::to_string(inj.at)},
               {"PT_SIG", std::to_string(inj.sig)}, {"PT_RANK", std::to_string(inj.rank)},
               {"PT_RESUME", resume ? "1" : "0"}, {"PT_DIR", dir.string()}},
       .deadline = std::chrono::seconds(300)});
  std::string err;
  for (int r = 0; r < world; ++r) {
    std::ifstream f(out / ("stderr" + std::to_string(r) + ".txt"));
    err += std::string(std::istreambuf_iterator<char>(f), {});
  }
  REQUIRE_MESSAGE(rc == 0, err);
  std::vector<PreemptOutcome> v(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    std::ifstream f(out / ("outcome" + std::to_string(r) + ".txt"));
    auto& o = v[static_cast<size_t>(r)];
    f >> o.stopped >> o.stopped_at >> o.stopped_by >> o.received >> o.global_steps;
    torch::load(o.params, (out / ("params" + std::to_string(r) + ".pt")).string());
  }
  return v;
}

bool same_params(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

/// Seeded draws of (moment, step or epoch, signal) over a run of `spe` steps per epoch.
std::vector<Injection> draws(uint64_t seed, int n, int64_t spe, int world) {
  std::mt19937_64 g(seed);
  std::vector<Injection> v;
  for (int i = 0; i < n; ++i) {
    Injection inj;
    inj.moment = kMoments[i % std::size(kMoments)];  // every moment, then again
    inj.sig = (g() % 2) ? SIGTERM : SIGUSR1;
    inj.rank = static_cast<int>(g() % static_cast<uint64_t>(world));
    const int64_t total = kPreemptEpochs * spe;
    if (inj.moment == Moment::validation) inj.at = static_cast<int64_t>(g() % (kPreemptEpochs - 1));  // not the last epoch's
    else if (inj.moment == Moment::startup) inj.at = (i / static_cast<int>(std::size(kMoments))) % 2;  // setup, then first fetch
    else if (inj.moment == Moment::async_write) inj.at = 2 * (1 + static_cast<int64_t>(g() % static_cast<uint64_t>(total / 2 - 1)));
    else inj.at = 1 + static_cast<int64_t>(g() % static_cast<uint64_t>(total - 1));  // not the last step
    v.push_back(inj);
  }
  return v;
}

/// A recorder of where a fit started (after checkpoint::Disk resumed): the optimizer step of the newest complete
/// checkpoint a restarted group continued from.
struct StartStep {
  int64_t* at = nullptr;
  template <class C>
  void on_fit_begin(C& c) {
    *at = c.state().global_step;
  }
};

/// One rank of the kill harness: the fit of preempt_run (3 epochs of 3 steps on 3 ranks) without the Preemption
/// callback, a checkpoint every 2 steps (asynchronous for Moment::async_write), always `resume = "auto"` (a fresh
/// start when the directory holds none); on the first attempt the armed rank SIGKILLs itself at the moment.
int kill_rank(const fs::path& out, const fs::path& dir, Injection inj, int rank, int world) {
  const int attempt = std::atoi(std::getenv("TORCHELASTIC_RESTART_COUNT"));
  auto [x, y] = testing::toy_data(64, 8, 3, 7);
  auto [vx, vy] = testing::toy_data(16, 8, 3, 8);
  pt::data::TensorLoader train(x, y, {.batch_size = 8, .shuffle = true, .seed = 5, .rank = rank, .world_size = world});
  pt::data::TensorLoader val(vx, vy, {.batch_size = 8, .shuffle = false, .rank = rank, .world_size = world});
  PreemptTask task;
  task.inj = inj;
  task.armed = inj.at >= 0 && inj.rank == rank && attempt == 0;
  task.val_batches_per_epoch = static_cast<int64_t>(val.size());
  if (const char* ms = std::getenv("PT_STEP_SLEEP_MS")) task.step_sleep_ms = std::atoi(ms);
  if (std::getenv("PT_PROGRESS") && rank == 0) task.progress = (out / "progress.txt").string();
  if (std::getenv("PT_PROGRESS")) std::ofstream(out / ("pid" + std::to_string(rank) + ".txt")) << ::getpid() << "\n";
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  int64_t start = -1;
  pt::Trainer<PreemptTask, pt::checkpoint::Disk, Injector, StartStep, pt::parallel::DataParallel> t(
      task, opt,
      pt::checkpoint::Disk({.directory = dir, .every_steps = 2, .resume = "auto",
                            .async = inj.moment == Moment::async_write, .export_final = false,
                            .log = std::getenv("PT_PROGRESS") ? stderr : nullptr}),
      Injector{inj, task.armed, nullptr}, StartStep{&start}, pt::parallel::DataParallel());
  const auto r = t.fit(train, val, {.epochs = kPreemptEpochs});
  std::ofstream(out / ("outcome" + std::to_string(rank) + ".txt")) << attempt << " " << start << " " << r.global_steps << "\n";
  std::vector<torch::Tensor> params;
  for (const auto& q : task.module().parameters()) params.push_back(q.detach().clone());
  torch::save(params, (out / ("params" + std::to_string(rank) + ".pt")).string());
  return 0;
}

const int kKillWorker = [] {
  const char* scenario = std::getenv("POLICYTRAIN_TEST_WORKER");
  if (!scenario || std::string(scenario) != "kill-restart") return 0;
  const fs::path out = std::getenv("POLICYTRAIN_TEST_OUT");
  const int rank = std::atoi(std::getenv("RANK"));
  std::freopen((out / ("stderr" + std::to_string(rank) + ".txt")).c_str(), "a", stderr);
  testing::run_worker_and_exit([&] {
    Injection inj;
    inj.moment = static_cast<Moment>(std::atoi(std::getenv("PT_MOMENT")));
    inj.at = std::atoll(std::getenv("PT_AT"));
    inj.sig = SIGKILL;
    inj.rank = std::atoi(std::getenv("PT_RANK"));
    return kill_rank(out, std::getenv("PT_DIR"), inj, rank, std::atoi(std::getenv("WORLD_SIZE")));
  });
}();

/// A launcher process (the `--nproc` path): writes its pid, then runs launch_local of 3 kill-harness ranks, slowed to
/// 150 ms a forward and reporting their progress and pids into `ranks/`.
const int kTrainLauncher = [] {
  const char* scenario = std::getenv("POLICYTRAIN_TEST_WORKER");
  if (!scenario || std::string(scenario) != "train-launcher") return 0;
  const fs::path out = std::getenv("POLICYTRAIN_TEST_OUT");
  std::freopen((out / "stderr_launcher.txt").c_str(), "a", stderr);
  testing::run_worker_and_exit([&] {
    fs::create_directories(out / "ranks");
    std::ofstream(out / "launcher.txt") << ::getpid() << "\n";
    return pt::parallel::launch_local(
        {.nproc = 3,
         .env = {{"POLICYTRAIN_TEST_WORKER", "kill-restart"}, {"POLICYTRAIN_TEST_OUT", (out / "ranks").string()},
                 {"OMP_NUM_THREADS", "1"}, {"PT_MOMENT", "0"}, {"PT_AT", "-1"}, {"PT_RANK", "0"},
                 {"PT_DIR", std::getenv("PT_DIR")}, {"PT_STEP_SLEEP_MS", "150"}, {"PT_PROGRESS", "1"}},
         .deadline = std::chrono::seconds(300)});
  });
}();

/// What a kill-harness group ended with: launch_local's code, the launcher's messages, and each rank's last attempt.
struct KillOutcome {
  int rc = -1;
  std::string launcher_log, ranks_log;
  std::vector<int> attempt;
  std::vector<int64_t> start, steps;
  std::vector<std::vector<torch::Tensor>> params;
};

KillOutcome kill_group(const fs::path& out, const fs::path& dir, const Injection& inj, int world, int max_restarts) {
  fs::create_directories(out);
  KillOutcome k;
  // The launcher's own messages go to this process's stderr: capture them in a file for the checks.
  const fs::path log = out / "launcher.txt";
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 2);
  k.rc = pt::parallel::launch_local(
      {.nproc = world,
       .env = {{"POLICYTRAIN_TEST_WORKER", "kill-restart"}, {"POLICYTRAIN_TEST_OUT", out.string()}, {"OMP_NUM_THREADS", "1"},
               {"PT_MOMENT", std::to_string(static_cast<int>(inj.moment))}, {"PT_AT", std::to_string(inj.at)},
               {"PT_RANK", std::to_string(inj.rank)}, {"PT_DIR", dir.string()}},
       .deadline = std::chrono::seconds(300),
       .max_restarts = max_restarts});
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(fd);
  ::close(saved);
  {
    std::ifstream f(log);
    k.launcher_log.assign(std::istreambuf_iterator<char>(f), {});
  }
  for (int r = 0; r < world; ++r) {
    std::ifstream f(out / ("stderr" + std::to_string(r) + ".txt"));
    k.ranks_log += std::string(std::istreambuf_iterator<char>(f), {});
    std::ifstream o(out / ("outcome" + std::to_string(r) + ".txt"));
    int a = -1;
    int64_t s0 = -1, n = -1;
    o >> a >> s0 >> n;
    k.attempt.push_back(a);
    k.start.push_back(s0);
    k.steps.push_back(n);
    std::vector<torch::Tensor> p;
    if (fs::exists(out / ("params" + std::to_string(r) + ".pt"))) torch::load(p, (out / ("params" + std::to_string(r) + ".pt")).string());
    k.params.push_back(p);
  }
  return k;
}

/// The optimizer steps a group had completed when the armed rank died at `inj` (3 steps per epoch).
int64_t steps_done_at_kill(const Injection& inj, int64_t spe) {
  switch (inj.moment) {
    case Moment::validation: return (inj.at + 1) * spe;  // the validation of epoch `at` follows its last step
    case Moment::async_write: return inj.at;             // killed right after step `at`'s save began
    default: return inj.at - 1;                          // killed inside step `at`
  }
}

}  // namespace

TEST_CASE("Preemption: a signal at any moment stops every rank at the same step, and the resumed run is bit-identical" * doctest::test_suite("extended")) {
  SUBCASE("1 process: SIGTERM and SIGUSR1 at 20 seeded moments") {
    const auto base = testing::temp_dir("preempt-1");
    const auto whole = preempt_run(base / "whole", {}, false, 0, 1);
    CHECK_FALSE(whole.stopped);
    CHECK(whole.received == 0);
    constexpr int64_t spe = 8;
    REQUIRE(whole.global_steps == kPreemptEpochs * spe);
    int n = 0;
    auto cases = draws(2026, 20, spe, 1);
    // The last step of an epoch, and the run's last: the stop there leaves the epoch unvalidated, and the resumed run
    // validates and ends it (no step left to train).
    cases.push_back({Moment::forward, spe, SIGTERM, 0});
    cases.push_back({Moment::backward, kPreemptEpochs * spe, SIGUSR1, 0});
    // Both signals, every moment (drawn in turn), each more than once.
    CHECK(std::count_if(cases.begin(), cases.end(), [](const Injection& i) { return i.sig == SIGTERM; }) >= 3);
    CHECK(std::count_if(cases.begin(), cases.end(), [](const Injection& i) { return i.sig == SIGUSR1; }) >= 3);
    for (int64_t at : {0, 1})  // start-up: during the setup, and before the first batch fetch
      CHECK(std::count_if(cases.begin(), cases.end(), [&](const Injection& i) { return i.moment == Moment::startup && i.at == at; }) >= 1);
    for (const auto& inj : cases) {
      INFO("case " << n << ": " << pt::callbacks::Preemption::signal_name(inj.sig) << " during the " << std::string(moment_name(inj.moment)) << " at " << inj.at);
      const auto dir = base / ("case" + std::to_string(n++));
      const auto cut = preempt_run(dir, inj, false, 0, 1);
      CHECK(cut.stopped);
      CHECK(cut.stopped_by == inj.sig);
      CHECK(cut.stopped_at == expected_stop(inj, spe));
      CHECK(cut.global_steps == expected_stop(inj, spe));
      CHECK(cut.received == (inj.moment == Moment::twice ? 2 : 1));
      const auto resumed = preempt_run(dir, {}, true, 0, 1);
      CHECK_FALSE(resumed.stopped);
      CHECK(resumed.global_steps == whole.global_steps);
      CHECK(same_params(resumed.params, whole.params));
    }
    // After the fit the handlers are the ones from before it again.
    struct sigaction now {};
    ::sigaction(SIGUSR1, nullptr, &now);
    CHECK(reinterpret_cast<void*>(now.sa_handler) != reinterpret_cast<void*>(&pt::callbacks::detail::preemption_handler));
    fs::remove_all(base);
  }
  SUBCASE("3 ranks over Gloo: SIGTERM or SIGUSR1 reaches one rank, at 20 seeded moments") {
    const auto base = testing::temp_dir("preempt-3");
    const auto whole = preempt_ranks(base / "out-whole", base / "whole", {}, false, 3);
    constexpr int64_t spe = 3;  // 64 samples over 3 ranks: 22 each (padded), batches of 8
    REQUIRE(whole[0].global_steps == kPreemptEpochs * spe);
    int n = 0;
    const auto cases = draws(7, 20, spe, 3);
    // Both signals, every moment (drawn in turn), each more than once.
    CHECK(std::count_if(cases.begin(), cases.end(), [](const Injection& i) { return i.sig == SIGTERM; }) >= 3);
    CHECK(std::count_if(cases.begin(), cases.end(), [](const Injection& i) { return i.sig == SIGUSR1; }) >= 3);
    for (int64_t at : {0, 1})  // start-up: during the setup, and before the first batch fetch
      CHECK(std::count_if(cases.begin(), cases.end(), [&](const Injection& i) { return i.moment == Moment::startup && i.at == at; }) >= 1);
    for (const auto& inj : cases) {
      INFO("case " << n << ": " << pt::callbacks::Preemption::signal_name(inj.sig) << " on rank " << inj.rank << " during the "
                   << std::string(moment_name(inj.moment)) << " at " << inj.at);
      const auto dir = base / ("case" + std::to_string(n));
      const auto cut = preempt_ranks(base / ("out-cut" + std::to_string(n)), dir, inj, false, 3);
      for (int r = 0; r < 3; ++r) {
        INFO("rank " << r);
        CHECK(cut[r].stopped);
        CHECK(cut[r].stopped_at == expected_stop(inj, spe));
        CHECK(cut[r].stopped_by == inj.sig);  // every rank records the signal, whichever rank it reached
      }
      const auto resumed = preempt_ranks(base / ("out-resumed" + std::to_string(n)), dir, {}, true, 3);
      ++n;
      for (int r = 0; r < 3; ++r) {
        INFO("rank " << r);
        CHECK_FALSE(resumed[r].stopped);
        CHECK(resumed[r].global_steps == whole[0].global_steps);
        CHECK(same_params(resumed[r].params, whole[0].params));
      }
    }
    fs::remove_all(base);
  }
}

TEST_CASE("SIGKILL of one of 3 ranks at 10 seeded moments: the restarting launcher resumes every rank from the newest complete checkpoint, bit-identical" * doctest::test_suite("extended")) {
  const auto base = testing::temp_dir("kill-restart");
  constexpr int64_t spe = 3, k = 2;  // steps per epoch on 3 ranks; a checkpoint every k steps
  const auto whole = kill_group(base / "out-whole", base / "whole", {}, 3, 1);
  const std::string whole_logs = whole.launcher_log + whole.ranks_log;
  REQUIRE_MESSAGE(whole.rc == 0, whole_logs);
  REQUIRE(whole.steps[0] == kPreemptEpochs * spe);
  CHECK(whole.attempt[0] == 0);
  CHECK(whole.launcher_log.find("restarting") == std::string::npos);
  // Every moment but "twice" (a killed rank gets no second signal), on a seeded rank and step.
  std::mt19937_64 g(40);
  int n = 0;
  for (int i = 0; i < 10; ++i) {
    constexpr Moment kKillMoments[] = {Moment::forward, Moment::backward, Moment::optimizer_step, Moment::async_write,
                                       Moment::validation};
    Injection inj;
    inj.moment = kKillMoments[i % std::size(kKillMoments)];
    inj.sig = SIGKILL;
    inj.rank = static_cast<int>(g() % 3);
    const int64_t total = kPreemptEpochs * spe;
    if (inj.moment == Moment::validation) inj.at = static_cast<int64_t>(g() % (kPreemptEpochs - 1));
    else if (inj.moment == Moment::async_write) inj.at = k * (1 + static_cast<int64_t>(g() % static_cast<uint64_t>(total / k - 1)));
    else inj.at = 2 + static_cast<int64_t>(g() % static_cast<uint64_t>(total - 2));  // after the first checkpoint or not
    INFO("case " << n << ": SIGKILL of rank " << inj.rank << " during the " << std::string(moment_name(inj.moment)) << " at " << inj.at);
    const auto kill = kill_group(base / ("out" + std::to_string(n)), base / ("run" + std::to_string(n)), inj, 3, 1);
    ++n;
    INFO(kill.launcher_log);
    REQUIRE_MESSAGE(kill.rc == 0, kill.ranks_log);
    CHECK(kill.launcher_log.find("restarting every rank (restart 1 of 1") != std::string::npos);
    const int64_t done = steps_done_at_kill(inj, spe);
    for (int r = 0; r < 3; ++r) {
      INFO("rank " << r);
      CHECK(kill.attempt[r] == 1);                // the outcome is the restarted group's
      CHECK(kill.start[r] == kill.start[0]);      // every rank continued from the same checkpoint
      CHECK(kill.steps[r] == whole.steps[0]);
      REQUIRE(kill.params[r].size() == whole.params[0].size());
      CHECK(same_params(kill.params[r], whole.params[0]));
    }
    // The newest complete checkpoint: at most k steps redone (none lost), and the start of an epoch or a k-step save.
    CHECK(kill.start[0] <= done);
    CHECK(done - kill.start[0] <= k);
    CHECK((kill.start[0] % k == 0 || kill.start[0] % spe == 0));
  }
  // Without restarts the same kill ends the launch with the killed rank's code.
  Injection inj{Moment::forward, 4, SIGKILL, 1};
  const auto once = kill_group(base / "out-norestart", base / "run-norestart", inj, 3, 0);
  CHECK(once.rc != 0);
  CHECK(once.launcher_log.find("restarting") == std::string::npos);
  fs::remove_all(base);
}

TEST_CASE("Preemption refuses an uncatchable signal and a check interval below 1, by name") {
  CHECK_THROWS_WITH_AS(pt::callbacks::Preemption({.signals = {SIGKILL}}), doctest::Contains("cannot be caught"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(pt::callbacks::Preemption({.check_every_steps = 0}), doctest::Contains("check_every_steps is 0"),
                       std::invalid_argument);
}

TEST_CASE("Preemption::catch_early: a signal before the fit stops it at its first step, and only the requeue signal asks for a requeue") {
  for (const int sig : {SIGUSR1, SIGTERM}) {
    CAPTURE(sig);
    const auto dir = testing::temp_dir("preempt-early");
    struct sigaction before {};
    ::sigaction(sig, nullptr, &before);
    pt::callbacks::Preemption::catch_early();
    // Start-up: without catch_early the signal's default action ends this process here (Slurm's FAILED 138).
    std::raise(sig);
    const auto o = preempt_run(dir, {}, false, 0, 1);
    CHECK(o.stopped);
    CHECK(o.stopped_at == 1);
    CHECK(o.stopped_by == sig);
    CHECK(o.received == 1);
    CHECK(o.requeue == (sig == SIGUSR1));
    CHECK(pt::callbacks::Preemption::pending() == 0);  // consumed by the stop
    // After the fit the handler stays catch_early()'s: a signal now (Slurm's time-limit warning while the program
    // evaluates on the test set) is kept, not acted on; its default action would end this process (a finished job
    // FAILED 138: CI's slurm.timelimit on 07fd446).
    struct sigaction kept {};
    ::sigaction(sig, nullptr, &kept);
    CHECK(reinterpret_cast<void*>(kept.sa_handler) ==
          reinterpret_cast<void*>(&pt::callbacks::detail::preemption_handler));
    std::raise(sig);
    CHECK(pt::callbacks::Preemption::pending() == sig);
    // The next fit stops at its first step on it; a fit that is not stopped leaves a later signal pending.
    const auto o2 = preempt_run(testing::temp_dir("preempt-early-next"), {}, false, 0, 1);
    CHECK(o2.stopped_at == 1);
    CHECK(o2.stopped_by == sig);
    CHECK(o2.received == 1);
    CHECK(pt::callbacks::Preemption::pending() == 0);
    // release_early(): the handler from before catch_early is back (a later signal acts as without us).
    pt::callbacks::Preemption::release_early();
    struct sigaction after {};
    ::sigaction(sig, nullptr, &after);
    CHECK(reinterpret_cast<void*>(after.sa_handler) == reinterpret_cast<void*>(before.sa_handler));
  }
}

TEST_CASE("Preemption::catch_early: a signal after the fit's last check leaves the fit whole and stays pending") {
  pt::callbacks::Preemption::catch_early();
  const auto dir = testing::temp_dir("preempt-late");
  const auto whole = preempt_run(dir, {}, false, 0, 1);
  REQUIRE(!whole.stopped);
  std::raise(SIGUSR1);  // before the fix: the default action of SIGUSR1 ended the process here
  CHECK(pt::callbacks::Preemption::pending() == SIGUSR1);
  pt::callbacks::Preemption::release_early();
  CHECK(pt::callbacks::Preemption::pending() == SIGUSR1);  // recorded, no action
  // A fit without catch_early() forgets a signal from before it and ends whole.
  const auto next = preempt_run(testing::temp_dir("preempt-late-next"), {}, false, 0, 1);
  CHECK(!next.stopped);
  CHECK(next.received == 0);
  CHECK(pt::callbacks::Preemption::pending() == 0);
}

TEST_CASE("launch_local: a SIGKILLed launcher leaves no rank behind, and resume = \"auto\" in its run directory takes over the stale lock and ends bit-identical") {
  const auto base = testing::temp_dir("launcher-kill-resume");
  constexpr int64_t spe = 3;
  const auto whole = kill_group(base / "out-whole", base / "whole", {}, 3, 0);
  REQUIRE_MESSAGE(whole.rc == 0, std::string(whole.launcher_log + whole.ranks_log));
  REQUIRE(whole.steps[0] == kPreemptEpochs * spe);
  // The launcher, itself a process (launch_local of 1), runs the same fit on 3 ranks; SIGKILL it once rank 0 is in
  // its 4th forward (so step 2's checkpoint is complete) and before the end (9 steps of >= 150 ms).
  const fs::path out = base / "out-cut", dir = base / "run";
  fs::create_directories(out);
  auto launcher = std::async(std::launch::async, [&] {
    return pt::parallel::launch_local({.nproc = 1,
                                       .env = {{"POLICYTRAIN_TEST_WORKER", "train-launcher"},
                                               {"POLICYTRAIN_TEST_OUT", out.string()}, {"PT_DIR", dir.string()}},
                                       .deadline = std::chrono::seconds(300)});
  });
  auto read_int = [](const fs::path& p) {
    std::ifstream f(p);
    long long v = -1;
    f >> v;
    return v;
  };
  const auto t0 = std::chrono::steady_clock::now();
  while (read_int(out / "ranks" / "progress.txt") < 4 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(240))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const long long at_kill = read_int(out / "ranks" / "progress.txt");
  REQUIRE(at_kill >= 4);
  std::vector<pid_t> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(static_cast<pid_t>(read_int(out / "ranks" / ("pid" + std::to_string(r) + ".txt"))));
  const auto lpid = static_cast<pid_t>(read_int(out / "launcher.txt"));
  REQUIRE(lpid > 0);
  REQUIRE(::kill(lpid, SIGKILL) == 0);
  CHECK(launcher.get() == 128 + SIGKILL);
  // No rank outlives it (the parent-death signal), checked by pid within 5 s.
  std::vector<pid_t> left;
  for (int i = 0; i < 250; ++i) {
    left.clear();
    for (pid_t p : ranks)
      if (p > 0 && ::kill(p, 0) == 0) {
        std::ifstream st("/proc/" + std::to_string(p) + "/stat");
        std::string pid, comm, state;
        st >> pid >> comm >> state;
        if (state != "Z") left.push_back(p);
      }
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK_MESSAGE(left.empty(), "a rank still runs 5 s after its launcher was SIGKILLed");
  for (pid_t p : left) ::kill(p, SIGKILL);
  CHECK(read_int(out / "ranks" / "progress.txt") < kPreemptEpochs * spe);  // killed mid-run
  // The dead job's lock is left behind, naming rank 0's pid.
  std::string lock;
  {
    std::ifstream f(dir / "run.lock");
    lock.assign(std::istreambuf_iterator<char>(f), {});
  }
  CAPTURE(lock);
  CHECK(lock.find(std::to_string(ranks[0])) != std::string::npos);
  // Resume in the same directory: the stale lock is taken over (said in rank 0's log), the run continues from the
  // newest complete checkpoint and ends with the uninterrupted run's parameters on every rank.
  const fs::path out2 = base / "out-resumed";
  fs::create_directories(out2);
  const auto resumed = [&] {
    setenv("PT_PROGRESS", "1", 1);
    auto k = kill_group(out2, dir, {}, 3, 0);
    unsetenv("PT_PROGRESS");
    return k;
  }();
  INFO(std::string(resumed.launcher_log + resumed.ranks_log));
  REQUIRE(resumed.rc == 0);
  CHECK(resumed.ranks_log.find("took over the lock " + (dir / "run.lock").string() + " of a job that is gone") != std::string::npos);
  CHECK(resumed.ranks_log.find("pid " + std::to_string(ranks[0])) != std::string::npos);
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(resumed.start[r] >= 2);                 // from a checkpoint, not from scratch
    CHECK(resumed.start[r] < kPreemptEpochs * spe);
    CHECK(resumed.steps[r] == whole.steps[0]);
    REQUIRE(resumed.params[r].size() == whole.params[0].size());
    CHECK(same_params(resumed.params[r], whole.params[0]));
  }
  CHECK_FALSE(fs::exists(dir / "run.lock"));  // released at the end
  fs::remove_all(base);
}
