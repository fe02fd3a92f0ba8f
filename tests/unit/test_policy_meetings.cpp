// Issue 11 (policies where they meet): tied parameters under Ema, GradClip and the optimizer check; max_steps
// leaving the epoch unfinished; MetricsLog continuing a resumed run's logs; fit_auto_batch recovering from an
// out-of-memory error inside optimizer.step() with loss scaling. Each against a plain LibTorch loop or
// torch::nn::utils::clip_grad_norm_.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <policytrain/callbacks/advice.hpp>
#include <policytrain/callbacks/ema.hpp>
#include <policytrain/callbacks/grad_clip.hpp>
#include <policytrain/callbacks/metrics_log.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/optim/fused_adamw.hpp>
#include <policytrain/precision/autocast.hpp>

#include "unit/fixtures.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
using testing::MlpTask;
using testing::TiedNet;

namespace {


struct TiedTask {
  TiedNet net;
  std::vector<torch::Tensor> eval_weights;
  explicit TiedTask(uint64_t seed = 3) : net(seed) {}
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::mse_loss(net->forward(b.x), b.x * 2.0); }
  pt::Prediction validation_step(const pt::Batch& b) {
    eval_weights.push_back(net->enc->weight.detach().clone());
    auto out = net->forward(b.x);
    return {torch::mse_loss(out, b.x * 2.0), out};
  }
};

struct FakeCtx {
  torch::nn::Module* m;
  torch::nn::Module& module() { return *m; }
};

}  // namespace

TEST_CASE("unique_parameters lists a tied tensor once, Module::parameters() twice") {
  TiedNet net;
  CHECK(net->parameters().size() == 3);
  auto u = pt::unique_named_parameters(*net);
  REQUIRE(u.size() == 2);
  CHECK(u[0].first == "bias");  // own parameters first, then the submodules'
  CHECK(u[1].first == "enc.weight");
}

TEST_CASE("Ema with tied weights: evaluation sees the average, and the live weights come back exactly") {
  TiedTask task;
  torch::optim::SGD opt(pt::unique_parameters(task.module()), 0.5);
  auto x = torch::randn({32, 4});
  pt::data::TensorLoader loader(x, torch::zeros({32}, torch::kLong), {.batch_size = 8, .shuffle = false});
  pt::Trainer<TiedTask, pt::callbacks::Ema> trainer(task, opt, pt::callbacks::Ema({.decay = 0.9, .tau = 0}));
  trainer.fit(loader, {.epochs = 2});
  const auto live = task.net->enc->weight.detach().clone();
  auto& ema = trainer.get<pt::callbacks::Ema>();
  CHECK(ema.average().size() == 2);  // bias and the tied weight, once (index 1: enc.weight)
  const auto avg = ema.average()[1].clone();
  CHECK(!torch::equal(avg, live));  // the test means something: the average differs from the weights
  trainer.evaluate(loader);
  REQUIRE(!task.eval_weights.empty());
  CHECK(torch::equal(task.eval_weights.back(), avg));
  CHECK(torch::equal(task.net->enc->weight, live));
  CHECK(task.net->dec->weight.is_same(task.net->enc->weight));
  CHECK(torch::equal(ema.average()[1], avg));  // the average is unchanged by the swap
}

TEST_CASE("GradClip with tied weights: the norm counts the shared gradient once, as clip_grad_norm_") {
  for (const double p : {2.0, 1.0, std::numeric_limits<double>::infinity()}) {
    CAPTURE(p);
    TiedNet net, ref;
    testing::copy_weights(*ref, *net);
    auto x = torch::randn({16, 4});
    torch::mse_loss(net->forward(x), x * 3).backward();
    torch::mse_loss(ref->forward(x), x * 3).backward();
    // Oracle: LibTorch's own clip over the deduplicated list (Python's parameters() deduplicates).
    const double max_norm = 0.05;
    const double expected = torch::nn::utils::clip_grad_norm_(pt::unique_parameters(*ref), max_norm, p);
    pt::callbacks::GradClip clip({.mode = pt::callbacks::GradClip::Mode::norm, .max_norm = max_norm, .p = p});
    FakeCtx ctx{&*net};
    clip.before_step(ctx);
    CHECK(clip.last_norm() == doctest::Approx(expected).epsilon(1e-6));
    CHECK(torch::allclose(net->enc->weight.grad(), ref->enc->weight.grad(), 1e-6, 1e-9));
    CHECK(torch::allclose(net->bias.grad(), ref->bias.grad(), 1e-6, 1e-9));
    // Clipped once: the total norm after clipping is max_norm (the issue saw 0.025 for 1).
    std::vector<torch::Tensor> g;
    for (auto& q : pt::unique_parameters(*net)) g.push_back(q.grad().flatten());
    const auto all = torch::cat(g);
    const double after = std::isinf(p) ? all.abs().max().item<double>() : all.norm(p).item<double>();
    CHECK(after == doctest::Approx(max_norm).epsilon(1e-4));
  }
}

