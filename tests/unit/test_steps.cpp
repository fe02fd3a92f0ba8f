// Training by steps (FitOptions::max_steps alone, val_every_steps, eval_on_start): a run by steps against a plain
// LibTorch loop written here (the loss and lr of every step, the validations at the right steps, the best checkpoint
// at the right step), over a loader that says its length and one that does not; early stopping counted in
// validations; a resume with another interval or length; kill -9 mid-interval and a resume with the same and with
// another val_every_steps, ending bit-identical with the step count asked; the progress bar in steps.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numbers>
#include <numeric>
#include <sstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <policytrain/data/resume_check.hpp>
#include <policytrain/data/token_stream.hpp>
#include <policytrain/metric/perplexity.hpp>

#include "helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kSamples = 40, kBatch = 8;  // 5 batches an epoch
constexpr double kLr = 0.02, kLrf = 0.1;

/// The data of every run here: a training set of 5 shuffled batches an epoch, a validation set of 3 batches.
struct Data {
  torch::Tensor x, y, vx, vy;
  Data() {
    // Learnable, with label noise: the class is the largest of the first three inputs plus noise, so that the
    // validation loss falls, then rises where the model fits the training set's noise.
    auto make = [](int64_t n, uint64_t seed) {
      auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
      auto in = torch::randn({n, 8}, gen);
      auto cls = (in.slice(1, 0, 3) + torch::randn({n, 3}, gen)).argmax(1);
      return std::pair{in, cls};
    };
    std::tie(x, y) = make(kSamples, 7);
    std::tie(vx, vy) = make(24, 8);
  }
  pt::data::TensorLoader train() const { return {x, y, {.batch_size = kBatch, .shuffle = true, .seed = 5}}; }
  pt::data::TensorLoader val() const { return {vx, vy, {.batch_size = kBatch, .shuffle = false}}; }
};

/// A loader that does not say its length: the Trainer learns an epoch's end from the iterator.
struct Unsized {
  pt::data::TensorLoader inner;
  void set_epoch(int64_t e) { inner.set_epoch(e); }
  auto begin() { return inner.begin(); }
  auto end() { return inner.end(); }
};

/// What a run did: the loss and lr of every step, the (step, val loss) of every validation, the weights at each.
struct Trace {
  std::vector<double> loss, lr;
  std::vector<std::pair<int64_t, double>> val;
  std::vector<std::vector<torch::Tensor>> val_weights;
};

std::vector<torch::Tensor> weights(torch::nn::Module& m) {
  std::vector<torch::Tensor> w;
  for (const auto& p : m.parameters()) w.push_back(p.detach().clone());
  return w;
}

bool same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

/// What was written to `f` (a std::tmpfile), which is closed.
std::string drain(std::FILE* f) {
  std::rewind(f);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

/// nanoGPT's cosine without warmup, written from its formula: lr_t = min + (base - min) (1 + cos(pi t / (T - 1))) / 2,
/// min = kLrf base (schedule::Lr's cosine, decay to lrf on the run's last step).
double cosine_lr(int64_t t, int64_t total) {
  const double p = std::min(static_cast<double>(t) / static_cast<double>(total - 1), 1.0);
  return kLr * (kLrf + (1 - kLrf) * (1 + std::cos(std::numbers::pi * p)) / 2);
}

/// The plain loop: AdamW, the cosine lr set before every step, cross-entropy, a validation (mean loss over the
/// first `limit_val` batches, weighted by batch size) every `val_every` steps and at step 0 when asked.
Trace plain_loop(const Data& d, int64_t max_steps, int64_t val_every, bool eval_on_start, int64_t limit_val,
                 bool constant = false) {
  testing::MlpTask task(11);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(kLr).weight_decay(0.01));
  auto train = d.train();
  auto val = d.val();
  Trace tr;
  auto validate = [&](int64_t step) {
    task.module().eval();
    torch::NoGradGuard g;
    double sum = 0;
    int64_t n = 0, i = 0;
    for (auto&& b : val) {
      if (i++ >= limit_val) break;
      sum += torch::nn::functional::cross_entropy(task.net->forward(b.x), b.y).item<double>() * static_cast<double>(b.size());
      n += b.size();
    }
    task.module().train();
    tr.val.emplace_back(step, sum / static_cast<double>(n));
    tr.val_weights.push_back(weights(task.module()));
  };
  int64_t step = 0;
  if (eval_on_start) validate(0);
  for (int64_t epoch = 0; step < max_steps; ++epoch) {
    train.set_epoch(epoch);
    for (auto&& b : train) {
      const double lr = constant ? kLr : cosine_lr(step, max_steps);
      static_cast<torch::optim::AdamWOptions&>(opt.param_groups()[0].options()).lr(lr);
      auto loss = torch::nn::functional::cross_entropy(task.net->forward(b.x), b.y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      ++step;
      tr.loss.push_back(loss.item<double>());
      tr.lr.push_back(lr);
      if (val_every > 0 && step % val_every == 0) validate(step);
      if (step == max_steps) break;
    }
  }
  tr.val_weights.push_back(weights(task.module()));  // the last: the run's final weights
  return tr;
}

/// Records what the Trainer did at every step and validation (rows shared by copies).
struct Recorder {
  std::shared_ptr<Trace> tr = std::make_shared<Trace>();
  template <class C>
  void after_step(C& c, bool) {
    tr->loss.push_back(c.state().loss_value());
    tr->lr.push_back(c.step_lr());
  }
  template <class C>
  void on_validation_end(C& c, const pt::Metrics& m) {
    tr->val.emplace_back(c.state().global_step, m.loss);
    tr->val_weights.push_back(weights(c.module()));
  }
};

/// Dies by SIGKILL at the end of step `at` (after the step's checkpoint saves, before anything of the next).
struct KillAt {
  int64_t at = -1;
  template <class C>
  void on_step_end(C& c) {
    if (c.state().global_step == at) ::raise(SIGKILL);
  }
};

pt::schedule::Lr cosine(bool constant = false) {
  return pt::schedule::Lr({.kind = constant ? pt::schedule::Kind::constant : pt::schedule::Kind::cosine, .lrf = kLrf});
}

using StepsTrainer =
    pt::Trainer<testing::MlpTask, pt::schedule::Lr, pt::checkpoint::Disk, pt::callbacks::MetricsLog, Recorder, KillAt>;

/// One fit by steps of the Trainer under test; `dir` empty: no checkpoints.
template <class Loader>
std::pair<pt::FitResult, Trace> trainer_run(const Data& d, Loader train, const pt::FitOptions& fo, const fs::path& dir,
                                            bool resume, int64_t kill_at = -1, bool constant = false) {
  testing::MlpTask task(11);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(kLr).weight_decay(0.01));
  Recorder rec;
  StepsTrainer t(task, opt, cosine(constant),
                 pt::checkpoint::Disk({.directory = dir, .best = true, .every_steps = 3,
                                       .resume = resume ? "auto" : "", .export_final = false, .log = nullptr}),
                 pt::callbacks::MetricsLog({.dir = dir.empty() ? dir : dir / "logs", .print_summary = false}), rec,
                 KillAt{kill_at});
  auto val = d.val();
  const auto r = t.fit(train, val, fo);
  rec.tr->val_weights.push_back(weights(task.module()));
  return {r, *rec.tr};
}

