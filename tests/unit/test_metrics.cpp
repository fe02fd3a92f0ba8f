// Metrics and the classification report, against values computed by hand.
#include <doctest/doctest.h>

#include <sstream>

#include "unit/fixtures.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;

TEST_CASE("classification report from a confusion matrix equals the hand-computed scores") {
  // rows: true class, columns: predicted
  const std::vector<std::vector<int64_t>> c{{5, 1, 0}, {2, 3, 1}, {0, 0, 4}};
  auto r = pt::ClassificationReport::from_confusion(c, {"a", "b", "c"});
  REQUIRE(r.classes.size() == 3);
  // class a: tp 5, predicted 7, true 6
  CHECK(r.classes[0].precision == doctest::Approx(5.0 / 7));
  CHECK(r.classes[0].recall == doctest::Approx(5.0 / 6));
  CHECK(r.classes[0].f1 == doctest::Approx(50.0 / 65));
  CHECK(r.classes[0].support == 6);
  CHECK(r.classes[1].precision == doctest::Approx(0.75));
  CHECK(r.classes[1].recall == doctest::Approx(0.5));
  CHECK(r.classes[1].f1 == doctest::Approx(0.6));
  CHECK(r.classes[2].precision == doctest::Approx(0.8));
  CHECK(r.classes[2].recall == doctest::Approx(1.0));
  CHECK(r.classes[2].f1 == doctest::Approx(1.6 / 1.8));
  CHECK(r.accuracy == doctest::Approx(12.0 / 16));
  CHECK(r.total == 16);
  CHECK(r.macro_avg.precision == doctest::Approx((5.0 / 7 + 0.75 + 0.8) / 3));
  CHECK(r.macro_avg.recall == doctest::Approx((5.0 / 6 + 0.5 + 1.0) / 3));
  CHECK(r.macro_avg.f1 == doctest::Approx((50.0 / 65 + 0.6 + 1.6 / 1.8) / 3));
  CHECK(r.weighted_avg.precision == doctest::Approx((6 * 5.0 / 7 + 6 * 0.75 + 4 * 0.8) / 16));
  CHECK(r.weighted_avg.recall == doctest::Approx(0.75));
  CHECK(r.weighted_avg.f1 == doctest::Approx((6 * 50.0 / 65 + 6 * 0.6 + 4 * 1.6 / 1.8) / 16));
  CHECK(r.weighted_avg.support == 16);

  // Layout as scikit-learn's classification_report(digits=4) (strings produced by its format specs).
  const std::string text = r.to_string(4);
  std::istringstream lines(text);
  std::string header, blank, row_a;
  std::getline(lines, header);
  std::getline(lines, blank);
  std::getline(lines, row_a);
  CHECK(header == "              precision    recall  f1-score   support");
  CHECK(blank.empty());
  CHECK(row_a == "           a     0.7143    0.8333    0.7692         6");
  CHECK(text.find("    accuracy                         0.7500        16") != std::string::npos);
  CHECK(text.find("   macro avg     0.7548    0.7778    0.7527        16") != std::string::npos);
  CHECK(text.find("weighted avg     0.7491    0.7500    0.7357        16") != std::string::npos);
}

TEST_CASE("a class that is never predicted or never present scores zero, not NaN") {
  const std::vector<std::vector<int64_t>> c{{3, 0, 0}, {1, 0, 0}, {0, 0, 0}};
  auto r = pt::ClassificationReport::from_confusion(c);
  CHECK(r.classes[1].precision == 0.0);
  CHECK(r.classes[1].recall == 0.0);
  CHECK(r.classes[1].f1 == 0.0);
  CHECK(r.classes[2].support == 0);
  CHECK(r.classes[2].recall == 0.0);
  CHECK(r.classes[0].precision == doctest::Approx(0.75));
  CHECK(r.accuracy == doctest::Approx(0.75));
  CHECK(r.to_json()["classes"]["0"]["precision"].get<double>() == doctest::Approx(0.75));
}