TEST_CASE("GradClip: a threshold turns clipping on, and a threshold the mode would ignore is refused") {
  using GC = pt::callbacks::GradClip;
  // Issue 30: GradClip({.max_norm = 0.01}) let a gradient of norm 1.9 through (its mode defaulted to none).
  TiedNet net, ref;
  testing::copy_weights(*ref, *net);
  auto x = torch::randn({16, 4});
  torch::mse_loss(net->forward(x), x * 3).backward();
  torch::mse_loss(ref->forward(x), x * 3).backward();
  const double max_norm = 0.01;
  const double before = torch::nn::utils::clip_grad_norm_(pt::unique_parameters(*ref), max_norm);
  REQUIRE(before > 10 * max_norm);  // the gradient is large enough for clipping to act
  GC clip({.max_norm = max_norm});
  CHECK(clip.mode() == GC::Mode::norm);
  FakeCtx ctx{&*net};
  clip.before_step(ctx);
  CHECK(clip.last_norm() == doctest::Approx(before).epsilon(1e-6));
  CHECK(torch::allclose(net->enc->weight.grad(), ref->enc->weight.grad(), 1e-6, 1e-9));
  CHECK(torch::allclose(net->bias.grad(), ref->bias.grad(), 1e-6, 1e-9));

  // By value, from clip_value alone: every element within [-v, v], as clip_grad_value_.
  TiedNet vnet, vref;
  testing::copy_weights(*vref, *vnet);
  torch::mse_loss(vnet->forward(x), x * 3).backward();
  torch::mse_loss(vref->forward(x), x * 3).backward();
  torch::nn::utils::clip_grad_value_(pt::unique_parameters(*vref), 0.001);
  GC by_value({.clip_value = 0.001});
  CHECK(by_value.mode() == GC::Mode::value);
  FakeCtx vctx{&*vnet};
  by_value.before_step(vctx);
  CHECK(torch::equal(vnet->enc->weight.grad(), vref->enc->weight.grad()));

  CHECK(GC().mode() == GC::Mode::none);
  CHECK(GC({.mode = GC::Mode::norm}).options().max_norm == 1.0);
  CHECK_THROWS_WITH_AS(GC({.mode = GC::Mode::none, .max_norm = 1.0}), doctest::Contains("max_norm 1 given with mode none"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(GC({.max_norm = 1.0, .clip_value = 0.5}), doctest::Contains("both max_norm 1 and clip_value 0.5"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(GC({.mode = GC::Mode::norm, .clip_value = 0.5}),
                       doctest::Contains("clip_value 0.5 given with mode norm"), std::invalid_argument);
  CHECK_THROWS_AS(GC({.max_norm = 0.0}), std::invalid_argument);
}

TEST_CASE("an optimizer holding a tied parameter twice is refused with the fix") {
  TiedTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);  // parameters(): the tied tensor twice
  auto x = torch::randn({8, 4});
  pt::data::TensorLoader loader(x, torch::zeros({8}, torch::kLong), {.batch_size = 8});
  pt::Trainer<TiedTask> trainer(task, opt);
  try {
    trainer.fit(loader);
    FAIL("expected std::invalid_argument");
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    CHECK(msg.find("'enc.weight'") != std::string::npos);
    CHECK(msg.find("policytrain::unique_parameters") != std::string::npos);
  }
}

namespace {
/// Records the index of the first sample of every training batch (x[:, 0] holds the sample's index).
struct IndexTask : MlpTask {
  std::vector<int64_t> seen;
  IndexTask() : MlpTask(1, 2, 4, 2) {}
  torch::Tensor training_step(const pt::Batch& b) {
    seen.push_back(static_cast<int64_t>(b.x[0][0].item<float>()));
    return MlpTask::training_step(b);
  }
};
std::pair<torch::Tensor, torch::Tensor> indexed_data(int64_t n) {
  auto x = torch::zeros({n, 2});
  x.select(1, 0).copy_(torch::arange(n, torch::kFloat));
  return {x, torch::arange(n, torch::kLong) % 2};
}
}  // namespace

TEST_CASE("max_steps mid-epoch leaves the epoch unfinished: the next fit trains the batches that follow") {
  auto [x, y] = indexed_data(40);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8, .shuffle = true, .seed = 5});
  // Oracle: a plain loop over the same loader, epoch by epoch: the batches a run of 2 epochs sees, in order.
  std::vector<int64_t> expected;
  for (int64_t e = 0; e < 2; ++e) {
    loader.set_epoch(e);
    for (auto&& b : loader) expected.push_back(static_cast<int64_t>(b.x[0][0].item<float>()));
  }
  REQUIRE(expected.size() == 10);

  SUBCASE("the same Trainer fits again") {
    IndexTask task;
    torch::optim::SGD opt(task.module().parameters(), 0.1);
    pt::Trainer<IndexTask> trainer(task, opt);
    trainer.fit(loader, {.epochs = 2, .max_steps = 3});
    CHECK(trainer.state().epoch == 0);
    CHECK(trainer.state().batch_in_epoch == 3);
    trainer.fit(loader, {.epochs = 2});
    CHECK(task.seen == expected);
    CHECK(trainer.state().global_step == 10);
  }
  SUBCASE("its state_dict resumes a fresh Trainer at the next batch") {
    IndexTask task, task2;
    torch::optim::SGD opt(task.module().parameters(), 0.1), opt2(task2.module().parameters(), 0.1);
    pt::Trainer<IndexTask> trainer(task, opt);
    trainer.fit(loader, {.epochs = 2, .max_steps = 7});  // epoch 1, batch 2
    pt::Trainer<IndexTask> resumed(task2, opt2);
    resumed.load_state_dict(trainer.state_dict());
    resumed.fit(loader, {.epochs = 2});
    task.seen.insert(task.seen.end(), task2.seen.begin(), task2.seen.end());
    CHECK(task.seen == expected);
  }
  SUBCASE("with accumulation (2 micro-batches a step), max_steps stops after whole windows") {
    IndexTask task;
    torch::optim::SGD opt(task.module().parameters(), 0.1);
    pt::Trainer<IndexTask, pt::accumulate::Steps> trainer(task, opt, pt::accumulate::Steps(2));
    trainer.fit(loader, {.epochs = 2, .max_steps = 2});
    CHECK(trainer.state().batch_in_epoch == 4);
    CHECK(trainer.state().epoch == 0);
    trainer.fit(loader, {.epochs = 2});
    CHECK(task.seen == expected);
    CHECK(trainer.state().global_step == 6);  // 3 per epoch: two windows and the trailing one
  }
}

namespace {
std::vector<std::string> read_lines(const std::filesystem::path& f) {
  std::ifstream in(f);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}
std::vector<int64_t> csv_column(const std::filesystem::path& f, size_t col) {
  std::vector<int64_t> out;
  auto lines = read_lines(f);
  for (size_t i = 1; i < lines.size(); ++i) {
    std::stringstream ss(lines[i]);
    std::string cell;
    for (size_t c = 0; c <= col; ++c) std::getline(ss, cell, ',');
    out.push_back(std::stoll(cell));
  }
  return out;
}
std::vector<int64_t> jsonl_key(const std::filesystem::path& f, const char* key) {
  std::vector<int64_t> out;
  for (auto& l : read_lines(f)) out.push_back(nlohmann::json::parse(l).at(key).get<int64_t>());
  return out;
}
/// Keeps the state_dict taken after step `at`, and (when `weights` is set) a copy of the model's weights then
/// (the Trainer's state_dict holds neither model nor optimizer: SGD without momentum has no state).
struct Snapshot {
  int64_t at;
  pt::StateDict* out;
  MlpTask* weights = nullptr;
  template <class C>
  void on_step_end(C& c) {
    if (c.state().global_step != at) return;
    *out = c.state_dict();
    if (weights) testing::copy_weights(weights->module(), c.module());
  }
};
}  // namespace

TEST_CASE("MetricsLog continues a resumed run's logs: every step and epoch row once") {
  const auto dir = testing::temp_dir("metrics-resume");
  auto [x, y] = testing::toy_data(40);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8, .shuffle = true, .seed = 2});
  using Log = pt::callbacks::MetricsLog;
  pt::StateDict at7;
  MlpTask weights_at7(99);
  {
    MlpTask task;
    torch::optim::SGD opt(task.module().parameters(), 0.1);
    pt::Trainer<MlpTask, Log, Snapshot> trainer(task, opt, Log({.dir = dir, .print_summary = false}),
                                                Snapshot{7, &at7, &weights_at7});
    trainer.fit(loader, {.epochs = 3});  // 15 steps; "killed" after it, resumed from step 7 (epoch 1, batch 2)
  }
  REQUIRE(!at7.empty());
  // The uninterrupted run's rows are the oracle for the values too: epoch, step, batch, loss and lr of every
  // row must come back the same after the resume (the timing columns differ).
  auto first_fields = [](const std::vector<std::string>& lines) {
    std::vector<std::string> out;
    for (const auto& l : lines) {
      std::stringstream ss(l);
      std::string cell, row;
      for (int c = 0; c < 5 && std::getline(ss, cell, ','); ++c) row += cell + ",";
      out.push_back(row);
    }
    return out;
  };
  const auto uninterrupted = first_fields(read_lines(dir / "steps.csv"));
  REQUIRE(uninterrupted.size() == 16);  // header + 15 steps
  {  // a torn last line, as a killed process leaves
    std::ofstream f(dir / "steps.csv", std::ios::app);
    f << "2,16,1,0.5";
  }
  MlpTask task;
  testing::copy_weights(task.module(), weights_at7.module());  // an exact resume: the weights of step 7 too
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  pt::Trainer<MlpTask, Log> resumed(task, opt, Log({.dir = dir, .print_summary = false}));
  resumed.load_state_dict(at7);
  resumed.fit(loader, {.epochs = 3});
  // Oracle: the steps and epochs of an uninterrupted run, counted.
  std::vector<int64_t> steps, epochs{0, 1, 2};
  for (int64_t s = 1; s <= 15; ++s) steps.push_back(s);
  CHECK(csv_column(dir / "steps.csv", 1) == steps);
  CHECK(jsonl_key(dir / "steps.jsonl", "step") == steps);
  CHECK(csv_column(dir / "epochs.csv", 0) == epochs);
  CHECK(jsonl_key(dir / "epochs.jsonl", "epoch") == epochs);
  CHECK(read_lines(dir / "steps.csv").front().rfind("epoch,step,", 0) == 0);
  CHECK(first_fields(read_lines(dir / "steps.csv")) == uninterrupted);

  SUBCASE("a fit from step 0 starts the logs afresh") {
    MlpTask t3;
    torch::optim::SGD o3(t3.module().parameters(), 0.1);
    pt::Trainer<MlpTask, Log> fresh(t3, o3, Log({.dir = dir, .print_summary = false}));
    fresh.fit(loader, {.epochs = 1});
    CHECK(csv_column(dir / "steps.csv", 1) == std::vector<int64_t>{1, 2, 3, 4, 5});
    CHECK(jsonl_key(dir / "epochs.jsonl", "epoch") == std::vector<int64_t>{0});
  }
}