void check_equal_prefix(const Trace& got, const Trace& want, size_t from = 0) {
  REQUIRE(got.loss.size() + from <= want.loss.size());
  for (size_t i = 0; i < got.loss.size(); ++i) {
    CAPTURE(i + from + 1);
    CHECK(got.loss[i] == want.loss[i + from]);  // bit for bit: the same operations in the same order
    CHECK(got.lr[i] == doctest::Approx(want.lr[i + from]).epsilon(1e-12));
  }
}

/// The reference's validations after step `from`, at the multiples of `every` (a resumed run's).
std::vector<std::pair<int64_t, double>> validations_after(const Trace& ref, int64_t from, int64_t every, int64_t to) {
  std::vector<std::pair<int64_t, double>> v;
  for (const auto& [s, l] : ref.val)
    if (s > from && s <= to && s % every == 0) v.emplace_back(s, l);
  return v;
}

void check_validations(const std::vector<std::pair<int64_t, double>>& got, const std::vector<std::pair<int64_t, double>>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].first == want[i].first);
    CHECK(got[i].second == doctest::Approx(want[i].second).epsilon(1e-12));
  }
}

/// The worker of the kill -9 case: a fresh run by steps that kills itself at the end of step PT_STEPS_KILL_AT.
const int kStepsWorker = [] {
  const char* w = std::getenv("POLICYTRAIN_STEPS_WORKER");
  if (!w || std::string(w) != "kill") return 0;
  testing::run_worker_and_exit([] {
    torch::set_num_threads(1);
    const Data d;
    trainer_run(d, d.train(),
                {.max_steps = std::atoll(std::getenv("PT_STEPS_MAX")), .limit_val_batches = 2,
                 .val_every_steps = std::atoll(std::getenv("PT_STEPS_EVERY"))},
                std::getenv("PT_STEPS_DIR"), false, std::atoll(std::getenv("PT_STEPS_KILL_AT")));
    return 0;  // not reached: the run dies at its kill step
  });
}();

/// Runs this binary as the kill worker; returns its wait status.
int run_kill_worker(const fs::path& dir, int64_t max_steps, int64_t every, int64_t kill_at) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("POLICYTRAIN_STEPS_WORKER", "kill", 1);
    ::setenv("PT_STEPS_DIR", dir.c_str(), 1);
    ::setenv("PT_STEPS_MAX", std::to_string(max_steps).c_str(), 1);
    ::setenv("PT_STEPS_EVERY", std::to_string(every).c_str(), 1);
    ::setenv("PT_STEPS_KILL_AT", std::to_string(kill_at).c_str(), 1);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::execl("/proc/self/exe", "/proc/self/exe", static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("a run by steps equals a plain LibTorch loop: loss and lr per step, validations, the best checkpoint") {
  const Data d;
  constexpr int64_t kMax = 23, kEvery = 4;  // 23 steps over 5 epochs of 5 batches: it ends inside the fifth
  const Trace ref = plain_loop(d, kMax, kEvery, true, 2);
  REQUIRE(ref.loss.size() == kMax);
  REQUIRE(ref.val.size() == 1 + kMax / kEvery);
  const pt::FitOptions fo{.max_steps = kMax, .limit_val_batches = 2, .val_every_steps = kEvery, .eval_on_start = true};
  CHECK(fo.by_steps());
  SUBCASE("a loader that says its length, with checkpoints") {
    const auto dir = testing::temp_dir("steps-plain");
    const auto [r, tr] = trainer_run(d, d.train(), fo, dir, false);
    CHECK(r.global_steps == kMax);
    CHECK(r.epochs_run == 5);
    CHECK_FALSE(r.stopped_early);
    check_equal_prefix(tr, ref);
    CHECK(tr.loss.size() == ref.loss.size());
    check_validations(tr.val, ref.val);
    REQUIRE(r.validation_steps.size() == ref.val.size());
    for (size_t i = 0; i < ref.val.size(); ++i) CHECK(r.validation_steps[i] == ref.val[i].first);
    CHECK(same(tr.val_weights.back(), ref.val_weights.back()));
    // best.ckpt: the weights of the validation with the lowest loss after step 0 (step 0 sets the value to beat and
    // is not saved), at its step; last.ckpt: the run's end.
    size_t best = 0;
    for (size_t i = 0; i < ref.val.size(); ++i)
      if (ref.val[i].second < ref.val[best].second) best = i;
    INFO("best validation " << best << " at step " << ref.val[best].first);
    REQUIRE(best > 0);  // the data are chosen so: the branch below runs
    {
      REQUIRE(fs::exists(dir / "best.ckpt"));
      testing::MlpTask task(99);
      torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(kLr).weight_decay(0.01));
      StepsTrainer t(task, opt, cosine());
      pt::checkpoint::load(t.context(), dir / "best.ckpt");
      CHECK(t.state().global_step == ref.val[best].first);
      CHECK(t.state().best_step == ref.val[best].first);
      CHECK(same(weights(task.module()), ref.val_weights[best]));
    }
    fs::remove_all(dir);
  }
  SUBCASE("a loader that does not say its length") {
    const auto [r, tr] = trainer_run(d, Unsized{d.train()}, fo, {}, false);
    CHECK(r.global_steps == kMax);
    check_equal_prefix(tr, ref);
    check_validations(tr.val, ref.val);
    CHECK(same(tr.val_weights.back(), ref.val_weights.back()));
  }
}

