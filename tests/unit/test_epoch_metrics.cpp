// Epoch-level metrics (core/metric.hpp, metric/*.hpp): every built-in against torchmetrics on the same predictions,
// in one process and on 2 and 3 ranks over Gloo with uneven shards; monitoring RMSE and R² (EarlyStopping, the best
// checkpoint, the plateau schedule) against a hand-written loop, and so a 3-class task's accuracy and macro F1 and a
// binary task's AUROC (each against its definition); a misspelt metric refused before the first step.
// The ranks are this binary, started by parallel::launch_local with POLICYTRAIN_TEST_WORKER set.
#include <doctest/doctest.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include <policytrain/checkpoint.hpp>
#include <policytrain/observe.hpp>
#include <policytrain/metric/classification.hpp>
#include <policytrain/metric/regression.hpp>
#include <policytrain/parallel.hpp>

#include "unit/fixtures.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;
using pt::metric::Average;

namespace {

constexpr int64_t kSamples = 103;  // on 2 ranks 52 + 51, on 3 ranks 35 + 34 + 34: every shard padded but one
constexpr int64_t kClasses = 5;

/// The predictions and targets every run replays: a regression, a 5-class task whose class 4 is never a target
/// (macro averages leave it out, as torchmetrics does), a binary task with tied scores.
struct Replay {
  torch::Tensor reg_x, reg_y, cls_x, cls_y, bin_x, bin_y;
  Replay() {
    torch::manual_seed(11);
    reg_y = torch::randn({kSamples}, torch::kDouble);
    reg_x = (reg_y + 0.4 * torch::randn({kSamples}, torch::kDouble)).unsqueeze(1);  // [N, 1] against [N]
    cls_y = torch::randint(0, kClasses - 1, {kSamples}, torch::kLong);
    cls_x = torch::randn({kSamples, kClasses}, torch::kDouble) + 1.5 * torch::one_hot(cls_y, kClasses).to(torch::kDouble);
    bin_y = torch::randint(0, 2, {kSamples}, torch::kLong).to(torch::kDouble);
    bin_x = (torch::sigmoid(2 * bin_y - 1 + torch::randn({kSamples}, torch::kDouble)) * 20).round() / 20;
  }
};

std::vector<double> to_vec(const torch::Tensor& t) {
  auto c = t.to(torch::kDouble).contiguous().reshape({-1});
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

/// A task whose model output is its input: the Trainer evaluates the replayed predictions.
struct ReplayTask {
  std::string kind;
  torch::nn::Linear lin{nullptr};
  explicit ReplayTask(std::string k) : kind(std::move(k)) {
    torch::manual_seed(1);  // the same parameters on every rank
    lin = torch::nn::Linear(1, 1);
  }
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return lin->forward(b.x).sum(); }
  pt::Prediction validation_step(const pt::Batch& b) { return {torch::zeros({}), b.x}; }
  pt::MetricCollection metrics() const {
    pt::MetricCollection c;
    if (kind == "regression") {
      c.add(pt::metric::MeanSquaredError{}).add(pt::metric::RootMeanSquaredError{}).add(pt::metric::MeanAbsoluteError{});
      c.add(pt::metric::R2Score{});
    } else if (kind == "multiclass") {
      const std::vector<std::pair<Average, std::string>> averages{
          {Average::micro, "micro"}, {Average::macro, "macro"}, {Average::weighted, "weighted"}};
      for (const auto& [avg, s] : averages) {
        c.add(pt::metric::Accuracy({.num_classes = kClasses, .average = avg, .name = "accuracy_" + s}));
        c.add(pt::metric::Accuracy({.num_classes = kClasses, .average = avg, .top_k = 2, .name = "top2_accuracy_" + s}));
        c.add(pt::metric::Precision({.num_classes = kClasses, .average = avg, .top_k = 2, .name = "top2_precision_" + s}));
        c.add(pt::metric::Recall({.num_classes = kClasses, .average = avg, .top_k = 2, .name = "top2_recall_" + s}));
        c.add(pt::metric::F1Score({.num_classes = kClasses, .average = avg, .top_k = 2, .name = "top2_f1_" + s}));
        c.add(pt::metric::Precision({.num_classes = kClasses, .average = avg, .name = "precision_" + s}));
        c.add(pt::metric::Recall({.num_classes = kClasses, .average = avg, .name = "recall_" + s}));
        c.add(pt::metric::F1Score({.num_classes = kClasses, .average = avg, .name = "f1_" + s}));
      }
      c.add(pt::metric::ConfusionMatrix(kClasses));
    } else {
      c.add(pt::metric::BinaryAUROC{});
    }
    return c;
  }
};

std::pair<torch::Tensor, torch::Tensor> data_of(const Replay& r, const std::string& kind) {
  if (kind == "regression") return {r.reg_x, r.reg_y};
  if (kind == "multiclass") return {r.cls_x, r.cls_y};
  return {r.bin_x, r.bin_y};
}

/// Evaluates the replayed predictions of every kind with a Trainer (batches of 7; on `world` ranks, this one's
/// shard) and returns every metric by name (the confusion matrix as a flat list).
template <class... Ps>
nlohmann::json evaluate_all(int64_t rank, int64_t world) {
  const Replay r;
  nlohmann::json out;
  for (const std::string kind : {"regression", "multiclass", "binary"}) {
    ReplayTask task(kind);
    torch::optim::SGD opt(task.module().parameters(), 0.1);
    pt::Trainer<ReplayTask, Ps...> trainer(task, opt);  // a fresh parallel policy for each kind
    if constexpr (sizeof...(Ps) > 0) trainer.template policy<pt::Category::parallel>().connect();
    auto [x, y] = data_of(r, kind);
    pt::data::TensorLoader loader(x, y, {.batch_size = 7, .shuffle = false, .rank = rank, .world_size = world});
    const auto m = trainer.evaluate(loader);
    out["samples_" + kind] = m.samples;
    for (const auto& [name, v] : m.extra) out[name] = v;
    if (m.has_accuracy()) out["accuracy"] = m.accuracy;
    for (const auto& [name, t] : m.tensors) out[name] = to_vec(t);
  }
  return out;
}

/// Runs the worker when this process is one of the ranks, before doctest sees the command line.
const int kWorkerHook = [] {
  const char* scenario = std::getenv("POLICYTRAIN_TEST_WORKER");
  if (!scenario) return 0;
  const fs::path out = std::getenv("POLICYTRAIN_TEST_OUT");
  const int64_t rank = std::atoi(std::getenv("RANK"));
  const int64_t world = std::atoi(std::getenv("WORLD_SIZE"));
  std::freopen((out / ("stderr" + std::to_string(rank) + ".txt")).c_str(), "w", stderr);
  testing::run_worker_and_exit([&] {
    const auto j = evaluate_all<pt::parallel::DataParallel>(rank, world);
    std::ofstream(out / ("metrics" + std::to_string(rank) + ".json")) << j.dump();
    return 0;
  });
}();

/// torchmetrics' values for the replayed predictions (tests/integration/torchmetrics_oracle.py, in the venv).
const nlohmann::json& oracle() {
  static const nlohmann::json j = [] {
    const Replay r;
    const auto dir = testing::temp_dir("torchmetrics");
    nlohmann::json in;
    in["regression"] = {{"prediction", to_vec(r.reg_x)}, {"target", to_vec(r.reg_y)}};
    std::vector<std::vector<double>> rows;
    for (int64_t i = 0; i < kSamples; ++i) rows.push_back(to_vec(r.cls_x[i]));
    in["multiclass"] = {{"classes", kClasses}, {"prediction", rows}, {"target", to_vec(r.cls_y)}};
    in["binary"] = {{"prediction", to_vec(r.bin_x)}, {"target", to_vec(r.bin_y)}};
    std::ofstream(dir / "in.json") << in.dump();
    const std::string python = std::string(POLICYTRAIN_BINARY_DIR) + "/venv-torchmetrics/bin/python";
    const std::string cmd = python + " " + POLICYTRAIN_SOURCE_DIR + "/tests/integration/torchmetrics_oracle.py " +
                            (dir / "in.json").string() + " " + (dir / "out.json").string();
    REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
    std::ifstream f(dir / "out.json");
    auto out = nlohmann::json::parse(f);
    fs::remove_all(dir);
    return out;
  }();
  return j;
}

void check_against_torchmetrics(const nlohmann::json& got, const std::string& where) {
  const auto& want = oracle();
  int checked = 0;
  for (const auto& [name, v] : want.items()) {
    if (name == "torchmetrics") continue;
    INFO(where << ": " << name << " (torchmetrics " << want["torchmetrics"].get<std::string>() << ")");
    REQUIRE(got.contains(name));
    if (v.is_array()) {
      std::vector<double> flat;
      for (const auto& row : v)
        for (const auto& x : row) flat.push_back(x.get<double>());
      CHECK(got[name].get<std::vector<double>>() == flat);
    } else {
      CHECK(std::abs(got[name].get<double>() - v.get<double>()) <= 1e-6);
    }
    ++checked;
  }
  CHECK(checked == 4 + 24 + 1 + 1);
  for (const std::string kind : {"regression", "multiclass", "binary"}) CHECK(got["samples_" + kind] == kSamples);
}

int launch(const fs::path& out, int nproc) {
  return pt::parallel::launch_local({.nproc = nproc,
                                     .env = {{"POLICYTRAIN_TEST_WORKER", "replay"},
                                             {"POLICYTRAIN_TEST_OUT", out.string()},
                                             {"OMP_NUM_THREADS", "1"}},
                                     .deadline = std::chrono::seconds(300)});
}

}  // namespace

