// Gradient accumulation: equivalence with one large batch (even and uneven windows), nominal-batch arithmetic and
// weight-decay scaling, the last-micro-step signal, and the auto batch size search and out-of-memory recovery
// driven on the CPU by a fake memory limit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <c10/util/Exception.h>

#include <policytrain/accumulation/auto_batch.hpp>
#include <policytrain/accumulation/nominal_batch.hpp>
#include <policytrain/accumulation/steps.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;
using testing::MlpTask;

namespace {

enum class Opt { sgd, adamw };

std::unique_ptr<torch::optim::Optimizer> make_opt(Opt o, torch::nn::Module& m, double wd = 1e-2) {
  if (o == Opt::sgd)
    return std::make_unique<torch::optim::SGD>(m.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(wd));
  return std::make_unique<torch::optim::AdamW>(m.parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(wd));
}

/// The reference: a plain LibTorch loop, one optimizer step per batch of the loader, on the batch's mean loss.
void plain_loop(MlpTask& task, torch::optim::Optimizer& opt, pt::data::TensorLoader& loader, int64_t epochs) {
  for (int64_t e = 0; e < epochs; ++e) {
    loader.set_epoch(e);
    for (auto b : loader) {
      auto loss = torch::nn::functional::cross_entropy(task.net->forward(b.x), b.y);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }
}

/// The accumulation bug this policy exists to avoid: every micro-batch's mean loss divided by the window length.
struct MeanOfMeans {
  static constexpr pt::Category category = pt::Category::accumulation;
  int64_t n = 4;
  template <class C> torch::Tensor transform_loss(C&, torch::Tensor l) { return l / static_cast<double>(n); }
  template <class C> bool should_step(C& c) { return c.state().micro_step >= n; }
};

/// Records, for each micro-batch, whether the Trainer said it ends the window.
struct LastMicroStepLog {
  std::vector<int>* log;
  template <class C, class F> void around_backward(C& c, F&& f) {
    log->push_back(c.is_last_micro_step() ? 1 : 0);
    f();
  }
};

/// A task whose training step runs out of memory above `limit` samples (the fake memory limit).
struct OomAbove {
  MlpTask inner;
  int64_t limit;
  int64_t ooms = 0;
  OomAbove(uint64_t seed, int64_t limit) : inner(seed), limit(limit) {}
  torch::nn::Module& module() { return inner.module(); }
  torch::Tensor training_step(const pt::Batch& b) {
    if (b.size() > limit) {
      ++ooms;
      throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                  "fake out of memory: micro-batch " + std::to_string(b.size()));
    }
    return inner.training_step(b);
  }
  pt::Prediction validation_step(const pt::Batch& b) { return inner.validation_step(b); }
};

std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) s.append(buf, n);
  return s;
}