TEST_CASE("a run by steps stops early after `patience` validations without improvement, and names the step") {
  const Data d;
  constexpr int64_t kMax = 40, kEvery = 3;
  const Trace ref = plain_loop(d, kMax, kEvery, false, 2);
  // min_delta makes every validation after the first a non-improvement: the stop comes at validation 1 + patience.
  testing::MlpTask task(11);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(kLr).weight_decay(0.01));
  Recorder rec;
  std::FILE* log = std::tmpfile();
  pt::Trainer<testing::MlpTask, pt::schedule::Lr, pt::callbacks::EarlyStopping, Recorder> t(
      task, opt, cosine(),
      pt::callbacks::EarlyStopping({.monitor = {.metric = "loss", .min_delta = 1e9}, .patience = 2, .log = log}), rec);
  auto train = d.train();
  auto val = d.val();
  const auto r = t.fit(train, val, {.max_steps = kMax, .limit_val_batches = 2, .val_every_steps = kEvery});
  CHECK(r.stopped_early);
  CHECK(r.global_steps == 3 * kEvery);
  CHECK(r.validation_steps == std::vector<int64_t>{3, 6, 9});
  check_equal_prefix(*rec.tr, ref);
  CHECK(rec.tr->loss.size() == 3 * kEvery);
  const auto& es = t.get<pt::callbacks::EarlyStopping>();
  CHECK(es.stopped_step() == 9);
  CHECK(es.best_step() == 3);
  CHECK(t.state().best_step == 3);
  const std::string msg = drain(log);
  CHECK(msg.find("stopping after step 9: loss did not improve for 2 validations (best") != std::string::npos);
  CHECK(msg.find("at step 3)") != std::string::npos);
}

TEST_CASE("a run by steps resumed with another interval and length continues from the step reached") {
  const Data d;
  const auto dir = testing::temp_dir("steps-resume");
  // A constant lr: a decaying schedule's horizon is the first fit's (11 steps) and a resumed run keeps it
  // (schedule::Lr's documented rule), which the kill case, resumed with the same length, leaves aside.
  const Trace ref = plain_loop(d, 23, 1, false, 2, true);  // every step validated: any interval's values are in it
  const auto [r1, tr1] = trainer_run(d, d.train(), {.max_steps = 23, .limit_val_batches = 2, .val_every_steps = 4}, {},
                                     false, -1, true);
  REQUIRE(r1.global_steps == 23);
  check_equal_prefix(tr1, ref);
  const auto [a, ta] = trainer_run(d, d.train(), {.max_steps = 11, .limit_val_batches = 2, .val_every_steps = 4}, dir,
                                   false, -1, true);
  REQUIRE(a.global_steps == 11);
  CHECK(a.validation_steps == std::vector<int64_t>{4, 8});
  // Resumed (last.ckpt of step 11, the fit's end) with another interval and a longer run: steps 12 to 23, validated
  // at the multiples of 5, bit-identical to the uninterrupted run of 23 steps.
  const auto [b, tb] = trainer_run(d, d.train(), {.max_steps = 23, .limit_val_batches = 2, .val_every_steps = 5}, dir,
                                   true, -1, true);
  CHECK(b.global_steps == 23);
  CHECK(b.validation_steps == std::vector<int64_t>{15, 20});
  CHECK(tb.loss.size() == 12);
  for (size_t i = 0; i < tb.loss.size(); ++i) CHECK(tb.loss[i] == tr1.loss[11 + i]);
  check_validations(tb.val, validations_after(ref, 11, 5, 23));
  CHECK(same(tb.val_weights.back(), tr1.val_weights.back()));
  fs::remove_all(dir);
}

TEST_CASE("kill -9 mid-interval, resumed with the same and with another val_every_steps: bit-identical, the step count asked") {
  const Data d;
  constexpr int64_t kMax = 23, kEvery = 4;
  const Trace ref = plain_loop(d, kMax, 1, false, 2);
  const Trace whole = plain_loop(d, kMax, kEvery, false, 2);
  const auto uninterrupted = testing::temp_dir("steps-whole");
  trainer_run(d, d.train(), {.max_steps = kMax, .limit_val_batches = 2, .val_every_steps = kEvery}, uninterrupted, false);
  const std::string whole_validations = testing::read_text(uninterrupted / "logs" / "validations.csv");
  REQUIRE(!whole_validations.empty());
  std::mt19937_64 g(52);
  int n = 0;
  for (const int64_t every_after : {kEvery, int64_t{5}, int64_t{3}}) {
    // A kill step inside an interval: not a validation's step, not a checkpoint's (every 3 steps).
    int64_t at = 0;
    do at = 5 + static_cast<int64_t>(g() % (kMax - 8));  // 5 to 19: a checkpoint before it, steps after it
    while (at % kEvery == 0 || at % 3 == 0);
    const auto dir = testing::temp_dir("steps-kill" + std::to_string(n));
    INFO("case " << n << ": killed at the end of step " << at << ", resumed validating every " << every_after);
    ++n;
    const int status = run_kill_worker(dir, kMax, kEvery, at);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);
    // The newest checkpoint below the kill: step-N.ckpt every 3 steps, last.ckpt at every validation (4) and at every
    // epoch's end (5 steps an epoch).
    int64_t saved = at;
    while (saved % 3 != 0 && saved % kEvery != 0 && saved % 5 != 0) --saved;
    const auto [r, tr] = trainer_run(d, d.train(),
                                     {.max_steps = kMax, .limit_val_batches = 2, .val_every_steps = every_after}, dir, true);
    CHECK(r.global_steps == kMax);
    REQUIRE(tr.loss.size() == static_cast<size_t>(kMax - saved));
    check_equal_prefix(tr, whole, static_cast<size_t>(saved));
    check_validations(tr.val, validations_after(ref, saved, every_after, kMax));
    CHECK(same(tr.val_weights.back(), whole.val_weights.back()));
    // The logs: every step once; the validations the killed run logged up to its checkpoint, then the resumed run's.
    std::vector<int64_t> steps_logged;
    {
      std::istringstream in(testing::read_text(dir / "logs" / "steps.csv"));
      std::string line;
      std::getline(in, line);
      while (std::getline(in, line)) steps_logged.push_back(std::stoll(line.substr(line.find(',') + 1)));
    }
    std::vector<int64_t> every_step(kMax);
    std::iota(every_step.begin(), every_step.end(), int64_t{1});
    CHECK(steps_logged == every_step);
    const std::string validations = testing::read_text(dir / "logs" / "validations.csv");
    if (every_after == kEvery) {
      CHECK(validations == whole_validations);
    } else {
      std::vector<int64_t> want, got;
      for (int64_t s = kEvery; s <= saved; s += kEvery) want.push_back(s);
      for (const auto& [s, l] : validations_after(ref, saved, every_after, kMax)) want.push_back(s);
      std::istringstream in(validations);
      std::string line;
      std::getline(in, line);
      CHECK(line == "step,epoch,train_loss,val_loss,val_accuracy");
      while (std::getline(in, line)) got.push_back(std::stoll(line));
      CHECK(got == want);
    }
    fs::remove_all(dir);
  }
  fs::remove_all(uninterrupted);
}