TEST_CASE("every built-in metric equals torchmetrics' on the same predictions, in one process over 15 batches") {
  const auto got = evaluate_all(0, 1);
  check_against_torchmetrics(got, "one process");
  // The macro averages leave out class 4, which no target has and nothing predicts: not the plain mean of 5.
  CHECK(got["recall_macro"].get<double>() != doctest::Approx(got["recall_macro"].get<double>() * 4 / 5));
}

TEST_CASE("every built-in metric equals torchmetrics' on 2 and 3 ranks over Gloo with uneven shards") {
  for (int nproc : {2, 3}) {
    const auto out = testing::temp_dir("epoch-metrics-" + std::to_string(nproc));
    REQUIRE(launch(out, nproc) == 0);
    for (int r = 0; r < nproc; ++r) {
      std::ifstream f(out / ("metrics" + std::to_string(r) + ".json"));
      check_against_torchmetrics(nlohmann::json::parse(f), std::to_string(nproc) + " ranks, rank " + std::to_string(r));
    }
    fs::remove_all(out);
  }
}

TEST_CASE("reduce_metric_states: sums, maxima, minima and concatenations over 3 ranks in lock step") {
  // Three ranks (threads) whose all-reduce is a barrier and an elementwise reduction of their three buffers.
  std::vector<std::vector<pt::MetricState>> ranks(3);
  for (int r = 0; r < 3; ++r)
    ranks[r] = {{"s", torch::full({2}, r + 1.0, torch::kDouble), pt::Reduce::sum},
                {"c", torch::arange(r * 10, r * 10 + r + 1, torch::kLong), pt::Reduce::cat},
                {"mx", torch::tensor({double(r), double(-r)}), pt::Reduce::max},
                {"mn", torch::tensor({double(r), double(-r)}), pt::Reduce::min}};
  std::barrier sync(3);
  std::vector<torch::Tensor> slot(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      std::vector<pt::MetricState*> p;
      for (auto& s : ranks[r]) p.push_back(&s);
      pt::reduce_metric_states(p, r, 3, [&](torch::Tensor& t, pt::Reduce op) {
        slot[r] = t.clone();
        sync.arrive_and_wait();
        auto a = slot[0].clone();
        for (int o = 1; o < 3; ++o)
          a = op == pt::Reduce::sum ? a + slot[o] : op == pt::Reduce::max ? torch::maximum(a, slot[o]) : torch::minimum(a, slot[o]);
        sync.arrive_and_wait();
        t.copy_(a);
      });
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    CHECK(torch::equal(ranks[r][0].value, torch::full({2}, 6.0, torch::kDouble)));
    CHECK(torch::equal(ranks[r][1].value, torch::tensor({0, 10, 11, 20, 21, 22}, torch::kLong)));
    CHECK(torch::equal(ranks[r][2].value, torch::tensor({2.0, 0.0}, torch::kDouble)));
    CHECK(torch::equal(ranks[r][3].value, torch::tensor({0.0, -2.0}, torch::kDouble)));
  }
}