TEST_CASE("MetricsAccumulator weights losses by batch size and counts the confusion matrix") {
  pt::MetricsAccumulator acc;
  // batch 1: 2 samples, mean loss 1.0; predictions 0, 2 for targets 0, 1
  acc.add(torch::tensor(1.0), torch::tensor({{3.0, 1.0, 0.0}, {0.0, 1.0, 2.0}}), torch::tensor({0, 1}));
  // batch 2: 3 samples, mean loss 2.0; predictions 1, 1, 2 for targets 1, 2, 2
  acc.add(torch::tensor(2.0), torch::tensor({{0.0, 5.0, 1.0}, {0.0, 4.0, 1.0}, {0.0, 0.0, 9.0}}), torch::tensor({1, 2, 2}));
  auto m = acc.result();
  CHECK(m.samples == 5);
  CHECK(m.loss == doctest::Approx((2 * 1.0 + 3 * 2.0) / 5));
  CHECK(m.accuracy == doctest::Approx(3.0 / 5));
  const std::vector<std::vector<int64_t>> expected{{1, 0, 0}, {0, 1, 1}, {0, 1, 1}};
  CHECK(m.confusion == expected);
  CHECK(m.get("accuracy") == m.accuracy);
  CHECK_THROWS_WITH_AS(m.get("f2"), doctest::Contains("no metric named 'f2'"), std::out_of_range);
}

// --- Metrics for any task (issue 30, point 4) ---

namespace {

/// y = x . (1, -2, 0.5) + 0.3 + noise: a regression with one output ([batch, 1]) and float targets ([batch]).
std::pair<torch::Tensor, torch::Tensor> regression_data(int64_t n, uint64_t seed) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  auto x = torch::randn({n, 3}, gen);
  auto y = x.matmul(torch::tensor({1.0f, -2.0f, 0.5f})) + 0.3f + 0.1f * torch::randn({n}, gen);
  return {x, y};
}

/// A regression task: MSE loss, and its own metric "mae" (the batch's mean absolute error).
// [snippet:regression-task]
struct RegressionTask {
  torch::nn::Linear lin{torch::nn::LinearOptions(3, 1)};
  RegressionTask() { torch::manual_seed(4); lin = torch::nn::Linear(torch::nn::LinearOptions(3, 1)); }
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::mse_loss(lin->forward(b.x).squeeze(1), b.y); }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = lin->forward(b.x);
    return {torch::mse_loss(out.squeeze(1), b.y), out, {{"mae", (out.squeeze(1) - b.y).abs().mean()}}};
  }
  std::vector<std::string> metric_names() const { return {"mae"}; }
};
// [/snippet:regression-task]

/// A one-logit binary classifier ([batch, 1] logits, float 0/1 targets) that reports its own accuracy.
// [snippet:binary-task]
struct BinaryTask {
  torch::nn::Linear lin{torch::nn::LinearOptions(3, 1)};
  BinaryTask() { torch::manual_seed(5); lin = torch::nn::Linear(torch::nn::LinearOptions(3, 1)); }
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) {
    return torch::binary_cross_entropy_with_logits(lin->forward(b.x).squeeze(1), b.y);
  }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto logit = lin->forward(b.x);
    auto correct = ((logit.squeeze(1) > 0) == (b.y > 0.5)).to(torch::kFloat);
    return {torch::binary_cross_entropy_with_logits(logit.squeeze(1), b.y), logit, {{"accuracy", correct.mean()}}};
  }
  std::vector<std::string> metric_names() const { return {"accuracy"}; }
};
// [/snippet:binary-task]

std::pair<torch::Tensor, torch::Tensor> binary_data(int64_t n, uint64_t seed) {
  auto [x, y] = regression_data(n, seed);
  return {x, (y > 0).to(torch::kFloat)};
}

}  // namespace

TEST_CASE("a one-logit binary classifier's output gets no built-in accuracy, and no LibTorch shape error") {
  pt::MetricsAccumulator acc;
  // [2, 1] logits and float targets: no classes to count (this was `shape '[1, 1]' is invalid for input of size 2`).
  acc.add(torch::tensor(0.5), torch::tensor({{1.5f}, {-0.5f}}), torch::tensor({1.0f, 1.0f}));
  // [3, 1] scores with integer targets: one class is no classification either.
  acc.add(torch::tensor(0.5), torch::tensor({{1.5f}, {-0.5f}, {0.2f}}), torch::tensor({0, 0, 0}));
  const auto m = acc.result();
  CHECK(m.samples == 5);
  CHECK_FALSE(m.has_accuracy());
  CHECK(m.confusion.empty());
  CHECK(m.names() == std::vector<std::string>{"loss"});
  CHECK_THROWS_WITH_AS(m.get("accuracy"), doctest::Contains("no metric named 'accuracy'; this evaluation has: loss"),
                       std::out_of_range);
}