TEST_CASE("a run by steps prints steps: the bar counts optimizer steps, each validation has a line named by its step") {
  const Data d;
  testing::MlpTask task(11);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(kLr));
  std::FILE* out = std::tmpfile();
  pt::Trainer<testing::MlpTask, pt::callbacks::ProgressBar> t(task, opt, pt::callbacks::ProgressBar({.every = 5, .force_tty = 0, .out = out}));
  auto train = d.train();
  auto val = d.val();
  // [snippet:fit-by-steps]
  t.fit(train, val, {.max_steps = 12, .val_every_steps = 6, .eval_on_start = true});
  // [/snippet:fit-by-steps]
  const std::string text = drain(out);
  INFO(text);
  // Step 0 (eval_on_start) trained nothing: its line has no training loss (it printed "loss nan" before).
  CHECK(text.find("step 0/12  val_loss") != std::string::npos);
  CHECK(text.find("nan") == std::string::npos);
  for (const char* want : { "step 6/12  loss ", "step 12/12  loss ", "] 5/12 ", "] 10/12 ",
                           "] 12/12 ", "steps/s", "epoch 0  loss", "epoch 2  loss"})
    CHECK(text.find(want) != std::string::npos);
  CHECK(text.find("epoch 0/") == std::string::npos);  // no last epoch in a run by steps
  CHECK(text.find("step 5/12  loss") == std::string::npos);  // no validation line where none ran
}

namespace {
/// The lr of every step.
struct LrSeen {
  std::shared_ptr<std::vector<double>> lrs = std::make_shared<std::vector<double>>();
  template <class C>
  void after_step(C& c, bool) { lrs->push_back(c.step_lr()); }
};

/// A Trainer of the defaults over the test's data.
struct Plain {
  Data d;
  testing::MlpTask task{11};
  torch::optim::AdamW opt{task.module().parameters(), torch::optim::AdamWOptions(kLr)};
  pt::Trainer<testing::MlpTask> t{task, opt};
  pt::data::TensorLoader train = d.train();
};
}  // namespace

