// The Trainer core: equivalence with a hand-written loop, hook order, stopping, non-finite losses.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <ATen/record_function.h>

#include "unit/helpers.hpp"

namespace pt = policytrain;
using testing::MlpTask;

namespace {

/// Records every hook the Trainer calls, in order.
struct Recorder {
  std::vector<std::string>* log;
  template <class C> void on_fit_begin(C&) { log->push_back("fit_begin"); }
  template <class C> void on_fit_end(C&) { log->push_back("fit_end"); }
  template <class C> void on_epoch_begin(C&) { log->push_back("epoch_begin"); }
  template <class C> bool on_epoch_end(C&) { log->push_back("epoch_end"); return false; }
  template <class C, class F> auto around_forward(C&, F&& f) { log->push_back("forward"); return f(); }
  template <class C> torch::Tensor transform_loss(C&, torch::Tensor l) { log->push_back("loss"); return l; }
  template <class C, class F> void around_backward(C& c, F&& f) {
    log->push_back(c.is_last_micro_step() ? "backward(last)" : "backward");
    f();
  }
  template <class C> void before_step(C&) { log->push_back("before_step"); }
  template <class C> void after_step(C&, bool s) { log->push_back(s ? "after_step" : "after_step(skipped)"); }
  template <class C, class F> pt::Metrics around_evaluate(C&, F&& f) { log->push_back("evaluate"); return f(); }
  template <class C> void on_validation_end(C&, const pt::Metrics&) { log->push_back("validation_end"); }
};

/// Stops when the epoch reaches `at`.
struct StopAt {
  int64_t at = 1;
  template <class C> bool on_epoch_end(C& c) { return c.state().epoch + 1 >= at; }
};

/// A precision-category policy that replaces the step and counts it.
struct CountingStep {
  static constexpr pt::Category category = pt::Category::precision;
  int steps = 0;
  template <class C> bool step(C& c) { ++steps; c.optimizer().step(); return true; }
};

/// Accumulates 2 micro-batches per step (a minimal accumulation policy, to observe should_step).
struct EveryTwo {
  static constexpr pt::Category category = pt::Category::accumulation;
  template <class C> bool should_step(C& c) { return c.state().micro_step % 2 == 0; }
};

/// A stateful callback: counts optimizer steps, saves and restores the count.
struct Tally {
  static constexpr std::string_view name = "Tally";
  int64_t n = 0;
  template <class C> void after_step(C&, bool) { ++n; }
  pt::StateDict state_dict() const { return {{"n", pt::scalar_tensor(n)}}; }
  void load_state_dict(const pt::StateDict& d) { n = pt::state_int(d, "n"); }
};

}  // namespace

TEST_CASE("Trainer with all defaults computes exactly what a hand-written LibTorch loop computes") {
  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16, .shuffle = true, .seed = 3});

  MlpTask a(1), b(2);
  testing::copy_weights(b.module(), a.module());
  REQUIRE(testing::same_params(a.module(), b.module()));

  torch::optim::SGD opt_a(a.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  pt::Trainer<MlpTask> trainer(a, opt_a);
  auto result = trainer.fit(loader, {.epochs = 3});

  torch::optim::SGD opt_b(b.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  int64_t steps = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.set_epoch(epoch);
    for (auto batch : loader) {
      auto loss = torch::nn::functional::cross_entropy(b.net->forward(batch.x), batch.y);
      loss.backward();
      opt_b.step();
      opt_b.zero_grad();
      ++steps;
    }
  }
  CHECK(result.global_steps == steps);
  CHECK(result.epochs_run == 3);
  CHECK(result.samples_seen == 3 * 96);
  CHECK_FALSE(result.stopped_early);
  CHECK(testing::same_params(a.module(), b.module()));
  CHECK(pt::io::params_sha256(a.module()) == pt::io::params_sha256(b.module()));
}