int count(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("Steps(n): n micro-batches of b samples give the parameters of one batch of n*b samples") {
  auto [x, y] = testing::toy_data(96);
  for (Opt o : {Opt::sgd, Opt::adamw}) {
    CAPTURE(static_cast<int>(o));
    MlpTask a(1), b(2);
    testing::copy_weights(b.module(), a.module());
    auto opt_a = make_opt(o, a.module());
    auto opt_b = make_opt(o, b.module());
    // The loader's order depends on (seed, epoch) only, so batches of 48 are the concatenation of three of 16.
    pt::data::TensorLoader micro(x, y, {.batch_size = 16, .shuffle = true, .seed = 5});
    pt::data::TensorLoader big(x, y, {.batch_size = 48, .shuffle = true, .seed = 5});
    pt::Trainer<MlpTask, pt::accumulate::Steps> trainer(a, *opt_a, pt::accumulate::Steps(3));
    auto r = trainer.fit(micro, {.epochs = 3});
    plain_loop(b, *opt_b, big, 3);
    CHECK(r.global_steps == 3 * 2);
    CHECK(testing::max_rel_diff(a.module(), b.module()) < 1e-6);
    CHECK_FALSE(testing::same_params(a.module(), MlpTask(1).module()));  // it trained
  }
}

TEST_CASE("Uneven micro-batches: the step sees the gradient of the mean loss over every sample of the window") {
  auto [x, y] = testing::toy_data(50);
  SUBCASE("one window of 16+16+16+2 samples equals one batch of 50") {
    MlpTask a(1), b(2), naive(3);
    testing::copy_weights(b.module(), a.module());
    testing::copy_weights(naive.module(), a.module());
    auto opt_a = make_opt(Opt::sgd, a.module());
    auto opt_b = make_opt(Opt::sgd, b.module());
    auto opt_n = make_opt(Opt::sgd, naive.module());
    // [snippet:uneven]
    pt::data::TensorLoader micro(x, y, {.batch_size = 16, .shuffle = true, .seed = 9});
    pt::data::TensorLoader whole(x, y, {.batch_size = 50, .shuffle = true, .seed = 9});
    pt::Trainer<MlpTask, pt::accumulate::Steps> trainer(a, *opt_a, pt::accumulate::Steps(4));
    auto r = trainer.fit(micro, {.epochs = 3});
    plain_loop(b, *opt_b, whole, 3);
    CHECK(r.global_steps == 3);
    CHECK(testing::max_rel_diff(a.module(), b.module()) < 1e-6);
    // [/snippet:uneven]
    // The mean of the micro-batch means weighs the 2-sample batch like a 16-sample one: visibly different.
    pt::Trainer<MlpTask, MeanOfMeans> bad(naive, *opt_n, MeanOfMeans{4});
    bad.fit(micro, {.epochs = 3});
    CHECK(testing::max_rel_diff(naive.module(), b.module()) > 1e-4);
  }
  SUBCASE("windows of 16+16 and 16+2 equal batches of 32 and 18") {
    MlpTask a(1), b(2);
    testing::copy_weights(b.module(), a.module());
    auto opt_a = make_opt(Opt::adamw, a.module());
    auto opt_b = make_opt(Opt::adamw, b.module());
    pt::data::TensorLoader micro(x, y, {.batch_size = 16, .shuffle = true, .seed = 4});
    pt::data::TensorLoader big(x, y, {.batch_size = 32, .shuffle = true, .seed = 4});
    pt::Trainer<MlpTask, pt::accumulate::Steps> trainer(a, *opt_a, pt::accumulate::Steps(2));
    auto r = trainer.fit(micro, {.epochs = 2});
    plain_loop(b, *opt_b, big, 2);
    CHECK(r.global_steps == 2 * 2);
    CHECK(testing::max_rel_diff(a.module(), b.module()) < 1e-6);
  }
  SUBCASE("a trailing window at the end of an epoch is stepped with the samples it has") {
    // 96 samples in micro-batches of 16 = 6 per epoch; windows of 4 leave a trailing window of 2 (32 samples).
    auto [x96, y96] = testing::toy_data(96);
    MlpTask a(1), b(2);
    testing::copy_weights(b.module(), a.module());
    auto opt_a = make_opt(Opt::sgd, a.module());
    auto opt_b = make_opt(Opt::sgd, b.module());
    pt::data::TensorLoader micro(x96, y96, {.batch_size = 16, .shuffle = true, .seed = 2});
    pt::data::TensorLoader big(x96, y96, {.batch_size = 64, .shuffle = true, .seed = 2});  // 64, then 32
    std::vector<int> last;
    pt::Trainer<MlpTask, pt::accumulate::Steps, LastMicroStepLog> trainer(a, *opt_a, pt::accumulate::Steps(4),
                                                                          LastMicroStepLog{&last});
    auto r = trainer.fit(micro, {.epochs = 2});
    plain_loop(b, *opt_b, big, 2);
    CHECK(r.global_steps == 2 * 2);
    CHECK(r.samples_seen == 2 * 96);
    CHECK(testing::max_rel_diff(a.module(), b.module()) < 1e-6);
    // The signal the parallel policy reads (all-reduce only on the last micro-step of a window).
    CHECK(last == std::vector<int>{0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1});
  }
}

TEST_CASE("NominalBatch: accumulate = max(round(nominal / batch), 1) and weight decay x batch*accumulate/nominal") {
  using pt::accumulate::nominal_accumulate;
  using pt::accumulate::nominal_weight_decay_factor;
  // Hand-computed (Python's round: half to even).
  CHECK(nominal_accumulate(64, 16) == 4);
  CHECK(nominal_accumulate(64, 20) == 3);   // 3.2
  CHECK(nominal_accumulate(64, 24) == 3);   // 2.67
  CHECK(nominal_accumulate(100, 40) == 2);  // 2.5 -> 2
  CHECK(nominal_accumulate(96, 64) == 2);   // 1.5 -> 2
  CHECK(nominal_accumulate(64, 128) == 1);  // 0.5 -> 0 -> 1
  CHECK(nominal_accumulate(64, 64) == 1);
  CHECK(nominal_weight_decay_factor(64, 16) == doctest::Approx(1.0));
  CHECK(nominal_weight_decay_factor(64, 20) == doctest::Approx(60.0 / 64));
  CHECK(nominal_weight_decay_factor(64, 24) == doctest::Approx(72.0 / 64));
  CHECK(nominal_weight_decay_factor(100, 40) == doctest::Approx(0.8));
  CHECK(nominal_weight_decay_factor(64, 128) == doctest::Approx(2.0));
  CHECK_THROWS_AS(nominal_accumulate(64, 0), std::invalid_argument);
  CHECK_THROWS_AS(pt::accumulate::NominalBatch({.nominal = 64, .batch = 0}), std::invalid_argument);

  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = 20, .shuffle = false});

  SUBCASE("every param group of AdamW, Adam and SGD is scaled once, from the value of the first fit") {
    MlpTask t(1);
    auto w = t.net->fc1->weight;
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{t.net->fc1->weight, t.net->fc2->weight},
                        std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-3).weight_decay(0.05)));
    groups.emplace_back(std::vector<torch::Tensor>{t.net->fc1->bias, t.net->fc2->bias},
                        std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-3).weight_decay(0.0)));
    torch::optim::AdamW adamw(std::move(groups), torch::optim::AdamWOptions(1e-3));
    torch::optim::Adam adam(t.module().parameters(), torch::optim::AdamOptions(1e-3).weight_decay(0.02));
    torch::optim::SGD sgd(t.module().parameters(), torch::optim::SGDOptions(0.1).weight_decay(0.001));
    auto wd = [](torch::optim::Optimizer& o, size_t g) { return pt::weight_decay_of(o.param_groups()[g].options(), "test"); };

    const pt::accumulate::NominalBatch::Options opts{.nominal = 64, .batch = 20};  // accumulate 3, factor 0.9375
    pt::Trainer<MlpTask, pt::accumulate::NominalBatch> ta(t, adamw, pt::accumulate::NominalBatch(opts));
    CHECK(ta.policy<pt::Category::accumulation>().accumulate() == 3);
    auto r = ta.fit(loader, {.epochs = 1});
    CHECK(r.global_steps == 2);  // 5 micro-batches: a window of 3, then the trailing 2
    CHECK(wd(adamw, 0) == doctest::Approx(0.05 * 0.9375));
    CHECK(wd(adamw, 1) == 0.0);
    ta.fit(loader, {.epochs = 2});  // a second fit does not compound the factor
    CHECK(wd(adamw, 0) == doctest::Approx(0.05 * 0.9375));

    // Resume: the state carries the base value, so the optimizer's already scaled value is not scaled again.
    pt::Trainer<MlpTask, pt::accumulate::NominalBatch> tb(t, adamw, pt::accumulate::NominalBatch(opts));
    tb.load_state_dict(ta.state_dict());
    tb.fit(loader, {.epochs = 3});
    CHECK(wd(adamw, 0) == doctest::Approx(0.05 * 0.9375));

    pt::Trainer<MlpTask, pt::accumulate::NominalBatch> tc(t, adam, pt::accumulate::NominalBatch({.nominal = 100, .batch = 40}));
    tc.fit(loader, {.epochs = 1, .limit_train_batches = 1});
    CHECK(wd(adam, 0) == doctest::Approx(0.02 * 0.8));
    pt::Trainer<MlpTask, pt::accumulate::NominalBatch> td(t, sgd, pt::accumulate::NominalBatch({.nominal = 64, .batch = 128}));
    td.fit(loader, {.epochs = 1, .limit_train_batches = 1});
    CHECK(wd(sgd, 0) == doctest::Approx(0.001 * 2.0));
  }
  SUBCASE("nominal = 0 is Steps(steps) and leaves the weight decay alone") {
    MlpTask t(1);
    torch::optim::SGD sgd(t.module().parameters(), torch::optim::SGDOptions(0.1).weight_decay(0.001));
    pt::Trainer<MlpTask, pt::accumulate::NominalBatch> tr(t, sgd, pt::accumulate::NominalBatch({.nominal = 0, .steps = 2}));
    auto r = tr.fit(loader, {.epochs = 1});
    CHECK(r.global_steps == 3);  // 5 micro-batches in windows of 2
    CHECK(pt::weight_decay_of(sgd.param_groups()[0].options(), "test") == 0.001);
  }
  SUBCASE("an optimizer whose options cannot be scaled is a clear error") {
    MlpTask t(1);
    torch::optim::LBFGS lbfgs(t.module().parameters(), torch::optim::LBFGSOptions(1.0));
    pt::Trainer<MlpTask, pt::accumulate::NominalBatch> tr(t, lbfgs, pt::accumulate::NominalBatch({.nominal = 64, .batch = 16}));
    try {
      tr.fit(loader, {.epochs = 1});
      FAIL("expected std::invalid_argument");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("accumulate::NominalBatch") != std::string::npos);
      CHECK(std::string(e.what()).find("scale_weight_decay = false") != std::string::npos);
    }
  }
}