TEST_CASE("fit refuses step settings that cannot mean anything, by name") {
  Plain p;
  auto& [d, task, opt, t, train] = p;
  auto val = d.val();
  CHECK_THROWS_WITH_AS(t.fit(train, {.max_steps = 5, .val_every_steps = 2}),
                       doctest::Contains("FitOptions::val_every_steps is set but fit was given no validation data"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(t.fit(train, val, {.max_steps = 5, .val_every_steps = -2}),
                       doctest::Contains("FitOptions::val_every_steps is -2"), std::invalid_argument);
  torch::Tensor none = torch::zeros({0, 8});
  pt::data::TensorLoader empty(none, torch::zeros({0}, torch::kLong), {.batch_size = 8});
  CHECK_THROWS_WITH_AS(t.fit(empty, {.max_steps = 5}), doctest::Contains("yielded no batch"), std::invalid_argument);
  // The default epochs: one epoch without max_steps, as before.
  const auto r = t.fit(train);
  CHECK(r.epochs_run == 1);
  CHECK(r.global_steps == 5);
}

// --- data::TokenStream and data::check_exact_resume ---

namespace {

/// A bigram language model: enough to train on token windows.
struct Bigram {
  torch::nn::Embedding emb{nullptr};
  explicit Bigram(int64_t vocab = 50) {
    torch::manual_seed(3);
    emb = torch::nn::Embedding(vocab, vocab);
  }
  torch::nn::Module& module() { return *emb; }
  torch::Tensor training_step(const pt::Batch& b) {
    auto logits = emb->forward(b.x);
    return torch::nn::functional::cross_entropy(logits.flatten(0, 1), b.y.flatten());
  }
};

/// A loader whose batches depend on how many it built before (a counter advanced at each dereference).
struct CountsBuilt {
  pt::data::TensorLoader inner;
  std::shared_ptr<int64_t> built = std::make_shared<int64_t>(0);
  void set_epoch(int64_t e) { inner.set_epoch(e); }
  struct It {
    pt::data::TensorLoader::iterator it;
    std::shared_ptr<int64_t> built;
    pt::Batch operator*() const {
      pt::Batch b = *it;
      return {b.x + static_cast<double>((*built)++), b.y};
    }
    It& operator++() {
      ++it;
      return *this;
    }
    bool operator!=(const It& o) const { return it != o.it; }
  };
  It begin() { return {inner.begin(), built}; }
  It end() { return {inner.end(), built}; }
};

/// A loader that draws each batch's samples from a generator seeded by the epoch, advanced at each dereference: a
/// resumed pass that skips k batches without building them draws batch 0's samples for batch k.
struct DrawsOnDereference {
  torch::Tensor x, y;
  int64_t epoch = 0;
  void set_epoch(int64_t e) { epoch = e; }
  struct It {
    const DrawsOnDereference* l;
    int64_t i;
    std::shared_ptr<at::Generator> g;
    pt::Batch operator*() const {
      auto idx = torch::randint(l->x.size(0), {4}, *g, torch::kLong);
      return {l->x.index_select(0, idx), l->y.index_select(0, idx)};
    }
    It& operator++() {
      ++i;
      return *this;
    }
    bool operator!=(const It& o) const { return i != o.i; }
  };
  It begin() const {
    return {this, 0, std::make_shared<at::Generator>(at::make_generator<at::CPUGeneratorImpl>(100 + static_cast<uint64_t>(epoch)))};
  }
  It end() const { return {this, 5, nullptr}; }
};

}  // namespace

TEST_CASE("TokenStream: windows by the formula, from a file as from a tensor, ranks rows of one global batch") {
  const auto dir = testing::temp_dir("token-stream");
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(9);
  const int64_t n = 777;
  auto tokens = torch::randint(0, 65536, {n}, gen, torch::kLong);
  {
    auto u16 = tokens.to(torch::kInt32);
    std::ofstream f(dir / "train.bin", std::ios::binary);
    for (int64_t i = 0; i < n; ++i) {
      const auto v = static_cast<uint16_t>(u16[i].item<int32_t>());
      f.write(reinterpret_cast<const char*>(&v), 2);
    }
  }
  // [snippet:token-stream]
  const pt::data::TokenStreamOptions o{.block_size = 16, .batch_size = 3, .seed = 1234567890123ull, .batches_per_epoch = 4};
  pt::data::TokenStream file(dir / "train.bin", pt::data::TokenType::uint16, o);
  // [/snippet:token-stream]
  pt::data::TokenStream tensor(tokens, o);
  CHECK(file.tokens() == n);
  CHECK(file.batches_per_epoch() == 4);
  const auto* t = tokens.data_ptr<int64_t>();
  for (int64_t e : {0, 1, 5}) {
    file.set_epoch(e);
    tensor.set_epoch(e);
    int64_t i = 0;
    for (auto&& b : file) {
      CAPTURE(e);
      CAPTURE(i);
      const auto bt = tensor.batch(i);
      CHECK(torch::equal(b.x, bt.x));
      CHECK(torch::equal(b.y, bt.y));
      REQUIRE(b.x.sizes() == torch::IntArrayRef{3, 16});
      for (int64_t r = 0; r < 3; ++r) {  // the formula, as a plain loop over the tokens
        uint64_t h = pt::data::splitmix64(o.seed);
        for (uint64_t v : {static_cast<uint64_t>(e), static_cast<uint64_t>(i), static_cast<uint64_t>(r)})
          h = pt::data::splitmix64(h ^ v);
        const int64_t s = static_cast<int64_t>(h % static_cast<uint64_t>(n - 16));
        for (int64_t k = 0; k < 16; ++k) {
          CHECK(b.x[r][k].item<int64_t>() == t[s + k]);
          CHECK(b.y[r][k].item<int64_t>() == t[s + k + 1]);
        }
      }
      ++i;
    }
    CHECK(i == 4);
  }
  // Rank k of 3 takes rows 2k, 2k + 1 of the global batch: one rank with batch 6 draws the same windows.
  pt::data::TokenStream whole(tokens, {.block_size = 16, .batch_size = 6, .seed = 5});
  for (int64_t k = 0; k < 3; ++k) {
    pt::data::TokenStream rank(tokens, {.block_size = 16, .batch_size = 2, .seed = 5, .rank = k, .world_size = 3});
    for (int64_t i : {0, 7, 1000000}) CHECK(torch::equal(rank.batch(i).x, whole.batch(i).x.slice(0, 2 * k, 2 * k + 2)));
  }
  CHECK(whole.batches_per_epoch() == -1);  // endless: the Trainer sees an unknown length
  CHECK_THROWS_WITH_AS(pt::data::TokenStream(dir / "missing.bin", pt::data::TokenType::uint16),
                       doctest::Contains("cannot open the token file"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(pt::data::TokenStream(tokens.slice(0, 0, 10), {.block_size = 16}),
                       doctest::Contains("holds 10 tokens; a window needs block_size + 1 = 17"), std::invalid_argument);
  {
    std::ofstream(dir / "odd.bin", std::ios::binary) << "abc";
    CHECK_THROWS_WITH_AS(pt::data::TokenStream(dir / "odd.bin", pt::data::TokenType::uint16),
                         doctest::Contains("has 3 bytes, not a whole number of 2-byte ids"), std::invalid_argument);
  }
  fs::remove_all(dir);
}

TEST_CASE("TokenStream by steps: a run stopped and resumed with another length continues the exact window sequence") {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(4);
  auto tokens = torch::randint(0, 50, {5000}, gen, torch::kLong);
  const pt::data::TokenStreamOptions o{.block_size = 8, .batch_size = 4, .seed = 77};
  auto train = [&](const fs::path& dir, int64_t max_steps, bool resume) {
    Bigram task;
    torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
    testing::StepStream rec;
    pt::Trainer<Bigram, pt::checkpoint::Disk, testing::StepStream> t(
        task, opt,
        pt::checkpoint::Disk({.directory = dir, .resume = resume ? "auto" : "", .export_final = false, .log = nullptr}),
        rec);
    pt::data::TokenStream stream(tokens, o);
    const auto r = t.fit(stream, {.max_steps = max_steps});
    return std::tuple{r, weights(task.module()), rec.kept_losses()};
  };
  const auto whole_dir = testing::temp_dir("token-whole"), dir = testing::temp_dir("token-cut");
  const auto [rw, ww, lw] = train(whole_dir, 15, false);
  CHECK(rw.global_steps == 15);
  CHECK(rw.epochs_run == 1);  // the one endless epoch, cut by max_steps
  const auto [r1, w1, l1] = train(dir, 7, false);
  REQUIRE(r1.global_steps == 7);
  const auto [r2, w2, l2] = train(dir, 15, true);
  CHECK(r2.global_steps == 15);
  REQUIRE(l2.size() == 8);
  for (size_t i = 0; i < 8; ++i) CHECK(l2[i] == lw[7 + i]);
  CHECK(same(w2, ww));
  fs::remove_all(whole_dir);
  fs::remove_all(dir);
}

TEST_CASE("check_exact_resume passes the library's loaders and names what breaks a loader of one's own") {
  const Data d;
  SUBCASE("TensorLoader, shuffled by (seed, epoch)") {
    const auto r = pt::data::check_exact_resume([&] { return d.train(); }, {.epochs = 3, .batches = 5});
    CHECK_MESSAGE(r.ok(), r.failure);
    CHECK(r.batches_compared > 2 * 3 * 5);
  }
  SUBCASE("TokenStream, endless, read 6 batches an epoch") {
    auto tokens = torch::arange(0, 300, torch::kLong);
    const auto r = pt::data::check_exact_resume([&] { return pt::data::TokenStream(tokens, {.block_size = 4, .batch_size = 2}); });
    CHECK_MESSAGE(r.ok(), r.failure);
  }
  SUBCASE("batches that depend on how many were built before") {
    const auto r = pt::data::check_exact_resume([&] { return CountsBuilt{d.train()}; });
    REQUIRE_FALSE(r.ok());
    INFO(r.failure);
    CHECK(r.failure.find("batch 0 of epoch 1 of a loader that read the epochs in reverse order differs") != std::string::npos);
    CHECK(r.failure.find("its inputs differ") != std::string::npos);
  }
  SUBCASE("batches drawn at dereference from a generator: a resumed pass draws batch 0's samples for batch 1") {
    // [snippet:check-exact-resume]
    const auto r = pt::data::check_exact_resume([&] { return DrawsOnDereference{d.x, d.y}; });
    REQUIRE_FALSE(r.ok());
    // [/snippet:check-exact-resume]
    CHECK(r.failure.find("batch 1 of epoch 0 of a loader resumed at batch 1 differs") != std::string::npos);
    CHECK(r.failure.find("build each batch from (settings, epoch, index) alone") != std::string::npos);
  }
}

TEST_CASE("a fit whose max_steps is already reached trains nothing (it trained one more step before)") {
  Plain p;
  auto& [d, task, opt, t, train] = p;
  CHECK(t.fit(train, {.epochs = 3, .max_steps = 7}).global_steps == 7);
  const auto w = weights(task.module());
  const auto r = t.fit(train, {.epochs = 3, .max_steps = 7});
  CHECK(r.global_steps == 7);
  CHECK(r.samples_seen == 0);
  CHECK(same(weights(task.module()), w));
}

TEST_CASE("FitOptions' default epochs (-1: one epoch) gives a decaying schedule a one-epoch horizon") {
  Plain p;
  auto& [d, task, opt, t0, train] = p;
  LrSeen seen;
  pt::Trainer<testing::MlpTask, pt::schedule::Lr, LrSeen> t(task, opt, cosine(), seen);
  const auto r = t.fit(train);
  CHECK(r.global_steps == 5);
  CHECK(t.get<pt::schedule::Lr>().horizon().total_steps == 5);
  REQUIRE(seen.lrs->size() == 5);
  for (int64_t s = 0; s < 5; ++s) CHECK((*seen.lrs)[s] == doctest::Approx(cosine_lr(s, 5)).epsilon(1e-12));
}

// --- a resume with changed hyperparameters (issue 52, U3) ---

namespace {

/// nanoGPT's get_lr(it), transcribed from its train.py.
double nanogpt_lr(int64_t it, double lr, double min_lr, int64_t warmup, int64_t decay) {
  if (it < warmup) return lr * static_cast<double>(it + 1) / static_cast<double>(warmup + 1);
  if (it > decay) return min_lr;
  const double ratio = static_cast<double>(it - warmup) / static_cast<double>(decay - warmup);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (lr - min_lr);
}

/// schedule::Lr as nanoGPT's get_lr (docs/schedules.md): cosine after a linear warmup that starts at 1/(W+1) of the
/// peak, over total_steps = lr_decay_iters with the decay ending after it, min_lr = lrf × the peak.
pt::schedule::LrOptions nanogpt_schedule(int64_t warmup, int64_t decay, pt::schedule::OnResume on_resume, std::FILE* log) {
  return {.kind = pt::schedule::Kind::cosine, .total_steps = decay, .lrf = 0.1,
          .decay_end = pt::schedule::DecayEnd::after_run, .warmup_steps = warmup,
          .warmup_start_factor = 1.0 / static_cast<double>(warmup + 1), .on_resume = on_resume, .log = log};
}

/// A fit to global step `max_steps` with AdamW at peak `lr` and the schedule `o` (its log set here), resumed from
/// `dir` when asked; returns the lr of every step it took and what the schedule said.
std::pair<std::vector<double>, std::string> lr_fit(const Data& d, const fs::path& dir, double lr,
                                                   pt::schedule::LrOptions o, int64_t max_steps, bool resume) {
  testing::MlpTask task(11);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(lr).weight_decay(0.1));
  o.log = std::tmpfile();
  LrSeen seen;
  pt::Trainer<testing::MlpTask, pt::schedule::Lr, pt::checkpoint::Disk, LrSeen> t(
      task, opt, pt::schedule::Lr(o),
      pt::checkpoint::Disk({.directory = dir, .resume = resume ? "auto" : "", .export_final = false, .log = nullptr}),
      seen);
  auto train = d.train();
  t.fit(train, {.max_steps = max_steps});
  return {*seen.lrs, drain(o.log)};
}

std::pair<std::vector<double>, std::string> nanogpt_fit(const Data& d, const fs::path& dir, double lr, int64_t decay,
                                                        int64_t max_steps, bool resume, pt::schedule::OnResume on_resume) {
  return lr_fit(d, dir, lr, nanogpt_schedule(10, decay, on_resume, nullptr), max_steps, resume);
}

}  // namespace

TEST_CASE("a resume with a new peak lr: the schedule says what it keeps and what it takes, take is nanoGPT's get_lr") {
  const Data d;
  // The first run: peak 6e-4, warmup 10, decay over 112 iterations, stopped after 61 steps. Its lrs are nanoGPT's.
  const auto dir = testing::temp_dir("resume-lr");
  const auto [first, said0] = nanogpt_fit(d, dir, 6e-4, 112, 61, false, pt::schedule::OnResume::keep);
  REQUIRE(first.size() == 61);
  for (int64_t it = 0; it < 61; ++it) CHECK(first[it] == doctest::Approx(nanogpt_lr(it, 6e-4, 6e-5, 10, 112)).epsilon(1e-12));
  CHECK(said0.empty());
  const auto copy = testing::temp_dir("resume-lr-copy");
  fs::copy(dir, copy, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  SUBCASE("keep (the default): the checkpoint's peak, and it says so") {
    const auto [lrs, said] = nanogpt_fit(d, dir, 3e-4, 112, 70, true, pt::schedule::OnResume::keep);
    REQUIRE(lrs.size() == 9);
    // Iteration 61 (the 62nd step) runs at the checkpoint's schedule's 3.3e-4, not the asked 1.65e-4.
    CHECK(lrs[0] == doctest::Approx(3.3e-4).epsilon(1e-9));
    for (int64_t it = 61; it < 70; ++it) CHECK(lrs[it - 61] == doctest::Approx(nanogpt_lr(it, 6e-4, 6e-5, 10, 112)).epsilon(1e-12));
    INFO(said);
    CHECK(said.find("policytrain::schedule::Lr: resumed at step 61: param group 0: base lr 0.0006 kept (the "
                    "checkpoint's schedule had 0.0006; this run's optimizer asks 0.0003)") != std::string::npos);
    CHECK(said.find("the next step's lr: 0.00033") != std::string::npos);
    CHECK(said.find("LrOptions::on_resume = OnResume::take takes this run's values instead") != std::string::npos);
  }
  SUBCASE("take: this run's peak at the step reached, nanoGPT's get_lr with the new config") {
    const auto [lrs, said] = nanogpt_fit(d, copy, 3e-4, 112, 70, true, pt::schedule::OnResume::take);
    REQUIRE(lrs.size() == 9);
    CHECK(lrs[0] == doctest::Approx(1.65e-4).epsilon(1e-9));  // the value at iteration 61
    for (int64_t it = 61; it < 70; ++it) CHECK(lrs[it - 61] == doctest::Approx(nanogpt_lr(it, 3e-4, 3e-5, 10, 112)).epsilon(1e-12));
    INFO(said);
    CHECK(said.find("param group 0: base lr 0.0003 taken (the checkpoint's schedule had 0.0006; this run's optimizer "
                    "asks 0.0003)") != std::string::npos);
    CHECK(said.find("the next step's lr: 0.000165") != std::string::npos);
  }
  SUBCASE("the same peak: nothing to say") {
    const auto [lrs, said] = nanogpt_fit(d, dir, 6e-4, 112, 70, true, pt::schedule::OnResume::keep);
    REQUIRE(lrs.size() == 9);
    CHECK(said.empty());
  }
  fs::remove_all(dir);
  fs::remove_all(copy);
}

TEST_CASE("a resume whose fit gives another horizon says which it runs over, take takes this fit's") {
  const Data d;
  const auto dir = testing::temp_dir("resume-horizon"), copy = testing::temp_dir("resume-horizon-copy");
  auto fit = [&](const fs::path& where, int64_t max_steps, bool resume, pt::schedule::OnResume on_resume) {
    return lr_fit(d, where, kLr, {.kind = pt::schedule::Kind::cosine, .lrf = kLrf, .on_resume = on_resume}, max_steps,
                  resume);
  };
  fit(dir, 10, false, pt::schedule::OnResume::keep);  // a run by steps of 10: its cosine's horizon is 10
  fs::copy(dir, copy, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto [kept, said_keep] = fit(dir, 20, true, pt::schedule::OnResume::keep);
  INFO(said_keep);
  CHECK(said_keep.find("the schedule's horizon 10 steps kept (the run's was 10; this fit's epochs and max_steps give 20)") !=
        std::string::npos);
  for (int64_t t = 10; t < 20; ++t) CHECK(kept[t - 10] == doctest::Approx(cosine_lr(t, 10)).epsilon(1e-12));
  const auto [taken, said_take] = fit(copy, 20, true, pt::schedule::OnResume::take);
  INFO(said_take);
  CHECK(said_take.find("the schedule's horizon 20 steps taken") != std::string::npos);
  for (int64_t t = 10; t < 20; ++t) CHECK(taken[t - 10] == doctest::Approx(cosine_lr(t, 20)).epsilon(1e-12));
  fs::remove_all(dir);
  fs::remove_all(copy);
}

TEST_CASE("Hugging Face's cosine-with-warmup as schedule::Lr (docs/schedules.md's row), and a warmup as long as the run said") {
  // transformers.get_cosine_schedule_with_warmup(num_warmup_steps=W, num_training_steps=T), transcribed.
  auto hf = [](int64_t t, int64_t W, int64_t T) {
    if (t < W) return static_cast<double>(t) / static_cast<double>(std::max<int64_t>(1, W));
    const double progress = static_cast<double>(t - W) / static_cast<double>(std::max<int64_t>(1, T - W));
    return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
  };
  auto run = [&](int64_t W, int64_t T) {
    Plain p;
    auto& [d, task, opt, t0, train] = p;
    std::FILE* log = std::tmpfile();
    LrSeen seen;
    pt::Trainer<testing::MlpTask, pt::schedule::Lr, LrSeen> t(
        task, opt,
        pt::schedule::Lr({.kind = pt::schedule::Kind::cosine, .lrf = 0, .decay_end = pt::schedule::DecayEnd::after_run,
                          .warmup_steps = W, .log = log}),
        seen);
    t.fit(train, {.max_steps = T});
    return std::pair{*seen.lrs, drain(log)};
  };
  const auto [lrs, said] = run(4, 23);
  REQUIRE(lrs.size() == 23);
  for (int64_t s = 0; s < 23; ++s) CHECK(lrs[s] == doctest::Approx(kLr * hf(s, 4, 23)).epsilon(1e-12));
  CHECK(said.empty());
  const auto [short_lrs, short_said] = run(30, 12);
  CHECK(short_said.find("policytrain::schedule::Lr: the warmup of 30 steps is as long as the run (12 steps): the lr "
                        "never reaches its base value") != std::string::npos);
}

TEST_CASE("a tensor in two param groups is named as such, twice in one group is blamed on tied weights") {
  Plain p;
  auto& [d, task, opt0, t0, train] = p;
  const auto w = task.net->fc1->weight;
  torch::optim::AdamW two({torch::optim::OptimizerParamGroup(task.module().parameters()),
                           torch::optim::OptimizerParamGroup({w})},
                          torch::optim::AdamWOptions(kLr));
  pt::Trainer<testing::MlpTask> a(task, two);
  CHECK_THROWS_WITH_AS(a.fit(train),
                       doctest::Contains("the parameter 'fc1.weight' is in param groups 0 and 1 of the optimizer, so "
                                         "every step would update it twice, once with each group's settings; put each "
                                         "tensor in one group"),
                       std::invalid_argument);
  torch::optim::AdamW tied(std::vector<torch::Tensor>{w, w}, torch::optim::AdamWOptions(kLr));
  pt::Trainer<testing::MlpTask> b(task, tied);
  CHECK_THROWS_WITH_AS(b.fit(train), doctest::Contains("holds the parameter 'fc1.weight' more than once (tied weights"),
                       std::invalid_argument);
}

TEST_CASE("metric::Perplexity is exp of the mean cross-entropy over every non-ignored token of every batch") {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(52);
  for (const std::optional<int64_t> ignore : {std::optional<int64_t>{}, std::optional<int64_t>{-100}}) {
    CAPTURE(ignore.has_value());
    pt::metric::Perplexity ppl(ignore);
    std::vector<torch::Tensor> logits, targets;
    for (int b = 0; b < 4; ++b) {  // batches of different sizes, about a fifth of the targets padding
      const int64_t n = 1 + b;
      auto l = torch::randn({n, 7, 11}, gen) * 2;
      auto t = torch::randint(0, 11, {n, 7}, gen, torch::kLong);
      if (ignore) t = torch::where(torch::rand({n, 7}, gen) < 0.2, torch::full_like(t, *ignore), t);
      ppl.update(l, t);
      logits.push_back(l.reshape({-1, 11}));
      targets.push_back(t.reshape({-1}));
    }
    // The oracle: LibTorch's cross_entropy over all tokens at once (its ignore_index), in double.
    const auto ce = torch::nn::functional::cross_entropy(
        torch::cat(logits).to(torch::kDouble), torch::cat(targets),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(ignore.value_or(-1000)));
    CHECK(ppl.compute().item<double>() == doctest::Approx(std::exp(ce.item<double>())).epsilon(1e-12));
    ppl.reset();
    CHECK(std::isnan(ppl.compute().item<double>()));
  }
  pt::metric::Perplexity ppl;
  CHECK_THROWS_WITH_AS(ppl.update(torch::zeros({2, 3, 5}), torch::zeros({2, 4}, torch::kLong)),
                       doctest::Contains("logits [2, 3, 5] and targets [2, 4]"), std::invalid_argument);
}

namespace {
/// The bigram model with a validation: its perplexity as an epoch-level metric.
struct BigramEval : Bigram {
  pt::Prediction validation_step(const pt::Batch& b) {
    auto logits = emb->forward(b.x);
    return {torch::nn::functional::cross_entropy(logits.flatten(0, 1), b.y.flatten()), logits};
  }
  // [snippet:perplexity]
  pt::MetricCollection metrics() const { return {pt::metric::Perplexity(/*ignore_index=*/-100)}; }
  // [/snippet:perplexity]
};
}  // namespace

TEST_CASE("metric::Perplexity in a task's metrics(): the validation reports exp of its token-mean loss") {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(6);
  auto tokens = torch::randint(0, 50, {3000}, gen, torch::kLong);
  BigramEval task;
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
  pt::Trainer<BigramEval> t(task, opt);
  pt::data::TokenStream train(tokens, {.block_size = 8, .batch_size = 4, .seed = 1});
  pt::data::TokenStream val(tokens, {.block_size = 8, .batch_size = 4, .seed = 2, .batches_per_epoch = 3});
  const auto r = t.fit(train, val, {.max_steps = 6, .val_every_steps = 3});
  REQUIRE(r.validation.size() == 2);
  for (const auto& m : r.validation)  // equal batches: the loss is the token mean, perplexity its exp
    CHECK(m.get("perplexity") == doctest::Approx(std::exp(m.loss)).epsilon(1e-6));
}

TEST_CASE("the progress bar's rate is in optimizer steps, in a run by epochs too") {
  Plain p;
  auto& [d, task, opt, t0, train] = p;
  std::FILE* out = std::tmpfile();
  pt::Trainer<testing::MlpTask, pt::accumulate::Steps, pt::callbacks::ProgressBar> t(
      task, opt, pt::accumulate::Steps(2), pt::callbacks::ProgressBar({.every = 1, .force_tty = 0, .out = out}));
  t.fit(train, {.epochs = 1});
  const std::string text = drain(out);
  INFO(text);
  CHECK(text.find("epoch 0/0 [") != std::string::npos);
  CHECK(text.find(" steps/s ETA ") != std::string::npos);
  CHECK(text.find("it/s") == std::string::npos);
}