TEST_CASE("hooks fire in the documented order") {
  auto [x, y] = testing::toy_data(48);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16, .shuffle = false});
  MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  std::vector<std::string> log;

  SUBCASE("one step per batch") {
    pt::Trainer<MlpTask, Recorder> trainer(task, opt, Recorder{&log});
    trainer.fit(loader, loader, {.epochs = 1});
    std::vector<std::string> expected{"fit_begin", "epoch_begin"};
    for (int i = 0; i < 3; ++i)
      for (auto s : {"forward", "loss", "backward(last)", "before_step", "after_step"}) expected.push_back(s);
    expected.push_back("evaluate");
    for (int i = 0; i < 3; ++i) expected.push_back("forward");  // evaluation batches run under around_forward too
    for (auto s : {"validation_end", "epoch_end", "fit_end"}) expected.push_back(s);
    CHECK(log == expected);
  }
  SUBCASE("accumulation: backward knows whether it is the last micro-step; an open window closes at epoch end") {
    pt::Trainer<MlpTask, EveryTwo, Recorder> trainer(task, opt, Recorder{&log});
    auto r = trainer.fit(loader, {.epochs = 1});
    CHECK(r.global_steps == 2);  // 3 micro-batches: a window of 2, then the open window of 1 at epoch end
    std::vector<std::string> expected{"fit_begin", "epoch_begin",
                                      "forward", "loss", "backward",
                                      "forward", "loss", "backward(last)", "before_step", "after_step",
                                      "forward", "loss", "backward(last)", "before_step", "after_step",
                                      "epoch_end", "fit_end"};
    CHECK(log == expected);
  }
}

TEST_CASE("policies are unordered: categories are found whatever the order of the template arguments") {
  using A = pt::Trainer<MlpTask, CountingStep, EveryTwo, Recorder, StopAt>;
  using B = pt::Trainer<MlpTask, StopAt, Recorder, EveryTwo, CountingStep>;
  static_assert(std::is_same_v<A::precision_type, CountingStep> && std::is_same_v<B::precision_type, CountingStep>);
  static_assert(std::is_same_v<A::accumulation_type, EveryTwo> && std::is_same_v<B::accumulation_type, EveryTwo>);
  static_assert(std::is_same_v<A::schedule_type, pt::schedule::Constant>);
  static_assert(std::is_same_v<A::parallel_type, pt::parallel::Single>);
  static_assert(std::is_same_v<A::callbacks_type, std::tuple<Recorder, StopAt>>);
  static_assert(std::is_same_v<B::callbacks_type, std::tuple<StopAt, Recorder>>);
  // Defaults cost no storage beyond what they hold.
  static_assert(std::is_empty_v<pt::parallel::Single> && std::is_empty_v<pt::accumulate::None> &&
                std::is_empty_v<pt::schedule::Constant> && std::is_empty_v<pt::checkpoint::None>);

  MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  auto [x, y] = testing::toy_data(32);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  pt::Trainer trainer(task, opt, CountingStep{}, StopAt{.at = 100});  // deduced from the arguments
  static_assert(std::is_same_v<decltype(trainer), pt::Trainer<MlpTask, CountingStep, StopAt>>);
  trainer.fit(loader, {.epochs = 2});
  CHECK(trainer.get<CountingStep>().steps == 8);
  CHECK(trainer.context().get<StopAt>().at == 100);  // the argument was moved in with its settings

  // Policies passed as lvalues are copied in, with their settings; the originals stay as they were.
  StopAt stop{.at = 1};
  CountingStep counting;
  pt::Trainer<MlpTask, CountingStep, StopAt> copied(task, opt, stop, counting);
  auto r = copied.fit(loader, {.epochs = 5});
  CHECK(r.epochs_run == 1);
  CHECK(copied.get<CountingStep>().steps == 4);
  CHECK(counting.steps == 0);
}