namespace {

/// A linear regression that declares RMSE and R² once (the monitors' metrics). Its validation set follows another
/// linear rule than its training set, so that the validation RMSE falls, then rises: plateaus and a stop happen.
// [snippet:regression-metrics]
struct LinearRegression {
  torch::nn::Linear lin{nullptr};
  LinearRegression() {
    torch::manual_seed(7);
    lin = torch::nn::Linear(3, 1);
  }
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::mse_loss(lin->forward(b.x).squeeze(1), b.y); }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = lin->forward(b.x);
    return {torch::mse_loss(out.squeeze(1), b.y), out};
  }
  pt::MetricCollection metrics() const { return {pt::metric::RootMeanSquaredError{}, pt::metric::R2Score{}}; }
};
// [/snippet:regression-metrics]

std::pair<torch::Tensor, torch::Tensor> linear_data(int64_t n, std::vector<float> w, uint64_t seed) {
  torch::manual_seed(seed);
  auto x = torch::randn({n, 3});
  return {x, torch::mv(x, torch::tensor(w)) + 0.3 * torch::randn({n})};
}

}  // namespace

TEST_CASE("EarlyStopping, the best checkpoint and the plateau schedule monitor RMSE and R2 as a hand-written loop does") {
  auto [x, y] = linear_data(64, {1.f, -2.f, 0.5f}, 21);
  auto [vx, vy] = linear_data(30, {1.5f, -1.f, 0.5f}, 22);  // batches of 8, 8, 8 and 6: a mean of batch RMSEs differs
  constexpr int64_t kEpochs = 30;
  constexpr double kLr = 0.05;

  // The hand-written loop: SGD, the epoch's RMSE and R2 from all 30 predictions, ReduceLROnPlateau's rule on RMSE
  // (patience 1, factor 0.5, relative threshold 1e-4), the best R2, and a stop after 2 epochs without a better RMSE.
  std::vector<double> rmse, r2;
  int64_t stop_epoch = -1, best_epoch = -1, reductions = 0;
  double lr = kLr, best_r2 = -1e300;
  torch::Tensor hand_weight;
  {
    torch::manual_seed(7);
    torch::nn::Linear lin(3, 1);
    torch::optim::SGD opt(lin->parameters(), kLr);
    double plateau_best = 1e300, es_best = 1e300;
    int64_t bad = 0, wait = 0;
    for (int64_t e = 0; e < kEpochs && stop_epoch < 0; ++e) {
      for (int64_t i = 0; i < 4; ++i) {
        opt.zero_grad();
        torch::mse_loss(lin->forward(x.slice(0, 16 * i, 16 * i + 16)).squeeze(1), y.slice(0, 16 * i, 16 * i + 16)).backward();
        opt.step();
      }
      torch::NoGradGuard ng;
      const auto p = lin->forward(vx).squeeze(1).to(torch::kDouble);
      const auto t = vy.to(torch::kDouble);
      rmse.push_back((p - t).square().mean().sqrt().item<double>());
      r2.push_back(1 - ((t - p).square().sum() / (t - t.mean()).square().sum()).item<double>());
      if (r2.back() > best_r2) best_r2 = r2.back(), best_epoch = e;
      if (rmse.back() < plateau_best * (1 - 1e-4)) plateau_best = rmse.back(), bad = 0;
      else if (++bad > 1) {
        lr *= 0.5, bad = 0, ++reductions;
        for (auto& g : opt.param_groups()) static_cast<torch::optim::SGDOptions&>(g.options()).lr(lr);
      }
      if (rmse.back() < es_best) es_best = rmse.back(), wait = 0;
      else if (++wait >= 2) stop_epoch = e;
    }
    hand_weight = lin->weight.detach().clone();
  }
  REQUIRE(stop_epoch > 0);       // the run stops early,
  REQUIRE(reductions >= 1);      // the lr is reduced first,
  REQUIRE(best_epoch < stop_epoch);  // and the best R2 is not the last

  pt::data::TensorLoader train(x, y, {.batch_size = 16, .shuffle = false});
  pt::data::TensorLoader val(vx, vy, {.batch_size = 8, .shuffle = false});
  LinearRegression task;
  torch::optim::SGD opt(task.module().parameters(), kLr);
  const auto dir = testing::temp_dir("monitor-rmse-r2");
  pt::Trainer<LinearRegression, pt::schedule::Lr, pt::checkpoint::Disk, pt::callbacks::EarlyStopping> t(
      task, opt, pt::schedule::Lr({.kind = pt::schedule::Kind::plateau, .monitor = "rmse", .patience = 1, .factor = 0.5}),
      pt::checkpoint::Disk({.directory = dir, .best = true, .monitor = {.metric = "r2"}, .export_final = false, .log = nullptr}),
      pt::callbacks::EarlyStopping({.monitor = {.metric = "rmse"}, .patience = 2, .log = nullptr}));
  const auto r = t.fit(train, val, {.epochs = kEpochs});
  REQUIRE(static_cast<int64_t>(r.validation.size()) == stop_epoch + 1);
  CHECK(r.stopped_early);
  for (size_t e = 0; e < r.validation.size(); ++e) {
    INFO("epoch " << e);
    CHECK(r.validation[e].get("rmse") == doctest::Approx(rmse[e]).epsilon(1e-6));
    CHECK(r.validation[e].get("r2") == doctest::Approx(r2[e]).epsilon(1e-6));
  }
  CHECK(t.policy<pt::Category::checkpoint>().best_epoch() == best_epoch);
  CHECK(t.policy<pt::Category::checkpoint>().best_metric() == doctest::Approx(best_r2).epsilon(1e-6));
  CHECK(t.get<pt::callbacks::EarlyStopping>().best() == doctest::Approx(*std::min_element(rmse.begin(), rmse.end())).epsilon(1e-6));
  CHECK(opt.param_groups()[0].options().get_lr() == doctest::Approx(lr));
  CHECK(torch::allclose(task.lin->weight, hand_weight, 1e-6, 1e-6));
  CHECK(fs::exists(dir / "best.ckpt"));
  fs::remove_all(dir);
}