TEST_CASE("a task's own metrics are averaged over samples, weighted by batch size as the loss is") {
  pt::MetricsAccumulator acc;
  acc.add(torch::tensor(1.0), torch::zeros({2, 1}), torch::zeros({2}), {{"mae", torch::tensor(0.5)}, {"accuracy", torch::tensor(1.0)}});
  acc.add(torch::tensor(1.0), torch::zeros({3, 1}), torch::zeros({3}), {{"mae", torch::tensor(2.0)}, {"accuracy", torch::tensor(0.0)}});
  const auto m = acc.result();
  CHECK(m.get("mae") == doctest::Approx((2 * 0.5 + 3 * 2.0) / 5));
  CHECK(m.get("accuracy") == doctest::Approx(2.0 / 5));
  CHECK(m.names() == std::vector<std::string>{"loss", "accuracy", "mae"});
  CHECK_THROWS_WITH_AS(acc.add(torch::tensor(1.0), torch::zeros({2, 1}), torch::zeros({2}), {{"mae", torch::zeros({2})}}),
                       doctest::Contains("the task's metric 'mae' is a tensor of 2 elements; expected a scalar"),
                       std::invalid_argument);
}

TEST_CASE("a regression task reports its own metric: evaluated against a direct computation, monitored, printed without val_acc") {
  auto [x, y] = regression_data(64, 1);
  auto [vx, vy] = regression_data(20, 2);  // batches of 8, 8 and 4: the weighting shows
  pt::data::TensorLoader train(x, y, {.batch_size = 16, .shuffle = false});
  pt::data::TensorLoader val(vx, vy, {.batch_size = 8, .shuffle = false});
  RegressionTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.05);
  std::FILE* out = std::tmpfile();
  const auto logs = testing::temp_dir("regression-logs");
  pt::Trainer<RegressionTask, pt::callbacks::EarlyStopping, pt::callbacks::ProgressBar, pt::callbacks::MetricsLog> t(
      task, opt, pt::callbacks::EarlyStopping({.monitor = {.metric = "mae"}, .patience = 50, .log = nullptr}),
      pt::callbacks::ProgressBar({.force_tty = 0, .out = out}),
      pt::callbacks::MetricsLog({.dir = logs, .print_summary = false}));
  const auto r = t.fit(train, val, {.epochs = 3});
  REQUIRE(r.validation.size() == 3);
  const pt::Metrics m = r.validation.back();
  torch::NoGradGuard g;
  const auto pred = task.lin->forward(vx).squeeze(1);
  CHECK(m.get("mae") == doctest::Approx((pred - vy).abs().mean().item<double>()).epsilon(1e-6));
  CHECK(m.loss == doctest::Approx(torch::mse_loss(pred, vy).item<double>()).epsilon(1e-6));
  CHECK_FALSE(m.has_accuracy());
  CHECK(m.names() == std::vector<std::string>{"loss", "mae"});
  // EarlyStopping watched mae: its best is the smallest mae of the three validations.
  double best = 1e300;
  for (const auto& v : r.validation) best = std::min(best, v.get("mae"));
  CHECK(t.get<pt::callbacks::EarlyStopping>().best() == best);
  const std::string printed = testing::read_all(out);
  std::fclose(out);
  CHECK_MESSAGE(printed.find("val_mae ") != std::string::npos, printed);
  CHECK_MESSAGE(printed.find("val_acc") == std::string::npos, printed);
  // The metrics log: the task's metric in epochs.jsonl and epochs.csv, no accuracy anywhere.
  std::ifstream jl(logs / "epochs.jsonl");
  std::string last;
  for (std::string l; std::getline(jl, l);) last = l;
  const auto j = nlohmann::json::parse(last);
  CHECK(j["val_mae"].get<double>() == m.get("mae"));
  CHECK_FALSE(j.contains("val_accuracy"));
  std::ifstream csv(logs / "epochs.csv");
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  // One column per declared metric: val_mae, and no (always empty) val_accuracy.
  CHECK(header == "epoch,train_loss,val_loss,val_mae,seconds,samples_per_s,data_wait_fraction");
  CHECK_MESSAGE(row.find(",,") == std::string::npos, row);
  std::filesystem::remove_all(logs);
}