TEST_CASE("a hook returning true stops training after that epoch") {
  MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  auto [x, y] = testing::toy_data(32);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  pt::Trainer<MlpTask, StopAt> trainer(task, opt, StopAt{.at = 2});
  auto r = trainer.fit(loader, {.epochs = 10});
  CHECK(r.epochs_run == 2);
  CHECK(r.global_steps == 8);
  CHECK(r.stopped_early);
  CHECK(trainer.state().epoch == 2);
}

TEST_CASE("limits: max_steps and limit_train_batches") {
  MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  auto [x, y] = testing::toy_data(64);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  pt::Trainer<MlpTask> trainer(task, opt);
  SUBCASE("limit_train_batches") {
    auto r = trainer.fit(loader, {.epochs = 3, .limit_train_batches = 3});
    CHECK(r.global_steps == 9);
    CHECK(r.samples_seen == 72);
  }
  SUBCASE("max_steps ends mid-epoch") {
    auto r = trainer.fit(loader, {.epochs = 5, .max_steps = 11});
    CHECK(r.global_steps == 11);
    CHECK(r.epochs_run == 2);
  }
}

TEST_CASE("a non-finite loss is an error naming epoch and step, or a skipped step that leaves the weights intact") {
  struct NanAt {  // a task whose loss becomes NaN at one micro-batch
    MlpTask inner;
    int calls = 0, nan_at = 2;
    torch::nn::Module& module() { return inner.module(); }
    torch::Tensor training_step(const pt::Batch& b) {
      auto l = inner.training_step(b);
      return calls++ == nan_at ? l * std::numeric_limits<float>::quiet_NaN() : l;
    }
  };
  auto [x, y] = testing::toy_data(64);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8, .shuffle = false});
  NanAt task;
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));

  SUBCASE("error (the default)") {
    pt::Trainer<NanAt> trainer(task, opt);
    try {
      trainer.fit(loader, {.epochs = 1});
      FAIL("no exception");
    } catch (const pt::NonFiniteLoss& e) {
      const std::string msg = e.what();
      CHECK(msg.find("epoch 0") != std::string::npos);
      CHECK(msg.find("step 2") != std::string::npos);
    }
  }
  SUBCASE("skip: the step is skipped and counted, the weights do not move") {
    pt::Trainer<NanAt, pt::precision::Fp32> trainer(task, opt, pt::precision::Fp32{pt::NonFinite::skip});
    MlpTask snapshot;
    // Train up to the NaN micro-batch, then compare the weights before and after it.
    trainer.fit(loader, {.epochs = 1, .max_steps = 2});
    testing::copy_weights(snapshot.module(), task.module());
    trainer.fit(loader, {.epochs = 2, .limit_train_batches = 1});  // the third call of training_step: NaN
    CHECK(trainer.state().skipped_steps == 1);
    CHECK(testing::same_params(snapshot.module(), task.module()));
    for (const auto& p : task.module().parameters()) CHECK(torch::isfinite(p).all().item<bool>());
  }
}

TEST_CASE("evaluate: mean loss over samples and accuracy, against a direct computation") {
  MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  auto [x, y] = testing::toy_data(50);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16, .shuffle = false});  // 16,16,16,2: unequal batches
  pt::Trainer<MlpTask> trainer(task, opt);
  auto m = trainer.evaluate(loader);
  torch::NoGradGuard g;
  auto out = task.net->forward(x);
  const double loss = torch::nn::functional::cross_entropy(out, y).item<double>();
  const double acc = (out.argmax(1) == y).to(torch::kDouble).mean().item<double>();
  CHECK(m.samples == 50);
  CHECK(m.loss == doctest::Approx(loss).epsilon(1e-6));
  CHECK(m.accuracy == doctest::Approx(acc));
  CHECK(task.module().is_training());  // evaluate restores the mode
}