namespace {

/// A 3-class linear classifier declaring the plain accuracy and the macro F1 (issue 39: a multi-class task end to end).
struct ThreeClass {
  torch::nn::Linear lin{nullptr};
  ThreeClass() {
    torch::manual_seed(5);
    lin = torch::nn::Linear(4, 3);
  }
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(lin->forward(b.x), b.y); }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = lin->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
  pt::MetricCollection metrics() const {
    return {pt::metric::Accuracy({.num_classes = 3, .average = Average::micro}),
            pt::metric::F1Score({.num_classes = 3, .average = Average::macro})};
  }
};

/// A logistic regression declaring the AUROC of its probabilities (a binary task end to end).
struct Binary {
  torch::nn::Linear lin{nullptr};
  Binary() {
    torch::manual_seed(6);
    lin = torch::nn::Linear(2, 1);
  }
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) {
    return torch::binary_cross_entropy_with_logits(lin->forward(b.x).squeeze(1), b.y);
  }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = lin->forward(b.x).squeeze(1);
    return {torch::binary_cross_entropy_with_logits(out, b.y), torch::sigmoid(out)};
  }
  pt::MetricCollection metrics() const { return {pt::metric::BinaryAUROC{}}; }
};

/// The macro F1 by its definition: per class 2 tp / (2 tp + fp + fn), averaged over the classes that occur in the
/// targets or the predictions.
double macro_f1(const torch::Tensor& pred, const torch::Tensor& target, int64_t k) {
  double sum = 0;
  int64_t n = 0;
  for (int64_t c = 0; c < k; ++c) {
    const double tp = ((pred == c) & (target == c)).sum().item<double>();
    const double fp = ((pred == c) & (target != c)).sum().item<double>();
    const double fn = ((pred != c) & (target == c)).sum().item<double>();
    if (tp + fp + fn == 0) continue;
    sum += 2 * tp / (2 * tp + fp + fn);
    ++n;
  }
  return n ? sum / static_cast<double>(n) : 0.0;
}