TEST_CASE("NominalBatch trains like one batch of batch*accumulate samples with the scaled weight decay") {
  // nominal 40, micro-batch 16: accumulate round(2.5) = 2, weight decay x 32/40.
  auto [x, y] = testing::toy_data(96);
  MlpTask a(1), b(2);
  testing::copy_weights(b.module(), a.module());
  torch::optim::SGD opt_a(a.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.05));
  torch::optim::SGD opt_b(b.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.05 * 0.8));
  pt::data::TensorLoader micro(x, y, {.batch_size = 16, .shuffle = true, .seed = 1});
  pt::data::TensorLoader big(x, y, {.batch_size = 32, .shuffle = true, .seed = 1});
  pt::Trainer<MlpTask, pt::accumulate::NominalBatch> trainer(a, opt_a, pt::accumulate::NominalBatch({.nominal = 40, .batch = 16}));
  trainer.fit(micro, {.epochs = 2});
  plain_loop(b, opt_b, big, 2);
  CHECK(testing::max_rel_diff(a.module(), b.module()) < 1e-6);
}

TEST_CASE("AutoBatch search finds the largest micro-batch under a fake memory limit") {
  using pt::accumulate::AutoBatch;
  const int64_t budget = 100'000;
  SUBCASE("out-of-memory errors bound the search") {
    AutoBatch ab({.max_batch = 1024, .memory_fraction = 0.9, .log = nullptr}, budget);
    int calls = 0;
    auto probe = [&](int64_t b) -> int64_t {
      ++calls;
      if (b > 37) throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, "fake");
      return b * 100;  // well inside the budget
    };
    CHECK(ab.search(probe) == 37);
    CHECK(calls == static_cast<int>(ab.probes().size()));
    for (const auto& p : ab.probes()) CHECK(p.fits == (p.batch <= 37));
    CHECK(ab.probes().size() <= 2 * 11);  // doubling then bisection: O(log max_batch)
  }
  SUBCASE("the memory fraction bounds the search") {
    AutoBatch ab({.max_batch = 1024, .memory_fraction = 0.9, .log = nullptr}, budget);
    CHECK(ab.search([](int64_t b) -> int64_t { return b * 1000; }) == 90);  // 90 * 1000 <= 0.9 * 100000
  }
  SUBCASE("max_batch caps it, and a model that never fits is an error") {
    AutoBatch ab({.max_batch = 100, .log = nullptr}, budget);
    CHECK(ab.search([](int64_t) -> int64_t { return 1; }) == 100);
    CHECK_THROWS_AS(ab.search([](int64_t) -> int64_t {
      throw c10::OutOfMemoryError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, "fake");
    }), std::runtime_error);
  }
  SUBCASE("other errors propagate") {
    AutoBatch ab({.log = nullptr}, budget);
    CHECK_THROWS_AS(ab.search([](int64_t) -> int64_t { throw std::logic_error("bug"); }), std::logic_error);
  }
}