TEST_CASE("Trainer::state_dict holds the counters and every stateful policy's state, and loads back") {
  MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  auto [x, y] = testing::toy_data(40);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  pt::Trainer<MlpTask, Tally> trainer(task, opt);
  trainer.fit(loader, {.epochs = 2});
  auto d = trainer.state_dict();
  CHECK(pt::state_int(d, "trainer/global_step") == 10);
  CHECK(pt::state_int(d, "trainer/epoch") == 2);
  CHECK(pt::state_int(d, "trainer/samples_seen") == 80);
  CHECK(pt::state_int(d, "Tally/n") == 10);

  pt::Trainer<MlpTask, Tally> fresh(task, opt);
  fresh.load_state_dict(d);
  CHECK(fresh.state().global_step == 10);
  CHECK(fresh.state().epoch == 2);
  CHECK(fresh.get<Tally>().n == 10);
  d.erase("Tally/n");
  CHECK_THROWS_WITH_AS(fresh.load_state_dict(d), doctest::Contains("no entry 'n'"), std::invalid_argument);
}

namespace {
// Counts host reads of tensor values: every Tensor::item() (and every scalar read LibTorch makes) dispatches
// aten::_local_scalar_dense, which is where a CUDA device sync happens. RecordFunction sees every dispatch.
// Reads made inside a fused optimizer kernel (aten::_fused_adamw_ and co.) are not counted: on the CPU that kernel
// reads each parameter's step counter from host memory (Python's fused=True does the same: aten::item under
// aten::_fused_adamw_), which is no device sync; on CUDA it reads them on the device.
std::atomic<int64_t> g_host_reads{0};
thread_local int g_in_fused_kernel = 0;
bool is_fused_kernel(std::string_view name) { return name.rfind("aten::_fused_", 0) == 0; }
std::unique_ptr<at::ObserverContext> count_host_read(const at::RecordFunction& fn) {
  const std::string_view name = fn.name();
  if (is_fused_kernel(name)) ++g_in_fused_kernel;
  else if (name == "aten::_local_scalar_dense" && g_in_fused_kernel == 0) ++g_host_reads;
  return nullptr;
}
void leave_fused_kernel(const at::RecordFunction& fn, at::ObserverContext*) {
  if (is_fused_kernel(fn.name())) --g_in_fused_kernel;
}
struct HostReads {
  at::CallbackHandle handle;
  HostReads() {
    g_host_reads = 0;
    handle = at::addGlobalCallback(
        at::RecordFunctionCallback(count_host_read, leave_fused_kernel).scopes({at::RecordScope::FUNCTION}));
  }
  ~HostReads() { at::removeCallback(handle); }
  int64_t count() const { return g_host_reads.load(); }
};

struct NanAtCall {  // a task whose loss becomes NaN at one call of training_step
  MlpTask inner;
  int calls = 0, nan_at = -1;
  torch::nn::Module& module() { return inner.module(); }
  torch::Tensor training_step(const pt::Batch& b) {
    auto l = inner.training_step(b);
    return calls++ == nan_at ? l * std::numeric_limits<float>::quiet_NaN() : l;
  }
};
}  // namespace

TEST_CASE("the default step reads nothing back to the host: a fit's host reads do not grow with its steps") {
  {
    HostReads c;  // the counter sees a read
    (void)torch::ones({1}).item<float>();
    REQUIRE(c.count() == 1);
  }
  const auto reads = [](int64_t batches, int64_t check_every) {
    auto [x, y] = testing::toy_data(batches * 4);
    pt::data::TensorLoader loader(x, y, {.batch_size = 4, .shuffle = false});
    MlpTask task(1);
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    pt::precision::Fp32 fp32;
    fp32.check_every = check_every;
    pt::Trainer<MlpTask, pt::precision::Fp32> trainer(task, opt, fp32);
    HostReads c;
    trainer.fit(loader, {.epochs = 1});
    return c.count();
  };
  // The default composition (Fp32 with NonFinite::error, check_every 64): the epoch end reads once, whatever the
  // number of steps; before this change every micro-batch read its loss.
  const int64_t short_fit = reads(5, 64), long_fit = reads(40, 64);
  CHECK(long_fit == short_fit);
  CHECK(short_fit <= 3);  // one pending-check read at the epoch end (three scalars of one copy)
  // The eager check (check_every 1) reads every micro-batch: the counter sees the difference.
  CHECK(reads(40, 1) - reads(5, 1) >= 35);
  // Same for the plain Trainer<Task> (every default).
  const auto plain = [](int64_t batches) {
    auto [x, y] = testing::toy_data(batches * 4);
    pt::data::TensorLoader loader(x, y, {.batch_size = 4, .shuffle = false});
    MlpTask task(1);
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::Trainer<MlpTask> trainer(task, opt);
    HostReads c;
    trainer.fit(loader, {.epochs = 1});
    return c.count();
  };
  CHECK(plain(40) == plain(5));
}