/// The AUROC by its definition: the share of (positive, negative) pairs the positive outscores, ties counted half.
double pair_auroc(const torch::Tensor& score, const torch::Tensor& target) {
  const auto s = to_vec(score), t = to_vec(target);
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j)
      if (t[i] == 1 && t[j] == 0) {
        pairs += 1;
        wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
      }
  return pairs ? wins / pairs : 0.0;
}

/// What EarlyStopping (patience 2, min_delta 0) and the best checkpoint decide from a metric's per-epoch values, by
/// their rules: the stop after `patience` epochs without a strictly better value, the first epoch of the best.
struct Decisions {
  int64_t stop_epoch = -1, best_epoch = -1;
  double best = 0;
};
Decisions decide(const std::vector<double>& stop_on, const std::vector<double>& best_on, bool higher_stop) {
  Decisions d;
  double es_best = higher_stop ? -1e300 : 1e300;
  int64_t wait = 0;
  for (size_t e = 0; e < stop_on.size(); ++e) {
    const bool better = higher_stop ? stop_on[e] > es_best : stop_on[e] < es_best;
    if (better) es_best = stop_on[e], wait = 0;
    else if (++wait >= 2) {
      d.stop_epoch = static_cast<int64_t>(e);
      break;
    }
  }
  const size_t n = d.stop_epoch >= 0 ? static_cast<size_t>(d.stop_epoch) + 1 : best_on.size();
  for (size_t e = 0; e < n; ++e)
    if (d.best_epoch < 0 || best_on[e] > d.best) d.best = best_on[e], d.best_epoch = static_cast<int64_t>(e);
  return d;
}

}  // namespace