namespace {
/// SGD whose step throws an out-of-memory error the first `throws` times.
struct OomStepSGD : torch::optim::SGD {
  int throws = 1;
  using torch::optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override {
    if (throws > 0) {
      --throws;
      throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, "fake out of memory in step");
    }
    return torch::optim::SGD::step(closure);
  }
};
}  // namespace

TEST_CASE("fit_auto_batch recovers from out-of-memory inside optimizer.step() with loss scaling") {
  auto [x, y] = testing::toy_data(96);
  auto make_loader = [&](int64_t b) { return pt::data::TensorLoader(x, y, {.batch_size = b, .shuffle = true, .seed = 8}); };
  pt::data::TensorLoader val(x, y, {.batch_size = 96, .shuffle = false});
  using AC = pt::precision::Autocast;
  const AC::Options ao{.dtype = torch::kFloat, .loss_scaling = pt::precision::LossScaling::on,
                       .scaler = {.init_scale = 1024.0, .growth_interval = 2}};
  MlpTask task(2), ref(2);
  OomStepSGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD opt_ref(ref.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  pt::accumulate::AutoBatch ab({.global_batch = 32, .max_halvings = 2, .log = nullptr}, 1);
  pt::accumulate::BatchPlan plan{32, 1};
  pt::Trainer<MlpTask, AC, pt::accumulate::Steps> trainer(task, opt, AC(ao));
  pt::accumulate::fit_auto_batch(trainer, ab, plan, make_loader, val, pt::FitOptions{.epochs = 2});
  CHECK(plan == pt::accumulate::BatchPlan{16, 2});
  CHECK(opt.throws == 0);

  // Oracle: the same run planned at 16 x 2 from the start; the interrupted step left no trace (weights, scale).
  auto loader16 = make_loader(16);
  pt::Trainer<MlpTask, AC, pt::accumulate::Steps> direct(ref, opt_ref, AC(ao), pt::accumulate::Steps(2));
  direct.fit(loader16, val, {.epochs = 2});
  CHECK(testing::max_rel_diff(task.module(), ref.module()) < 1e-6);
  CHECK(trainer.policy<pt::Category::precision>().loss_scale() ==
        direct.policy<pt::Category::precision>().loss_scale());
  CHECK(trainer.policy<pt::Category::precision>().scaler().growth_tracker() ==
        direct.policy<pt::Category::precision>().scaler().growth_tracker());
}

TEST_CASE("LossScaler unscales a parameter listed twice once") {
  TiedNet net;
  // The optimizer as Module::parameters() builds it: the tied tensor twice.
  torch::optim::SGD opt(net->parameters(), 0.1);
  pt::precision::LossScaler scaler({.init_scale = 1024.0});
  auto x = torch::randn({8, 4});
  scaler.scale(torch::mse_loss(net->forward(x), x)).backward();
  const auto scaled = net->enc->weight.grad().clone();
  scaler.unscale(opt);
  // Oracle: the scaled gradient divided by the scale once (a power of two: exact).
  CHECK(torch::equal(net->enc->weight.grad(), scaled / 1024.0));
}

// Issue 30: the library's advice named the example's flags (--workers, --precision bf16) inside a user's program, and
// suggested mixed precision while bf16 was on.
TEST_CASE("advice names library options, never command-line flags, and never suggests what is on") {
  namespace adv = pt::callbacks::advice;
  using pt::callbacks::RunFeatures;
  const std::vector<std::string> all = {
      adv::data_wait(), adv::compute({}, true), adv::compute({}, false), adv::optimizer({}),
      adv::compute({.mixed_precision = true, .channels_last = true}, true), adv::optimizer({.fused_optimizer = true})};
  for (const auto& a : all) {
    CAPTURE(a);
    CHECK(a.find("--") == std::string::npos);
  }
  CHECK(adv::data_wait().find("data::PrefetchOptions::workers") != std::string::npos);
  CHECK(adv::compute({}, true).find("precision::Autocast") != std::string::npos);
  CHECK(adv::compute({}, true).find("callbacks::PerfKnobs::Options::channels_last") != std::string::npos);
  CHECK(adv::compute({}, false).find("channels") == std::string::npos);  // no convolutions: not applicable
  CHECK(adv::compute({.mixed_precision = true}, true).find("precision") == std::string::npos);
  CHECK(adv::compute({.channels_last = true}, true).find("channels") == std::string::npos);
  CHECK(adv::compute({.mixed_precision = true, .channels_last = true}, true) == "try a larger batch");
  CHECK(adv::optimizer({}).find("optim::FusedAdamW") != std::string::npos);
  CHECK(adv::optimizer({.fused_optimizer = true}).find("use a fused optimizer") == std::string::npos);

  // What a run uses is read from the Trainer: bf16 autocast and a fused optimizer, then neither.
  auto [x, y] = testing::toy_data(16);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  using Log = pt::callbacks::MetricsLog;
  {
    MlpTask task;
    pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
    using AC = pt::precision::Autocast;
    pt::Trainer<MlpTask, AC, Log> trainer(task, opt, AC({.dtype = torch::kBFloat16}), Log({.print_summary = false}));
    trainer.fit(loader, {.epochs = 1});
    const RunFeatures f = pt::callbacks::run_features(trainer.context());
    CHECK(f.mixed_precision);
    CHECK(f.fused_optimizer);
    CHECK_FALSE(f.convolutions);
    const std::string summary = trainer.get<Log>().summary_text();
    CAPTURE(summary);
    CHECK(summary.find("mixed precision") == std::string::npos);
    CHECK(summary.find("--") == std::string::npos);
  }
  {
    MlpTask task;
    torch::optim::SGD opt(task.module().parameters(), 0.1);
    pt::Trainer<MlpTask, Log> trainer(task, opt, Log({.print_summary = false}));
    trainer.fit(loader, {.epochs = 1});
    const RunFeatures f = pt::callbacks::run_features(trainer.context());
    CHECK_FALSE(f.mixed_precision);
    CHECK_FALSE(f.fused_optimizer);
    CHECK(trainer.get<Log>().summary_text().find("--") == std::string::npos);
  }
}