TEST_CASE("AMP with loss scaling and a fused optimizer skips on the device: no host read per step, the same "
          "weights and skip count as the host-read step") {
  // bf16 autocast on the CPU with the loss scaled (the fp16 recipe's step: unscale, inf check, skip, update).
  const auto run = [](int64_t batches, bool device_skip, int nan_at, int64_t* skipped = nullptr,
                      torch::Tensor* weights = nullptr) {
    auto [x, y] = testing::toy_data(batches * 4);
    pt::data::TensorLoader loader(x, y, {.batch_size = 4, .shuffle = false});
    NanAtCall task;
    task.nan_at = nan_at;
    pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
    using AC = pt::precision::Autocast;
    AC amp({.dtype = torch::kBFloat16, .loss_scaling = pt::precision::LossScaling::on, .device_skip = device_skip});
    pt::Trainer<NanAtCall, AC> trainer(task, opt, amp);
    HostReads c;
    trainer.fit(loader, {.epochs = 1});
    const int64_t reads = c.count();
    if (skipped) *skipped = trainer.state().skipped_steps;
    if (weights) *weights = torch::cat({task.module().parameters()[0].flatten(), task.module().parameters()[1].flatten()});
    CHECK(trainer.get<AC>().scaler().skipped_steps() == trainer.state().skipped_steps);
    return reads;
  };
  // The host reads of a fit do not grow with its steps on the device path; the host path reads every step.
  CHECK(run(40, true, -1) == run(5, true, -1));
  CHECK(run(40, false, -1) - run(5, false, -1) >= 35);
  // A NaN loss at micro-batch 7: both paths skip the same step, leave the same weights (the fused kernel's
  // found_inf leaves params, moments and step count as they were), and count one skip by the end of the fit.
  int64_t skipped_host = -1, skipped_device = -1;
  torch::Tensor w_host, w_device;
  run(20, false, 7, &skipped_host, &w_host);
  run(20, true, 7, &skipped_device, &w_device);
  CHECK(skipped_host == 1);
  CHECK(skipped_device == skipped_host);
  CHECK(torch::equal(w_host, w_device));
  CHECK(torch::isfinite(w_device).all().item<bool>());
}