TEST_CASE("a 3-class and a binary task: EarlyStopping and the best checkpoint monitor their declared metrics as a hand-written loop does") {
  constexpr int64_t kEpochs = 25;
  SUBCASE("3 classes: accuracy (micro) and macro F1, early stop on F1, best checkpoint on accuracy") {
    torch::manual_seed(31);
    const auto centers = torch::tensor({{1.f, 0.f, 0.f, 0.5f}, {0.f, 1.f, 0.f, -0.5f}, {0.f, 0.f, 1.f, 0.f}});
    auto y = torch::randint(0, 3, {48}, torch::kLong);
    auto x = torch::randn({48, 4}) + 1.2 * centers.index_select(0, y);
    auto vy = torch::randint(0, 3, {30}, torch::kLong);  // batches of 8, 8, 8, 6: a mean of batch F1s differs
    auto vx = torch::randn({30, 4}) + 1.2 * centers.index_select(0, vy);
    constexpr double kLr = 0.2;
    std::vector<double> acc, f1;
    std::vector<torch::Tensor> weights;  // after each epoch
    {
      torch::manual_seed(5);
      torch::nn::Linear lin(4, 3);
      torch::optim::SGD opt(lin->parameters(), kLr);
      for (int64_t e = 0; e < kEpochs; ++e) {
        for (int64_t i = 0; i < 3; ++i) {
          opt.zero_grad();
          torch::nn::functional::cross_entropy(lin->forward(x.slice(0, 16 * i, 16 * i + 16)), y.slice(0, 16 * i, 16 * i + 16)).backward();
          opt.step();
        }
        torch::NoGradGuard ng;
        const auto pred = lin->forward(vx).argmax(1);
        acc.push_back((pred == vy).to(torch::kDouble).mean().item<double>());
        f1.push_back(macro_f1(pred, vy, 3));
        weights.push_back(lin->weight.detach().clone());
      }
    }
    const auto d = decide(f1, acc, /*higher_stop=*/true);
    REQUIRE(d.stop_epoch > 0);  // F1 on 30 samples stalls: the run stops early
    INFO("hand: stop after epoch " << d.stop_epoch << ", best accuracy " << d.best << " at epoch " << d.best_epoch);

    pt::data::TensorLoader train(x, y, {.batch_size = 16, .shuffle = false});
    pt::data::TensorLoader val(vx, vy, {.batch_size = 8, .shuffle = false});
    ThreeClass task;
    torch::optim::SGD opt(task.module().parameters(), kLr);
    const auto dir = testing::temp_dir("monitor-f1-accuracy");
    pt::Trainer<ThreeClass, pt::checkpoint::Disk, pt::callbacks::EarlyStopping> t(
        task, opt, pt::checkpoint::Disk({.directory = dir, .best = true, .monitor = {.metric = "accuracy"}, .export_final = false, .log = nullptr}),
        pt::callbacks::EarlyStopping({.monitor = {.metric = "f1"}, .patience = 2, .log = nullptr}));
    const auto r = t.fit(train, val, {.epochs = kEpochs});
    REQUIRE(static_cast<int64_t>(r.validation.size()) == d.stop_epoch + 1);
    CHECK(r.stopped_early);
    for (size_t e = 0; e < r.validation.size(); ++e) {
      INFO("epoch " << e);
      CHECK(r.validation[e].get("accuracy") == doctest::Approx(acc[e]).epsilon(1e-9));
      CHECK(r.validation[e].get("f1") == doctest::Approx(f1[e]).epsilon(1e-9));
    }
    CHECK(t.policy<pt::Category::checkpoint>().best_epoch() == d.best_epoch);
    CHECK(t.policy<pt::Category::checkpoint>().best_metric() == doctest::Approx(d.best).epsilon(1e-9));
    CHECK(t.get<pt::callbacks::EarlyStopping>().best() == doctest::Approx(*std::max_element(f1.begin(), f1.begin() + d.stop_epoch + 1)).epsilon(1e-9));
    CHECK(torch::allclose(task.lin->weight, weights[static_cast<size_t>(d.stop_epoch)], 1e-6, 1e-6));
    // best.ckpt holds the weights of the best epoch (issue 39: the evaluated weights that scored best)
    ThreeClass restored;
    pt::checkpoint::load_weights(restored.module(), dir / "best.ckpt");
    CHECK(torch::allclose(restored.lin->weight, weights[static_cast<size_t>(d.best_epoch)], 1e-6, 1e-6));
    fs::remove_all(dir);
  }
  SUBCASE("binary: the AUROC of the probabilities, early stop and best checkpoint on it") {
    torch::manual_seed(32);
    auto y = torch::randint(0, 2, {48}).to(torch::kFloat);
    auto x = torch::randn({48, 2}) + torch::stack({y, -y}, 1) * 0.8;
    auto vy = torch::randint(0, 2, {30}).to(torch::kFloat);
    auto vx = torch::randn({30, 2}) + torch::stack({vy, -vy}, 1) * 0.8;
    constexpr double kLr = 0.1;
    std::vector<double> auroc;
    std::vector<torch::Tensor> weights;
    {
      torch::manual_seed(6);
      torch::nn::Linear lin(2, 1);
      torch::optim::SGD opt(lin->parameters(), kLr);
      for (int64_t e = 0; e < kEpochs; ++e) {
        for (int64_t i = 0; i < 3; ++i) {
          opt.zero_grad();
          torch::binary_cross_entropy_with_logits(lin->forward(x.slice(0, 16 * i, 16 * i + 16)).squeeze(1),
                                                  y.slice(0, 16 * i, 16 * i + 16)).backward();
          opt.step();
        }
        torch::NoGradGuard ng;
        auroc.push_back(pair_auroc(torch::sigmoid(lin->forward(vx).squeeze(1)), vy));
        weights.push_back(lin->weight.detach().clone());
      }
    }
    const auto d = decide(auroc, auroc, /*higher_stop=*/true);
    INFO("hand: stop after epoch " << d.stop_epoch << ", best AUROC " << d.best << " at epoch " << d.best_epoch);
    const int64_t epochs_run = d.stop_epoch >= 0 ? d.stop_epoch + 1 : kEpochs;

    pt::data::TensorLoader train(x, y, {.batch_size = 16, .shuffle = false});
    pt::data::TensorLoader val(vx, vy, {.batch_size = 8, .shuffle = false});
    Binary task;
    torch::optim::SGD opt(task.module().parameters(), kLr);
    const auto dir = testing::temp_dir("monitor-auroc");
    pt::Trainer<Binary, pt::checkpoint::Disk, pt::callbacks::EarlyStopping> t(
        task, opt, pt::checkpoint::Disk({.directory = dir, .best = true, .monitor = {.metric = "auroc"}, .export_final = false, .log = nullptr}),
        pt::callbacks::EarlyStopping({.monitor = {.metric = "auroc"}, .patience = 2, .log = nullptr}));
    const auto r = t.fit(train, val, {.epochs = kEpochs});
    REQUIRE(static_cast<int64_t>(r.validation.size()) == epochs_run);
    CHECK(r.stopped_early == (d.stop_epoch >= 0));
    for (size_t e = 0; e < r.validation.size(); ++e) {
      INFO("epoch " << e);
      CHECK(r.validation[e].get("auroc") == doctest::Approx(auroc[e]).epsilon(1e-9));
    }
    CHECK(t.policy<pt::Category::checkpoint>().best_epoch() == d.best_epoch);
    CHECK(t.policy<pt::Category::checkpoint>().best_metric() == doctest::Approx(d.best).epsilon(1e-9));
    CHECK(torch::allclose(task.lin->weight, weights[static_cast<size_t>(epochs_run - 1)], 1e-6, 1e-6));
    Binary restored;
    pt::checkpoint::load_weights(restored.module(), dir / "best.ckpt");
    CHECK(torch::allclose(restored.lin->weight, weights[static_cast<size_t>(d.best_epoch)], 1e-6, 1e-6));
    fs::remove_all(dir);
  }
}

