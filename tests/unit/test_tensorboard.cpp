// callbacks::TensorBoard: the event files, read back by TensorBoard's own EventAccumulator (from PyPI, in the
// virtual environment tests/integration/py_venv.sh makes; CTest's fixture tensorboard.venv creates it).
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include <policytrain/callbacks/grad_clip.hpp>
#include <policytrain/callbacks/tensorboard.hpp>

namespace pt = policytrain;
namespace pd = policytrain::data;
using TB = pt::callbacks::TensorBoard;
using Clip = pt::callbacks::GradClip;

namespace {

// What the run logged, read at the same hooks by a separate callback: the oracle's expected values.
struct Recorder {
  nlohmann::json scalars = nlohmann::json::object();
  int64_t histogram_every = 0;
  nlohmann::json histograms = nlohmann::json::object();
  void add(const std::string& tag, int64_t step, double v) { scalars[tag].push_back({step, v}); }
  template <class Ctx>
  void after_step(Ctx& ctx, bool) {
    const int64_t s = ctx.state().global_step;
    add("train/loss", s, ctx.state().loss_value());
    for (size_t g = 0; g < ctx.optimizer().param_groups().size(); ++g) add("train/lr/group" + std::to_string(g), s, ctx.lr(g));
    if constexpr (Ctx::template has<Clip>()) add("train/grad_norm", s, ctx.template get<Clip>().last_norm());
    if constexpr (requires { ctx.template policy<pt::Category::precision>().loss_scale(); })
      add("train/loss_scale", s, ctx.template policy<pt::Category::precision>().loss_scale());
    if (histogram_every > 0 && s % histogram_every == 0)
      for (const auto& p : ctx.module().named_parameters(true)) {
        histograms["weights/" + p.key()].push_back({s, p.value().numel()});
        histograms["grads/" + p.key()].push_back({s, p.value().grad().numel()});
      }
  }
  template <class Ctx>
  void on_validation_end(Ctx& ctx, const pt::Metrics& m) {
    add("val/loss", ctx.state().global_step, m.loss);
    add("val/accuracy", ctx.state().global_step, m.accuracy);
  }
};

std::string venv_python() {
  const std::string py = POLICYTRAIN_BINARY_DIR "/venv-tensorboard/bin/python";
  REQUIRE_MESSAGE(std::filesystem::exists(py), "no TensorBoard venv at " << py << "; run `ctest -R tensorboard.venv` "
                  "(or tests/integration/py_venv.sh " POLICYTRAIN_BINARY_DIR "/venv-tensorboard tensorboard tensorboard) first");
  return py;
}

// Runs check_tensorboard.py on `dir` against `expected`; returns its exit status (its report goes to the log).
int check(const std::filesystem::path& dir, const nlohmann::json& expected) {
  std::ofstream(dir / "expected.json") << expected.dump();
  const std::string cmd = venv_python() + " " POLICYTRAIN_SOURCE_DIR "/tests/integration/check_tensorboard.py " +
                          dir.string() + " " + (dir / "expected.json").string();
  return std::system(cmd.c_str());
}

size_t event_files(const std::filesystem::path& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    n += e.path().filename().string().find("tfevents") != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("TensorBoard's scalars, histograms, settings text and hparams read back by EventAccumulator") {
  auto dir = testing::temp_dir("tensorboard");
  auto [x, y] = testing::toy_data(96);
  pd::TensorLoader train(x, y, {.batch_size = 16, .seed = 1});
  pd::TensorLoader val(x, y, {.batch_size = 48, .shuffle = false});
  testing::MlpTask task(1);
  // Two param groups with their own learning rates: one lr tag per group.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(task.net->fc1->parameters(), std::make_unique<torch::optim::SGDOptions>(0.1));
  groups.emplace_back(task.net->fc2->parameters(), std::make_unique<torch::optim::SGDOptions>(0.05));
  torch::optim::SGD opt(groups, torch::optim::SGDOptions(0.1));
  const nlohmann::json hparams{{"lr", 0.1}, {"optimizer", "sgd"}, {"clip", true}};
  Recorder rec;
  rec.histogram_every = 4;
  // Loss scaling (in fp32, so the run stays exact) whose scale grows every 2 steps: train/loss_scale changes.
  using AC = pt::precision::Autocast;
  const AC::Options ao{.dtype = torch::kFloat, .loss_scaling = pt::precision::LossScaling::on,
                       .scaler = {.init_scale = 1024.0, .growth_interval = 2}};
  pt::Trainer<testing::MlpTask, AC, Clip, TB, Recorder> t(
      task, opt, AC(ao), Clip({.mode = Clip::Mode::norm, .max_norm = 0.5, .p = 2.0}),
      TB({.dir = dir, .every = 1, .histogram_every = 4, .settings = "--lr 0.1 --epochs 2", .hparams = hparams}),
      std::move(rec));
  t.fit(train, val, {.epochs = 2});
  auto& r = t.get<Recorder>();
  REQUIRE(r.scalars["train/loss"].size() == 12);
  REQUIRE(r.scalars["train/loss_scale"].size() == 12);
  CHECK(r.scalars["train/loss_scale"].back()[1].get<double>() > 1024.0);  // it grew: the tag is not a constant
  CHECK(event_files(dir) == 1);
  nlohmann::json expected{{"scalars", r.scalars}, {"histograms", r.histograms}, {"hparams", hparams},
                          {"metrics", {"val/loss", "val/accuracy"}}, {"text", {{"settings", "--lr 0.1 --epochs 2"}}},
                          {"also_tags", {"train/samples_per_s", "train/data_wait_fraction"}}};
  CHECK(check(dir, expected) == 0);
}

TEST_CASE("TensorBoard resumed into the same directory shows one continuous curve") {
  auto dir = testing::temp_dir("tensorboard-resume");
  auto [x, y] = testing::toy_data(160);
  nlohmann::json expected_loss = nlohmann::json::array();
  {  // The first run goes to step 10, past its last checkpoint (step 6), and is then "killed" mid-record.
    pd::TensorLoader train(x, y, {.batch_size = 16, .seed = 1});
    testing::MlpTask task(1);
    torch::optim::SGD opt(task.module().parameters(), 0.1);
    pt::Trainer<testing::MlpTask, TB, Recorder> t(task, opt, TB({.dir = dir}));
    t.fit(train, {.epochs = 1, .max_steps = 10});
    for (const auto& row : t.get<Recorder>().scalars["train/loss"])
      if (row[0].get<int64_t>() <= 6) expected_loss.push_back(row);
  }
  {  // A torn record at the end, as a process killed while writing leaves.
    std::filesystem::path f;
    for (const auto& e : std::filesystem::directory_iterator(dir)) f = e.path();
    std::ofstream(f, std::ios::binary | std::ios::app) << std::string("\x40\x00\x00\x00\x00\x00", 6);
  }
  {  // The resumed run continues from step 6 with other weights: steps 7..12 must come from it only.
    pd::TensorLoader train(x, y, {.batch_size = 16, .seed = 2});
    testing::MlpTask task(2);
    torch::optim::SGD opt(task.module().parameters(), 0.1);
    pt::Trainer<testing::MlpTask, TB, Recorder> t(task, opt, TB({.dir = dir, .out = nullptr}));
    t.state().global_step = 6;
    t.fit(train, {.epochs = 1, .max_steps = 12});
    for (const auto& row : t.get<Recorder>().scalars["train/loss"]) expected_loss.push_back(row);
  }
  REQUIRE(expected_loss.size() == 12);
  CHECK(event_files(dir) == 1);  // appended, not a second file
  CHECK(check(dir, {{"scalars", {{"train/loss", expected_loss}}}}) == 0);
}

TEST_CASE("TensorBoard rejects bad settings with a message naming them") {
  CHECK_THROWS_WITH_AS(TB({.dir = "x", .every = 0}), doctest::Contains("every 0"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(TB({.dir = "x", .hparams = {{"layers", {1, 2}}}}), doctest::Contains("hparam 'layers'"),
                       std::invalid_argument);
}