// --- step::CudaGraph's logic, run on the CPU through step::GraphEmulation (a capture records the step, a replay
// runs it again on the static inputs; the CUDA graph itself is tested in tests/cuda/test_cuda.cpp) ---
namespace {
struct GraphRun {
  torch::Tensor weights;
  int64_t skipped = -1, replays = -1, fallbacks = -1, captures = -1, eager = -1;
  double lr = 0;
  testing::StepStream stream;  // what a callback read at every step
};
bool same_double(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }
// The whole stream of reported values, step by step: the loss (read at once and from the tensor the callback kept,
// read after the fit), the lr, the stepped flag, the skip count, the loss scale and the gradient norm.
void check_same_stream(const testing::StepStream& eager, const testing::StepStream& graph) {
  REQUIRE(eager.rows->size() == graph.rows->size());
  const auto el = eager.kept_losses(), gl = graph.kept_losses(), en = eager.kept_norms(), gn = graph.kept_norms();
  int wrong = 0;
  for (size_t i = 0; i < el.size(); ++i) {
    const auto &e = (*eager.rows)[i], &g = (*graph.rows)[i];
    INFO("step " << e.step << ": loss " << e.loss_now << " (kept " << el[i] << ") against the graph's " << g.loss_now
                 << " (kept " << gl[i] << ")");
    const bool same = e.step == g.step && e.skipped == g.skipped && e.stepped == g.stepped && e.lr == g.lr &&
                      same_double(e.loss_now, g.loss_now) && same_double(el[i], gl[i]) &&
                      e.scale_now == g.scale_now && same_double(e.norm_now, g.norm_now) && same_double(en[i], gn[i]);
    CHECK(same);
    wrong += same ? 0 : 1;
  }
  INFO(wrong << " of " << el.size() << " steps reported differently");
  CHECK(wrong == 0);
}
// bf16 autocast with the loss scaled (fp16's step: unscale, inf check, device skip, update), FusedAdamW, a warmup +
// cosine schedule, clipping by norm; 42 samples in batches of 4: 10 full batches and a short one per epoch.
template <bool Graph>
GraphRun graph_run(int nan_at) {
  auto [x, y] = testing::toy_data(42);
  pt::data::TensorLoader loader(x, y, {.batch_size = 4, .shuffle = false});
  NanAtCall task;
  task.nan_at = nan_at;
  pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.02));
  using AC = pt::precision::Autocast;
  AC amp({.dtype = torch::kBFloat16, .loss_scaling = pt::precision::LossScaling::on});
  pt::schedule::Lr lr({.kind = pt::schedule::Kind::cosine, .warmup_steps = 5});
  pt::callbacks::GradClip clip({.mode = pt::callbacks::GradClip::Mode::norm, .max_norm = 0.5});
  GraphRun r;
  const auto finish = [&](auto& trainer) {
    trainer.fit(loader, {.epochs = 2});
    r.weights = torch::cat({task.module().parameters()[0].flatten(), task.module().parameters()[2].flatten()});
    r.skipped = trainer.state().skipped_steps;
    r.lr = trainer.context().lr();
  };
  if constexpr (Graph) {
    pt::Trainer<NanAtCall, AC, pt::schedule::Lr, pt::callbacks::GradClip, pt::step::GraphEmulation, testing::StepStream>
        trainer(task, opt, amp, lr, clip, pt::step::GraphEmulation({.warmup_steps = 3}), r.stream);
    finish(trainer);
    const auto& g = trainer.get<pt::step::GraphEmulation>();
    r.replays = g.replays();
    r.fallbacks = g.fallbacks();
    r.captures = g.captures();
    r.eager = g.eager_steps();
  } else {
    pt::Trainer<NanAtCall, AC, pt::schedule::Lr, pt::callbacks::GradClip, testing::StepStream> trainer(
        task, opt, amp, lr, clip, r.stream);
    finish(trainer);
  }
  return r;
}
}  // namespace

TEST_CASE("step::CudaGraph's step logic (emulated on the CPU): warm-up, one capture, replays and the short batch's "
          "eager fallback give the eager Trainer's weights and every step's reported loss, lr, scale and norm bit for "
          "bit, with AMP, a schedule and clipping") {
  const GraphRun eager = graph_run<false>(-1), graph = graph_run<true>(-1);
  CHECK(torch::equal(eager.weights, graph.weights));
  CHECK(graph.lr == doctest::Approx(eager.lr));
  CHECK(eager.stream.rows->size() == 22);
  check_same_stream(eager.stream, graph.stream);
  // 2 epochs of 11 steps: 3 warm-up steps, then 7 + 10 full batches replayed (the first after its capture), and
  // each epoch's short batch of 2 run eagerly.
  CHECK(graph.captures == 1);
  CHECK(graph.replays == 17);
  CHECK(graph.fallbacks == 2);
  CHECK(graph.eager == 5);
  SUBCASE("a NaN loss in a replayed step: skipped on the device, counted, the same weights") {
    const GraphRun e = graph_run<false>(6), g = graph_run<true>(6);
    CHECK(e.skipped == 1);
    CHECK(g.skipped == e.skipped);
    CHECK(torch::equal(e.weights, g.weights));
    check_same_stream(e.stream, g.stream);
  }
}