TEST_CASE("a misspelt epoch-level metric is refused when fit begins, before the first step, naming the declared ones") {
  auto [x, y] = linear_data(16, {1.f, 1.f, 1.f}, 3);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  LinearRegression task;
  torch::optim::SGD opt(task.module().parameters(), 0.05);
  pt::Trainer<LinearRegression, pt::callbacks::EarlyStopping> t(
      task, opt, pt::callbacks::EarlyStopping({.monitor = {.metric = "rsme"}, .log = nullptr}));
  CHECK_THROWS_WITH_AS(t.fit(loader, loader, {.epochs = 1}),
                       doctest::Contains("callbacks::EarlyStopping monitors the metric 'rsme', which the validation does "
                                         "not report; it reports: loss, rmse, r2"),
                       std::invalid_argument);
  CHECK(t.state().global_step == 0);
  CHECK(pt::Monitor::default_mode("r2") == pt::Mode::max);
  CHECK(pt::Monitor::default_mode("rmse") == pt::Mode::min);
  CHECK(pt::Monitor::default_mode("f1_macro") == pt::Mode::max);
  CHECK(pt::Monitor::default_mode("auroc") == pt::Mode::max);
}

namespace {

/// What each optimizer step really used and produced: the lr in effect when the step runs (read after every other
/// policy's before_step) and the step's loss.
struct StepTruth {
  std::vector<double> lr, loss;
  template <class Ctx>
  void before_step(Ctx& ctx) { lr.push_back(ctx.lr()); }
  template <class Ctx>
  void after_step(Ctx& ctx, bool) { loss.push_back(ctx.state().loss_value()); }
};

std::vector<std::vector<std::string>> csv_rows(const fs::path& p) {
  std::ifstream f(p);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(f, line);) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST_CASE("logs of a regression: its metrics as columns, no val_accuracy, and every log shows the lr its step used") {
  auto [x, y] = linear_data(48, {1.f, -2.f, 0.5f}, 31);
  auto [vx, vy] = linear_data(20, {1.f, -2.f, 0.5f}, 32);
  pt::data::TensorLoader train(x, y, {.batch_size = 16, .shuffle = false});
  pt::data::TensorLoader val(vx, vy, {.batch_size = 8, .shuffle = false});
  LinearRegression task;
  torch::optim::SGD opt(task.module().parameters(), 0.05);
  const auto dir = testing::temp_dir("logs-any-task");
  std::FILE* bar = std::tmpfile();
  // The schedule oracle: StepLR(step_size 1, gamma 0.9), the lr of step t (0-based) is 0.05 * 0.9^t.
  pt::Trainer<LinearRegression, pt::schedule::Lr, pt::callbacks::MetricsLog, pt::callbacks::TensorBoard,
              pt::callbacks::ProgressBar, StepTruth>
      t(task, opt, pt::schedule::Lr({.kind = pt::schedule::Kind::step, .step_size = 1, .gamma = 0.9}),
        pt::callbacks::MetricsLog({.dir = dir / "log", .print_summary = false}),
        pt::callbacks::TensorBoard({.dir = dir / "tb", .every = 1, .hparams = {{"lr", 0.05}}}),
        pt::callbacks::ProgressBar({.every = 1, .force_tty = 0, .out = bar}));
  const auto r = t.fit(train, val, {.epochs = 2});
  const auto& truth = t.get<StepTruth>();
  REQUIRE(truth.lr.size() == 6);
  for (size_t s = 0; s < truth.lr.size(); ++s) CHECK(truth.lr[s] == doctest::Approx(0.05 * std::pow(0.9, s)).epsilon(1e-12));

  // steps.csv: column lr.
  const auto steps = csv_rows(dir / "log" / "steps.csv");
  REQUIRE(steps.size() == 7);
  for (size_t s = 0; s < 6; ++s) CHECK(std::stod(steps[s + 1][4]) == doctest::Approx(truth.lr[s]).epsilon(1e-5));
  // epochs.csv: the declared metrics as columns, no val_accuracy.
  const auto epochs = csv_rows(dir / "log" / "epochs.csv");
  REQUIRE(epochs.size() == 3);
  CHECK(epochs[0] == std::vector<std::string>{"epoch", "train_loss", "val_loss", "val_rmse", "val_r2", "seconds",
                                              "samples_per_s", "data_wait_fraction"});
  for (size_t e = 0; e < 2; ++e) {
    CHECK(std::stod(epochs[e + 1][3]) == doctest::Approx(r.validation[e].get("rmse")).epsilon(1e-5));
    CHECK(std::stod(epochs[e + 1][4]) == doctest::Approx(r.validation[e].get("r2")).epsilon(1e-5));
  }
  // The progress bar: each step's line shows that step's lr; the epoch line the mean of the epoch's step losses.
  const std::string printed = testing::read_all(bar);
  std::fclose(bar);
  std::vector<double> bar_lr, epoch_loss;
  std::stringstream lines(printed);
  for (std::string l; std::getline(lines, l);) {
    if (l.find('[') != std::string::npos) bar_lr.push_back(std::stod(l.substr(l.rfind(" lr ") + 4)));
    else if (l.rfind("epoch ", 0) == 0) epoch_loss.push_back(std::stod(l.substr(l.find("  loss ") + 7)));
  }
  REQUIRE_MESSAGE(bar_lr.size() == 6, printed);
  for (size_t s = 0; s < 6; ++s) CHECK(bar_lr[s] == doctest::Approx(truth.lr[s]).epsilon(2e-3));  // printed with %.3g
  REQUIRE_MESSAGE(epoch_loss.size() == 2, printed);
  for (size_t e = 0; e < 2; ++e)
    CHECK(epoch_loss[e] == doctest::Approx((truth.loss[3 * e] + truth.loss[3 * e + 1] + truth.loss[3 * e + 2]) / 3).epsilon(1e-3));
  // TensorBoard, read by TensorBoard itself: train/lr/group0 at step s+1 is step s's lr; HParams lists the metrics.
  nlohmann::json rows = nlohmann::json::array();
  for (size_t s = 0; s < 6; ++s) rows.push_back({s + 1, truth.lr[s]});
  nlohmann::json expected{{"scalars", {{"train/lr/group0", rows}}}, {"hparams", {{"lr", 0.05}}},
                          {"metrics", {"val/loss", "val/rmse", "val/r2"}}};
  std::ofstream(dir / "expected.json") << expected.dump();
  const std::string cmd = std::string(POLICYTRAIN_BINARY_DIR) + "/venv-tensorboard/bin/python " + POLICYTRAIN_SOURCE_DIR +
                          "/tests/integration/check_tensorboard.py " + (dir / "tb").string() + " " +
                          (dir / "expected.json").string();
  CHECK_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
  fs::remove_all(dir);
}