TEST_CASE("AutoBatch keeps the global batch by choosing the accumulation, and halves on out-of-memory") {
  using pt::accumulate::AutoBatch;
  using pt::accumulate::BatchPlan;
  CHECK(AutoBatch({.global_batch = 256, .log = nullptr}, 1).plan(100) == BatchPlan{64, 4});
  CHECK(AutoBatch({.global_batch = 96, .log = nullptr}, 1).plan(40) == BatchPlan{32, 3});
  CHECK(AutoBatch({.global_batch = 257, .log = nullptr}, 1).plan(100) == BatchPlan{86, 3});  // prime: 258 samples
  CHECK(AutoBatch({.global_batch = 64, .log = nullptr}, 1).plan(500) == BatchPlan{64, 1});
  CHECK(AutoBatch({.global_batch = 0, .log = nullptr}, 1).plan(37) == BatchPlan{37, 1});

  std::FILE* log = std::tmpfile();
  AutoBatch ab({.global_batch = 256, .max_halvings = 2, .log = log}, 1);
  auto p1 = ab.on_out_of_memory({64, 4});
  REQUIRE(p1);
  CHECK(*p1 == BatchPlan{32, 8});
  auto p2 = ab.on_out_of_memory(*p1);
  REQUIRE(p2);
  CHECK(*p2 == BatchPlan{16, 16});
  CHECK_FALSE(ab.on_out_of_memory(*p2));  // the limit
  const std::string text = read_all(log);
  std::fclose(log);
  CHECK(count(text, "retrying with micro-batch") == 2);
  CHECK(text.find("micro-batch 32 x 8") != std::string::npos);
  CHECK(text.find("giving up") != std::string::npos);
}