TEST_CASE("step::CudaGraph's step logic (emulated): the unscaled loss check of a replayed step stays on the device "
          "and its error names the step, and configurations that need the host are refused naming the fix") {
  auto [x, y] = testing::toy_data(40);
  pt::data::TensorLoader loader(x, y, {.batch_size = 4, .shuffle = false});
  SUBCASE("NonFinite::error: raised at the epoch end, naming the replayed step") {
    NanAtCall task;
    task.nan_at = 6;
    pt::optim::FusedSgd opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
    pt::Trainer<NanAtCall, pt::step::GraphEmulation> trainer(task, opt);
    CHECK_THROWS_WITH_AS(trainer.fit(loader, {.epochs = 2}),
                         doctest::Contains("the loss is nan at step 6 (a step replayed from a CUDA graph; detected at step 10"),
                         pt::NonFiniteLoss);
    CHECK(trainer.get<pt::step::GraphEmulation>().replays() == 7);
  }
  SUBCASE("refusals") {
    MlpTask task;
    torch::optim::AdamW plain(task.module().parameters(), torch::optim::AdamWOptions(0.01));
    pt::Trainer<MlpTask, pt::step::GraphEmulation> t1(task, plain);
    CHECK_THROWS_WITH_AS(t1.fit(loader), doctest::Contains("use optim::FusedAdamW, optim::FusedAdam or optim::FusedSgd"),
                         std::invalid_argument);
    pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
    pt::Trainer<MlpTask, pt::precision::Fp32, pt::step::GraphEmulation> t2(task, opt, pt::precision::Fp32(pt::NonFinite::skip));
    CHECK_THROWS_WITH_AS(t2.fit(loader), doctest::Contains("precision::Fp32 with NonFinite::skip reads the loss on the host"),
                         std::invalid_argument);
    using AC = pt::precision::Autocast;
    pt::Trainer<MlpTask, AC, pt::step::GraphEmulation> t3(
        task, opt, AC({.dtype = torch::kBFloat16, .loss_scaling = pt::precision::LossScaling::on, .device_skip = false}));
    CHECK_THROWS_WITH_AS(t3.fit(loader), doctest::Contains("device_skip = false reads found_inf on the host"),
                         std::invalid_argument);
    pt::Trainer<MlpTask, pt::step::CudaGraph> t4(task, opt);
    CHECK_THROWS_WITH_AS(t4.fit(loader), doctest::Contains("policytrain::step::CudaGraph: "), std::invalid_argument);
    CHECK_THROWS_AS(pt::step::CudaGraph({.warmup_steps = 0}), std::invalid_argument);
  }
}