TEST_CASE("a one-logit binary classifier reports its own accuracy: equal to a direct computation, monitored as accuracy") {
  auto [x, y] = binary_data(64, 3);
  auto [vx, vy] = binary_data(20, 4);
  pt::data::TensorLoader train(x, y, {.batch_size = 16, .shuffle = false});
  pt::data::TensorLoader val(vx, vy, {.batch_size = 8, .shuffle = false});
  BinaryTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  pt::Trainer<BinaryTask, pt::callbacks::EarlyStopping> t(
      task, opt, pt::callbacks::EarlyStopping({.monitor = {.metric = "accuracy", .mode = pt::Mode::max}, .patience = 50, .log = nullptr}));
  const auto r = t.fit(train, val, {.epochs = 2});
  REQUIRE(r.validation.size() == 2);
  torch::NoGradGuard g;
  const auto logit = task.lin->forward(vx).squeeze(1);
  const double want = ((logit > 0) == (vy > 0.5)).to(torch::kDouble).mean().item<double>();
  CHECK(r.validation.back().accuracy == doctest::Approx(want));
  CHECK(r.validation.back().get("accuracy") == doctest::Approx(want));
  CHECK(r.validation.back().confusion.empty());
}

TEST_CASE("a monitor naming a metric the validation does not report is refused when fit begins, before any step") {
  SUBCASE("a classification task (built-in loss and accuracy): EarlyStopping on 'val_loss'") {
    auto [x, y] = testing::toy_data(32);
    pt::data::TensorLoader loader(x, y, {.batch_size = 16});
    testing::MlpTask task;
    torch::optim::SGD opt(task.module().parameters(), 0.05);
    pt::Trainer<testing::MlpTask, pt::callbacks::EarlyStopping> t(
        task, opt, pt::callbacks::EarlyStopping({.monitor = {.metric = "val_loss"}, .log = nullptr}));
    CHECK_THROWS_WITH_AS(t.fit(loader, loader, {.epochs = 2}),
                         doctest::Contains("callbacks::EarlyStopping monitors the metric 'val_loss', which the validation "
                                           "does not report; it reports: loss, accuracy"),
                         std::invalid_argument);
    CHECK(t.state().global_step == 0);
  }
  SUBCASE("a regression task (loss and mae): best checkpoints on 'accuracy'") {
    auto [x, y] = regression_data(32, 1);
    pt::data::TensorLoader loader(x, y, {.batch_size = 16});
    RegressionTask task;
    torch::optim::SGD opt(task.module().parameters(), 0.05);
    const auto dir = testing::temp_dir("monitor-check");
    pt::Trainer<RegressionTask, pt::checkpoint::Disk> t(
        task, opt, pt::checkpoint::Disk({.directory = dir, .best = true, .monitor = {.metric = "accuracy", .mode = pt::Mode::max},
                                         .export_final = false, .log = nullptr}));
    CHECK_THROWS_WITH_AS(t.fit(loader, loader, {.epochs = 2}),
                         doctest::Contains("checkpoint::Disk monitors the metric 'accuracy', which the validation does "
                                           "not report; it reports: loss, mae"),
                         std::invalid_argument);
    CHECK(t.state().global_step == 0);
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("a task's metrics must match its metric_names(): declared but missing, or reported but undeclared") {
  auto [x, y] = regression_data(16, 1);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  SUBCASE("declared, never reported") {
    struct Declares : RegressionTask {
      std::vector<std::string> metric_names() const { return {"mae", "r2"}; }
    } task;
    torch::optim::SGD opt(task.module().parameters(), 0.05);
    pt::Trainer<Declares> t(task, opt);
    CHECK_THROWS_WITH_AS(t.evaluate(loader), doctest::Contains("declares the metric 'r2' in metric_names(), but its "
                                                               "validation reports: loss, mae"),
                         std::runtime_error);
  }
  SUBCASE("reported, not declared") {
    struct Undeclared {
      RegressionTask inner;
      torch::nn::Module& module() { return inner.module(); }
      torch::Tensor training_step(const pt::Batch& b) { return inner.training_step(b); }
      pt::Prediction validation_step(const pt::Batch& b) { return inner.validation_step(b); }
    } task;
    torch::optim::SGD opt(task.module().parameters(), 0.05);
    pt::Trainer<Undeclared> t(task, opt);
    CHECK_THROWS_WITH_AS(t.evaluate(loader), doctest::Contains("reports the metric 'mae' (Prediction::metrics) but the "
                                                               "task declares no metric_names()"),
                         std::runtime_error);
  }
}