TEST_CASE("fit_auto_batch recovers from out-of-memory during training and trains as the smaller plan would") {
  auto [x, y] = testing::toy_data(96);
  auto make_loader = [&](int64_t b) { return pt::data::TensorLoader(x, y, {.batch_size = b, .shuffle = true, .seed = 8}); };
  pt::data::TensorLoader val(x, y, {.batch_size = 96, .shuffle = false});

  OomAbove task(1, /*limit=*/10);
  MlpTask ref(2);
  testing::copy_weights(ref.module(), task.module());
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD opt_ref(ref.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));

  std::FILE* log = std::tmpfile();
  pt::accumulate::AutoBatch ab({.global_batch = 32, .max_halvings = 3, .log = log}, 1);
  pt::accumulate::BatchPlan plan{32, 1};
  pt::Trainer<OomAbove, pt::accumulate::Steps> trainer(task, opt);
  auto r = pt::accumulate::fit_auto_batch(trainer, ab, plan, make_loader, val, pt::FitOptions{.epochs = 2});
  CHECK(plan == pt::accumulate::BatchPlan{8, 4});  // 32 -> 16 -> 8 (fits under 10)
  CHECK(task.ooms == 2);
  CHECK(trainer.policy<pt::Category::accumulation>().accumulate() == 4);
  CHECK(r.global_steps == 2 * 3);
  const std::string text = read_all(log);
  std::fclose(log);
  CHECK(count(text, "out of memory at micro-batch") == 2);

  // The same run planned at 8 x 4 from the start: the failed attempts left no trace in the weights.
  auto loader8 = make_loader(8);
  pt::Trainer<MlpTask, pt::accumulate::Steps> direct(ref, opt_ref, pt::accumulate::Steps(4));
  direct.fit(loader8, {.epochs = 2});
  CHECK(testing::max_rel_diff(task.module(), ref.module()) < 1e-6);

  SUBCASE("beyond max_halvings the error propagates") {
    OomAbove tiny(1, /*limit=*/0);
    torch::optim::SGD o(tiny.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::accumulate::AutoBatch ab2({.global_batch = 32, .max_halvings = 2, .log = nullptr}, 1);
    pt::accumulate::BatchPlan p{32, 1};
    pt::Trainer<OomAbove, pt::accumulate::Steps> t2(tiny, o);
    CHECK_THROWS_AS(pt::accumulate::fit_auto_batch(t2, ab2, p, make_loader, val, pt::FitOptions{.epochs = 1}),
                    c10::OutOfMemoryError);
    CHECK(p == pt::accumulate::BatchPlan{8, 4});
  }
}