TEST_CASE("the deferred non-finite check: the error names the bad step, comes at most check_every micro-batches "
          "later, and no checkpoint is written from the weights in between") {
  auto [x, y] = testing::toy_data(64);
  pt::data::TensorLoader loader(x, y, {.batch_size = 4, .shuffle = false});  // 16 micro-batches
  SUBCASE("raised at the read after the bad micro-batch, naming it") {
    NanAtCall task;
    task.nan_at = 2;
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::precision::Fp32 fp32;
    fp32.check_every = 4;
    pt::Trainer<NanAtCall, pt::precision::Fp32> trainer(task, opt, fp32);
    try {
      trainer.fit(loader, {.epochs = 1});
      FAIL("no exception");
    } catch (const pt::NonFiniteLoss& e) {
      const std::string msg = e.what();
      CHECK_MESSAGE(msg.find("the loss is nan at epoch 0, step 2 (micro-batch 3 of the epoch; detected at step 3") !=
                        std::string::npos, msg);
      // The remedies name library options; clipping is suggested since nothing clips (the next subcase clips).
      CHECK_MESSAGE(msg.find("clip gradients (callbacks::GradClip)") != std::string::npos, msg);
      CHECK_MESSAGE(msg.find("--") == std::string::npos, msg);
    }
    CHECK(task.calls == 4);  // the read came with the 4th micro-batch, not later
  }
  SUBCASE("with clipping on, the message does not suggest clipping") {
    NanAtCall task;
    task.nan_at = 2;
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::precision::Fp32 fp32;
    fp32.check_every = 4;
    using GC = pt::callbacks::GradClip;
    pt::Trainer<NanAtCall, pt::precision::Fp32, GC> trainer(task, opt, fp32, GC({.max_norm = 1.0}));
    try {
      trainer.fit(loader, {.epochs = 1});
      FAIL("no exception");
    } catch (const pt::NonFiniteLoss& e) {
      const std::string msg = e.what();
      CHECK_MESSAGE(msg.find("lower the learning rate, or choose NonFinite::skip") != std::string::npos, msg);
      CHECK_MESSAGE(msg.find("clip") == std::string::npos, msg);
    }
  }
  SUBCASE("at the epoch end when the buffer is not full") {
    NanAtCall task;
    task.nan_at = 14;
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::Trainer<NanAtCall> trainer(task, opt);  // check_every 64 > 16 micro-batches
    CHECK_THROWS_WITH_AS(trainer.fit(loader, {.epochs = 2}), doctest::Contains("step 14"), pt::NonFiniteLoss);
    CHECK(task.calls == 16);
    CHECK(trainer.state().epoch == 0);
  }
  SUBCASE("a checkpoint flushes the check first: none holds weights stepped from the bad loss") {
    const auto dir = testing::temp_dir("deferred-nonfinite");
    NanAtCall task;
    task.nan_at = 5;
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::Trainer<NanAtCall, pt::checkpoint::Disk> trainer(
        task, opt, pt::checkpoint::Disk({.directory = dir, .every_steps = 1, .export_final = false, .log = nullptr}));
    CHECK_THROWS_WITH_AS(trainer.fit(loader, {.epochs = 1}), doctest::Contains("step 5"), pt::NonFiniteLoss);
    CHECK(std::filesystem::exists(dir / "step-00000005.ckpt"));   // the weights before the bad step
    CHECK_FALSE(std::filesystem::exists(dir / "step-00000006.ckpt"));  // stepped with the NaN gradient
    MlpTask fresh(2);
    pt::checkpoint::load_weights(fresh.module(), dir / "step-00000005.ckpt");
    for (const auto& p : fresh.module().parameters()) CHECK(torch::isfinite(p).all().item<bool>());
    std::filesystem::remove_all(dir);
  }
}

namespace {

// [snippet:hook-list]
/// Keeps the lowest validation loss; lists its hooks, so that a misspelt one (on_validaton_end) stops the build.
struct BestLoss {
  using hooks = pt::Hooks<pt::hook::on_validation_end, pt::hook::on_fit_end>;
  double best = std::numeric_limits<double>::infinity();
  int64_t validations = 0, fits = 0;
  template <class Ctx> void on_validation_end(Ctx&, const pt::Metrics& m) {
    best = std::min(best, m.loss);
    ++validations;
  }
  template <class Ctx> void on_fit_end(Ctx&) { ++fits; }
};
// [/snippet:hook-list]

}  // namespace

TEST_CASE("a policy that lists its hooks (using hooks = Hooks<...>) has each of them called") {
  MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  auto [x, y] = testing::toy_data(32);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  pt::data::TensorLoader val(x, y, {.batch_size = 32, .shuffle = false});
  pt::Trainer<MlpTask, BestLoss> trainer(task, opt);
  trainer.fit(loader, val, {.epochs = 3});
  const auto& b = trainer.get<BestLoss>();
  CHECK(b.validations == 3);
  CHECK(b.fits == 1);
  CHECK(std::isfinite(b.best));
}
