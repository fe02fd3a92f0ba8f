// Tokens as the unit (issue 52): the tokens a task declares (tokens(batch)) or FitOptions::items_per_sample gives,
// counted for every micro-batch trained and checked against batch x block x micro-batches computed here, with
// accumulation, on one process and summed over 2 ranks (the ranks are this binary, started by
// parallel::launch_local with POLICYTRAIN_TOKENS_WORKER set); tokens/s = tokens / train_seconds; the progress bar's
// rate in optimizer steps (its tokens/s over its steps/s is the tokens of one optimizer step, not of a micro-batch);
// MFU = flops_per_token x tokens/s / peak in FitResult and the metrics log. And a resume whose optimizer asks for
// another weight decay or betas than the checkpoint's: refused, kept or taken, and said (checkpoint::Disk's
// Options::hyperparameters), with LibTorch's own load as the reference for which value a plain load leaves, and
// compared against the run's base values when a schedule moves beta1. And the CPU memory policy of tokens/s
// (PerfKnobs::keep_freed_cpu_memory), in worker processes (POLICYTRAIN_TEST_MALLOC): page faults with and without.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <nlohmann/json.hpp>

#include <policytrain/callbacks/perf_knobs.hpp>
#include <policytrain/data/token_stream.hpp>

#include "helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kVocab = 40;

/// A bigram language model over `kVocab` tokens: logits of the next token from an embedding of this one.
struct Bigram {
  torch::nn::Embedding emb{nullptr};
  Bigram() {
    torch::manual_seed(3);  // the same weights on every rank
    emb = torch::nn::Embedding(kVocab, kVocab);
  }
  torch::nn::Module& module() { return *emb; }
  torch::Tensor training_step(const pt::Batch& b) {
    return torch::nn::functional::cross_entropy(emb->forward(b.x).flatten(0, 1), b.y.flatten());
  }
};

/// The bigram model that counts its tokens: every position of a window is one (batch x block).
struct CountingBigram : Bigram {
  // [snippet:tokens]
  int64_t tokens(const pt::Batch& b) const { return b.x.numel(); }  // batch x block
  // [/snippet:tokens]
};

/// ... and says what a token costs: nanoGPT's 6N (no attention in a bigram model).
struct CostedBigram : CountingBigram {
  // [snippet:flops-per-token]
  double flops_per_token() const { return 6.0 * static_cast<double>(kVocab * kVocab); }  // 6N + 12 L H Q T
  // [/snippet:flops-per-token]
};

torch::Tensor token_corpus(uint64_t seed) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randint(0, kVocab, {4000}, gen, torch::kLong);
}

/// A file that a callback or policy prints into, and what it printed once closed.
struct Printed {
  fs::path path;
  std::FILE* f;
  explicit Printed(fs::path p) : path(std::move(p)), f(std::fopen(path.c_str(), "w")) {}
  std::string text() {
    std::fclose(f);
    return testing::read_text(path);
  }
};

/// The 2-rank worker: rank r trains `PT_TOKENS_STEPS` optimizer steps of 2 micro-batches of 3 windows of 8 + 4 r
/// tokens (the ranks count different tokens, so a sum is told from twice one rank's), and writes its FitResult.
const int kTokensWorker = [] {
  const char* w = std::getenv("POLICYTRAIN_TOKENS_WORKER");
  if (!w || std::string(w) != "ranks") return 0;
  const fs::path out = std::getenv("PT_TOKENS_OUT");
  const int64_t rank = std::atoll(std::getenv("RANK"));
  std::freopen((out / ("stderr" + std::to_string(rank) + ".txt")).c_str(), "w", stderr);
  testing::run_worker_and_exit([&] {
    torch::set_num_threads(1);
    CountingBigram task;
    torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
    pt::Trainer<CountingBigram, pt::accumulate::Steps, pt::parallel::DataParallel> t(task, opt,
                                                                                     pt::accumulate::Steps(2));
    pt::data::TokenStream train(token_corpus(5), {.block_size = 8 + 4 * rank, .batch_size = 3, .seed = 1,
                                                  .rank = rank, .world_size = 2});
    const auto r = t.fit(train, {.max_steps = std::atoll(std::getenv("PT_TOKENS_STEPS"))});
    std::ofstream(out / ("result" + std::to_string(rank) + ".json"))
        << nlohmann::json{{"tokens_seen", r.tokens_seen}, {"tokens_seen_all_ranks", r.tokens_seen_all_ranks},
                          {"train_seconds", r.train_seconds}, {"tokens_per_second", r.tokens_per_second()},
                          {"world_size", r.world_size}, {"global_steps", r.global_steps}}
               .dump();
    return 0;
  });
}();

/// Every "<number> <unit>" of a progress line, e.g. the rate before " steps/s".
std::vector<double> numbers_before(const std::string& text, const std::string& unit) {
  std::vector<double> v;
  const std::regex re("([0-9]+(\\.[0-9]+)?) " + unit);
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) v.push_back(std::stod((*it)[1]));
  return v;
}

}  // namespace

TEST_CASE("tokens counted are batch x block x micro-batches, with accumulation, and tokens/s = tokens / train_seconds") {
  std::mt19937_64 rng(52);
  for (int trial = 0; trial < 4; ++trial) {
    // Seeded shapes: block, batch, accumulation and steps.
    const int64_t block = std::uniform_int_distribution<int64_t>(2, 12)(rng);
    const int64_t batch = std::uniform_int_distribution<int64_t>(1, 5)(rng);
    const int64_t accum = std::uniform_int_distribution<int64_t>(1, 4)(rng);
    const int64_t steps = std::uniform_int_distribution<int64_t>(1, 7)(rng);
    CAPTURE(block);
    CAPTURE(batch);
    CAPTURE(accum);
    CAPTURE(steps);
    const int64_t want = steps * accum * batch * block;
    const pt::data::TokenStreamOptions so{.block_size = block, .batch_size = batch, .seed = 9};
    {  // the task's tokens(batch)
      CountingBigram task;
      torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
      pt::Trainer<CountingBigram, pt::accumulate::Steps> t(task, opt, pt::accumulate::Steps(accum));
      pt::data::TokenStream train(token_corpus(1), so);
      const auto r = t.fit(train, {.max_steps = steps});
      CHECK(r.global_steps == steps);
      CHECK(r.tokens_seen == want);
      CHECK(r.tokens_seen_all_ranks == want);  // one process: itself
      CHECK(t.state().tokens_seen == want);
      CHECK(r.world_size == 1);
      REQUIRE(r.train_seconds > 0);
      CHECK(r.tokens_per_second() == doctest::Approx(static_cast<double>(want) / r.train_seconds).epsilon(1e-12));
      CHECK(r.mfu() == 0);  // no flops_per_token, no peak
      // A second fit counts its own tokens; the state counts the run's.
      const auto r2 = t.fit(train, {.max_steps = 2 * steps});
      CHECK(r2.tokens_seen == want);
      CHECK(t.state().tokens_seen == 2 * want);
    }
    {  // FitOptions::items_per_sample, for a task that does not count
      Bigram task;
      torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
      pt::Trainer<Bigram, pt::accumulate::Steps> t(task, opt, pt::accumulate::Steps(accum));
      pt::data::TokenStream train(token_corpus(1), so);
      const auto r = t.fit(train, {.max_steps = steps, .items_per_sample = block});
      CHECK(r.tokens_seen == want);
      CHECK(r.tokens_seen_all_ranks == want);
      CHECK(r.tokens_per_second() == doctest::Approx(static_cast<double>(want) / r.train_seconds).epsilon(1e-12));
    }
  }
  // Neither: nothing is counted.
  Bigram task;
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
  pt::Trainer<Bigram> t(task, opt);
  pt::data::TokenStream train(token_corpus(1), {.block_size = 4, .batch_size = 2});
  const auto r = t.fit(train, {.max_steps = 3});
  CHECK(r.tokens_seen == 0);
  CHECK(r.tokens_seen_all_ranks == 0);
  CHECK(r.tokens_per_second() == 0);
  CHECK(t.state().tokens_seen == 0);
}

TEST_CASE("tokens over 2 ranks: each rank's count, and the sum over the ranks in tokens_seen_all_ranks and tokens/s") {
  const auto out = testing::temp_dir("tokens-ranks");
  const int64_t steps = 5;
  const int rc = pt::parallel::launch_local({.nproc = 2,
                                             .env = {{"POLICYTRAIN_TOKENS_WORKER", "ranks"},
                                                     {"PT_TOKENS_OUT", out.string()},
                                                     {"PT_TOKENS_STEPS", std::to_string(steps)},
                                                     {"OMP_NUM_THREADS", "1"}},
                                             .deadline = std::chrono::seconds(300)});
  std::string err;
  for (int r = 0; r < 2; ++r) err += testing::read_text(out / ("stderr" + std::to_string(r) + ".txt"));
  INFO(err);
  REQUIRE(rc == 0);
  // Rank r: steps x 2 micro-batches x 3 windows x (8 + 4 r) tokens.
  const int64_t want[2] = {steps * 2 * 3 * 8, steps * 2 * 3 * 12};
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    const auto j = nlohmann::json::parse(testing::read_text(out / ("result" + std::to_string(r) + ".json")));
    CHECK(j["global_steps"] == steps);
    CHECK(j["world_size"] == 2);
    CHECK(j["tokens_seen"] == want[r]);
    CHECK(j["tokens_seen_all_ranks"] == want[0] + want[1]);
    CHECK(j["tokens_per_second"].get<double>() ==
          doctest::Approx(static_cast<double>(want[0] + want[1]) / j["train_seconds"].get<double>()).epsilon(1e-12));
  }
  fs::remove_all(out);
}

TEST_CASE("the progress bar's rate is in optimizer steps: its tokens/s over its steps/s is one step's tokens") {
  // Accumulation of 4 micro-batches of 4 windows of 8 tokens: 128 tokens an optimizer step, 32 a micro-batch. A
  // rate in micro-batches would show 4 times the steps, and tok/s over it a quarter of 128.
  CountingBigram task;
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
  const auto dir = testing::temp_dir("tokens-bar");
  Printed out(dir / "bar.txt");
  pt::Trainer<CountingBigram, pt::accumulate::Steps, pt::callbacks::ProgressBar> t(
      task, opt, pt::accumulate::Steps(4), pt::callbacks::ProgressBar({.every = 1, .force_tty = 0, .out = out.f}));
  pt::data::TokenStream train(token_corpus(2), {.block_size = 8, .batch_size = 4, .seed = 3});
  const auto r = t.fit(train, {.max_steps = 6});
  CHECK(r.tokens_seen == 6 * 128);
  const std::string text = out.text();
  INFO(text);
  int lines = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("step [", 0) != 0) continue;
    const auto steps = numbers_before(line, "steps/s"), tokens = numbers_before(line, "tok/s");
    REQUIRE(steps.size() == 1);
    REQUIRE(tokens.size() == 1);
    CAPTURE(line);
    // Both rates are over the same time; the printed digits bound the difference (steps/s to 0.05, tok/s to 0.5).
    CHECK(std::abs(tokens[0] - 128 * steps[0]) <= 128 * 0.05 + 0.5);
    CHECK(steps[0] > 0);
    ++lines;
  }
  CHECK(lines == 6);
  CHECK(text.find("mfu") == std::string::npos);  // no flops_per_token, no peak
  fs::remove_all(dir);
}

TEST_CASE("MFU = flops_per_token x tokens/s / peak, in FitResult, the progress bar and the metrics log's rows") {
  CostedBigram task;
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
  const auto dir = testing::temp_dir("tokens-mfu");
  Printed out(dir / "bar.txt");
  pt::Trainer<CostedBigram, pt::accumulate::Steps, pt::callbacks::ProgressBar, pt::callbacks::MetricsLog,
              pt::callbacks::TensorBoard>
      t(task, opt, pt::accumulate::Steps(2), pt::callbacks::ProgressBar({.every = 1, .force_tty = 0, .out = out.f}),
        pt::callbacks::MetricsLog({.dir = dir, .print_summary = false}), pt::callbacks::TensorBoard({.dir = dir / "tb"}));
  pt::data::TokenStream train(token_corpus(3), {.block_size = 6, .batch_size = 3, .seed = 4, .batches_per_epoch = 8});
  const double peak = 1e9, fpt = 6.0 * kVocab * kVocab;
  const auto r = t.fit(train, {.epochs = 1, .peak_flops = peak});
  CHECK(r.tokens_seen == 8 * 3 * 6);
  CHECK(r.flops_per_token == fpt);
  CHECK(r.peak_flops == peak);
  CHECK(r.mfu() == doctest::Approx(fpt * r.tokens_per_second() / peak).epsilon(1e-12));
  CHECK(r.mfu() > 0);
  // The metrics log: 36 tokens a step (2 micro-batches of 3 x 6), tokens/s over the step's time, the step's MFU.
  int rows = 0;
  std::istringstream steps(testing::read_text(dir / "steps.jsonl"));
  for (std::string line; std::getline(steps, line); ++rows) {
    const auto j = nlohmann::json::parse(line);
    CAPTURE(line);
    CHECK(j["tokens"] == 36);
    CHECK(j["tokens_per_s"].get<double>() == doctest::Approx(36.0 / j["step_s"].get<double>()).epsilon(1e-12));
    CHECK(j["mfu"].get<double>() == doctest::Approx(fpt * j["tokens_per_s"].get<double>() / peak).epsilon(1e-12));
  }
  CHECK(rows == 4);
  const std::string csv = testing::read_text(dir / "steps.csv");
  CHECK(csv.find(",tokens,tokens_per_s,mfu\n") != std::string::npos);
  const auto epoch = nlohmann::json::parse(testing::read_text(dir / "epochs.jsonl"));
  CHECK(epoch["tokens_per_s"].get<double>() == doctest::Approx(8 * 3 * 6 / epoch["seconds"].get<double>()).epsilon(1e-12));
  CHECK(epoch.contains("mfu"));
  // TensorBoard's scalars are named in its event file (their values are read back by TensorBoard in test_tensorboard).
  std::string events;
  for (const auto& e : fs::directory_iterator(dir / "tb")) events += testing::read_text(e.path());
  CHECK(events.find("train/tokens_per_s") != std::string::npos);
  CHECK(events.find("train/mfu") != std::string::npos);
  const std::string text = out.text();
  INFO(text);
  CHECK(text.find(" tok/s mfu ") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a fit without tokens keeps its logs' columns") {
  Bigram task;
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
  const auto dir = testing::temp_dir("tokens-none");
  pt::Trainer<Bigram, pt::callbacks::MetricsLog> t(task, opt, pt::callbacks::MetricsLog({.dir = dir, .print_summary = false}));
  pt::data::TokenStream train(token_corpus(3), {.block_size = 6, .batch_size = 3, .seed = 4, .batches_per_epoch = 2});
  t.fit(train, {.epochs = 1});
  const std::string csv = testing::read_text(dir / "steps.csv");
  CHECK(csv.find("tokens") == std::string::npos);
  CHECK(testing::read_text(dir / "steps.jsonl").find("tokens") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("fit refuses token settings that cannot mean anything, by name") {
  pt::data::TokenStream train(token_corpus(3), {.block_size = 6, .batch_size = 3});
  {
    CountingBigram task;
    torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
    pt::Trainer<CountingBigram> t(task, opt);
    CHECK_THROWS_WITH_AS(t.fit(train, {.max_steps = 1, .items_per_sample = 6}),
                         doctest::Contains("FitOptions::items_per_sample is 6 and the task declares tokens(batch)"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(t.fit(train, {.max_steps = 1, .peak_flops = 1e12}),
                         doctest::Contains("FitOptions::peak_flops is 1e+12 but the task declares no flops_per_token()"),
                         std::invalid_argument);
  }
  Bigram task;
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
  pt::Trainer<Bigram> t(task, opt);
  CHECK_THROWS_WITH_AS(t.fit(train, {.max_steps = 1, .items_per_sample = -2}),
                       doctest::Contains("FitOptions::items_per_sample is -2"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(t.fit(train, {.max_steps = 1, .peak_flops = -1}), doctest::Contains("FitOptions::peak_flops is -1"),
                       std::invalid_argument);
}

// --- a resume whose optimizer asks for other hyper-parameters than the checkpoint's (issue 52) ---

namespace {

/// A fit to `max_steps` with AdamW(lr, weight decay `wd`, betas `betas`) under checkpoint::Disk in `dir` (resumed when
/// asked, with `h`); returns what Disk said and each group's options after the fit's first step.
struct ResumeOutcome {
  std::string said;
  double weight_decay = 0, beta1 = 0, beta2 = 0;
};

/// The options the first step of a fit ran with.
struct FirstStepOptions {
  std::shared_ptr<std::vector<double>> seen = std::make_shared<std::vector<double>>();
  template <class C>
  void before_step(C& c) {
    if (!seen->empty()) return;
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(c.optimizer().param_groups()[0].options());
    *seen = {o.weight_decay(), std::get<0>(o.betas()), std::get<1>(o.betas())};
  }
};

ResumeOutcome resume_fit(const fs::path& dir, double wd, std::tuple<double, double> betas, int64_t max_steps, bool resume,
                         pt::checkpoint::Disk::Hyperparameters h) {
  CountingBigram task;
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01).weight_decay(wd).betas(betas));
  Printed log(dir.string() + ".log");  // beside the run directory, which holds the run's files only
  FirstStepOptions first;
  pt::Trainer<CountingBigram, pt::checkpoint::Disk, FirstStepOptions> t(
      task, opt,
      pt::checkpoint::Disk({.directory = dir, .resume = resume ? "auto" : "", .hyperparameters = h,
                            .export_final = false, .log = log.f}),
      first);
  pt::data::TokenStream train(token_corpus(4), {.block_size = 6, .batch_size = 3, .seed = 2});
  std::string said;
  try {
    t.fit(train, {.max_steps = max_steps});
  } catch (const std::exception& e) {
    said = std::string("threw: ") + e.what() + "\n";
  }
  said += log.text();
  ResumeOutcome o{said};
  if (first.seen->size() == 3) std::tie(o.weight_decay, o.beta1, o.beta2) = std::tie((*first.seen)[0], (*first.seen)[1], (*first.seen)[2]);
  return o;
}

}  // namespace

TEST_CASE("LibTorch's Optimizer::load gives the group the file's options: a plain load keeps the checkpoint's weight decay and betas") {
  // The reference for what checkpoint::load (and so a resume) leaves in the optimizer: LibTorch's own save and load.
  CountingBigram a, b;
  torch::optim::AdamW saved(a.module().parameters(), torch::optim::AdamWOptions(0.01).weight_decay(0.05).betas({0.9, 0.95}));
  torch::optim::AdamW loaded(b.module().parameters(), torch::optim::AdamWOptions(0.01).weight_decay(0.2).betas({0.8, 0.99}));
  std::stringstream bytes;
  torch::save(saved, bytes);
  torch::load(loaded, bytes);
  const auto& o = static_cast<const torch::optim::AdamWOptions&>(loaded.param_groups()[0].options());
  CHECK(o.weight_decay() == 0.05);
  CHECK(std::get<0>(o.betas()) == 0.9);
  CHECK(std::get<1>(o.betas()) == 0.95);
}

TEST_CASE("a resume with another weight decay and betas: refused by default, kept or taken on request, and said") {
  using H = pt::checkpoint::Disk::Hyperparameters;
  const auto dir = testing::temp_dir("tokens-hyper");
  (void)resume_fit(dir, 0.05, {0.9, 0.95}, 4, false, H::refuse);
  const auto keep_dir = testing::temp_dir("tokens-hyper-keep"), take_dir = testing::temp_dir("tokens-hyper-take");
  fs::copy(dir, keep_dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::copy(dir, take_dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  SUBCASE("refuse (the default): another run, each difference named") {
    const auto o = resume_fit(dir, 0.1, {0.8, 0.95}, 8, true, H::refuse);
    INFO(o.said);
    CHECK(o.said.find("threw: ") != std::string::npos);
    CHECK(o.said.find("optimizer parameter group 0 weight_decay: 0.05 in the checkpoint, 0.1 in this run") !=
          std::string::npos);
  }
  SUBCASE("keep: the checkpoint's, and which this run asked otherwise") {
    const auto o = resume_fit(keep_dir, 0.1, {0.8, 0.95}, 8, true, H::keep);
    INFO(o.said);
    CHECK(o.said.find("threw") == std::string::npos);
    CHECK(o.said.find("policytrain::checkpoint: resumed with other optimizer settings than the checkpoint's: param "
                      "group 0 betas [0.9,0.95] kept (the checkpoint's [0.9,0.95]; this run's optimizer asks [0.8,0.95]); "
                      "param group 0 weight_decay 0.05 kept (the checkpoint's 0.05; this run's optimizer asks 0.1) "
                      "(checkpoint::Disk::Options::hyperparameters = Hyperparameters::take takes this run's instead)") !=
          std::string::npos);
    CHECK(o.weight_decay == 0.05);
    CHECK(o.beta1 == 0.9);
    // The next resume with the same command is told again: the run went on with the checkpoint's values.
    const auto again = resume_fit(keep_dir, 0.1, {0.8, 0.95}, 10, true, H::keep);
    INFO(again.said);
    CHECK(again.said.find("weight_decay 0.05 kept") != std::string::npos);
    CHECK(again.weight_decay == 0.05);
  }
  SUBCASE("take: this run's, said as taken") {
    const auto o = resume_fit(take_dir, 0.1, {0.8, 0.95}, 8, true, H::take);
    INFO(o.said);
    CHECK(o.said.find("param group 0 betas [0.8,0.95] taken (the checkpoint's [0.9,0.95]; this run's optimizer asks "
                      "[0.8,0.95]); param group 0 weight_decay 0.1 taken (the checkpoint's 0.05; this run's optimizer "
                      "asks 0.1) (checkpoint::Disk::Options::hyperparameters = Hyperparameters::keep continues the "
                      "checkpoint's instead)") != std::string::npos);
    CHECK(o.weight_decay == 0.1);
    CHECK(o.beta1 == 0.8);
    CHECK(o.beta2 == 0.95);
  }
  SUBCASE("the same values: nothing to say") {
    const auto o = resume_fit(keep_dir, 0.05, {0.9, 0.95}, 8, true, H::keep);
    INFO(o.said);
    CHECK(o.said.find("other optimizer settings") == std::string::npos);
    CHECK(o.said.find("threw") == std::string::npos);
  }
  for (const auto& d : {dir, keep_dir, take_dir}) {
    fs::remove_all(d);
    fs::remove(d.string() + ".log");
  }
}

TEST_CASE("schedule::Lr says a momentum kept or taken only where it sets the momentum, the checkpoint the rest") {
  using H = pt::checkpoint::Disk::Hyperparameters;
  const auto dir = testing::temp_dir("tokens-lr-momentum");
  auto fit = [&](double beta1, int64_t max_steps, bool resume, pt::schedule::OnResume on_resume, H h) {
    CountingBigram task;
    torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01).betas({beta1, 0.999}));
    Printed log(dir.string() + ".log");
    FirstStepOptions first;
    pt::Trainer<CountingBigram, pt::schedule::Lr, pt::checkpoint::Disk, FirstStepOptions> t(
        task, opt, pt::schedule::Lr({.kind = pt::schedule::Kind::cosine, .on_resume = on_resume, .log = log.f}),
        pt::checkpoint::Disk({.directory = dir, .resume = resume ? "auto" : "", .hyperparameters = h,
                              .export_final = false, .log = log.f}),
        first);
    pt::data::TokenStream train(token_corpus(4), {.block_size = 6, .batch_size = 3, .seed = 2});
    t.fit(train, {.max_steps = max_steps});
    return std::pair{log.text(), (*first.seen)[1]};
  };
  (void)fit(0.9, 4, false, pt::schedule::OnResume::keep, H::keep);
  // The schedule takes (its lr) while the checkpoint keeps the betas: the step runs at the checkpoint's beta1, and
  // nothing says the momentum was taken.
  const auto [said, beta1] = fit(0.8, 8, true, pt::schedule::OnResume::take, H::keep);
  INFO(said);
  CHECK(beta1 == 0.9);
  CHECK(said.find("base momentum") == std::string::npos);
  CHECK(said.find("param group 0 betas [0.9,0.999] kept") != std::string::npos);
  fs::remove_all(dir);
  fs::remove(dir.string() + ".log");
}

TEST_CASE("a resume under a schedule that cycles beta1 compares the checkpoint's base values, not the moved beta1") {
  // onecycle moves beta1 at every step, so the optimizer a checkpoint holds is at a moved beta1; the run's base
  // values are the fingerprint's. A resume with the same command has nothing to say; one with another weight decay
  // names the weight decay only.
  using H = pt::checkpoint::Disk::Hyperparameters;
  const auto dir = testing::temp_dir("tokens-onecycle-hyper");
  auto fit = [&](double wd, int64_t max_steps, bool resume, H h) {
    CountingBigram task;
    torch::optim::AdamW opt(task.module().parameters(),
                            torch::optim::AdamWOptions(0.01).weight_decay(wd).betas({0.9, 0.999}));
    Printed log(dir.string() + ".log");
    FirstStepOptions first;
    pt::Trainer<CountingBigram, pt::schedule::Lr, pt::checkpoint::Disk, FirstStepOptions> t(
        task, opt, pt::schedule::Lr({.kind = pt::schedule::Kind::onecycle, .total_steps = 12, .log = log.f}),
        pt::checkpoint::Disk({.directory = dir, .resume = resume ? "auto" : "", .hyperparameters = h,
                              .export_final = false, .log = log.f}),
        first);
    pt::data::TokenStream train(token_corpus(4), {.block_size = 6, .batch_size = 3, .seed = 2});
    t.fit(train, {.max_steps = max_steps});
    return log.text();
  };
  (void)fit(0.05, 5, false, H::keep);
  int64_t steps = 5;
  for (const H h : {H::keep, H::take}) {
    const std::string same = fit(0.05, steps += 2, true, h);
    INFO(same);
    CHECK(same.find("resumed from") != std::string::npos);
    CHECK(same.find("other optimizer settings") == std::string::npos);
  }
  const std::string other = fit(0.1, steps + 2, true, H::keep);
  INFO(other);
  CHECK(other.find("resumed with other optimizer settings than the checkpoint's: param group 0 weight_decay 0.05 kept "
                   "(the checkpoint's 0.05; this run's optimizer asks 0.1) (checkpoint::Disk::Options::hyperparameters "
                   "= Hyperparameters::take takes this run's instead)") != std::string::npos);
  CHECK(other.find("betas") == std::string::npos);
  fs::remove_all(dir);
  fs::remove(dir.string() + ".log");
}

// --- the CPU memory policy: glibc's malloc keeps the blocks a step frees (issue 52's speed) ---

namespace {

/// A worker process (POLICYTRAIN_TEST_MALLOC = "on" or "off", PerfKnobs::keep_freed_cpu_memory): twelve "steps",
/// each allocating k tensors of S bytes (a seeded generator picks k and S: POLICYTRAIN_TEST_MALLOC_SEED), writing
/// every page and freeing them all, as a training step does with its activations; then a few steps of an MLP.
/// Prints whether glibc took the settings, the page faults of the last three steps, and the MLP's last loss (hex).
const int kMallocWorker = [] {
  const char* mode = std::getenv("POLICYTRAIN_TEST_MALLOC");
  if (!mode) return 0;
  testing::run_worker_and_exit([&] {
#if defined(__GLIBC__)
    // glibc's documented default thresholds (128 KiB), as a fresh process starts with, whatever LibTorch's own
    // start-up allocations have moved its dynamic threshold to: the policy (on) is the only difference.
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
#endif
    pt::callbacks::PerfKnobs knobs({.keep_freed_cpu_memory = std::string(mode) == "on"});
    knobs.apply();
    std::mt19937_64 gen(std::strtoull(std::getenv("POLICYTRAIN_TEST_MALLOC_SEED"), nullptr, 10));
    const uint64_t k = 3 + gen() % 6;                                     // 3 to 8 tensors
    const auto floats = static_cast<int64_t>((1 + gen() % 4) << 20) / 4;  // of 1 to 4 MiB
    auto faults = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return static_cast<long long>(u.ru_minflt);
    };
    std::string line = knobs.describe()["keep_freed_cpu_memory"].get<bool>() ? "taken" : "not-taken";
    // LibTorch allocates with posix_memalign, whose placements settle after a few steps: the last three count.
    for (int step = 0; step < 12; ++step) {
      const long long before = faults();
      {
        std::vector<torch::Tensor> live;
        for (uint64_t i = 0; i < k; ++i) live.push_back(torch::full({floats}, static_cast<float>(step)));
      }
      if (step >= 9) line += " " + std::to_string(faults() - before);
    }
    torch::manual_seed(3);
    testing::Mlp net(8, 64, 3);
    torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(1e-2));
    torch::Tensor loss;
    for (int step = 0; step < 5; ++step) {
      const auto x = torch::randn({256, 8});
      loss = torch::nn::functional::cross_entropy(net->forward(x), (x.sum(1) > 0).to(torch::kLong));
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    // glibc's fastbins (M_MXFAST, on by default for blocks up to 128 bytes): after glibc's per-thread cache (7 a
    // size) has taken its share, 64 freed blocks of 48 bytes go to them, unless the policy turned them off.
    size_t fastbin_blocks = 0;
#if defined(__GLIBC__)
    std::vector<void*> small;
    for (int i = 0; i < 64; ++i) small.push_back(std::malloc(48));
    for (void* b : small) std::free(b);
    fastbin_blocks = mallinfo2().smblks;
#endif
    std::printf("%s %a %zu\n", line.c_str(), loss.item<double>(), fastbin_blocks);
    return 0;
  });
}();

/// The worker's line for `mode` and `seed`, split into words.
std::vector<std::string> malloc_worker(const std::string& mode, uint64_t seed) {
  const std::string cmd = "POLICYTRAIN_TEST_MALLOC=" + mode + " POLICYTRAIN_TEST_MALLOC_SEED=" + std::to_string(seed) +
                          " OMP_NUM_THREADS=1 " + fs::read_symlink("/proc/self/exe").string();  // not the shell's
  std::FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  REQUIRE_MESSAGE(::pclose(p) == 0, out);
  std::istringstream in(out);
  std::vector<std::string> words{std::istream_iterator<std::string>(in), {}};
  REQUIRE_MESSAGE(words.size() == 6, out);
  return words;
}

}  // namespace

TEST_CASE("PerfKnobs::keep_freed_cpu_memory: a step's freed blocks serve the next step without page faults, no fastbins, same losses") {
  // glibc's default thresholds (off) are the oracle for what the policy changes: a block above the mmap threshold is
  // unmapped when freed and the heap's free top above the trim threshold returned to the system, so every step
  // faults its blocks in again; with the policy a settled step faults (almost) none. k and S from a seeded
  // generator; a page is 4 KiB. Another C library than glibc: nothing is set, nothing to compare.
#if !defined(__GLIBC__)
  return;
#endif
  for (const uint64_t seed : {1u, 2u, 3u, 4u}) {
    CAPTURE(seed);
    const auto on = malloc_worker("on", seed), off = malloc_worker("off", seed);
    CHECK(on[0] == "taken");
    CHECK(off[0] == "not-taken");
    std::mt19937_64 gen(seed);
    const uint64_t k = 3 + gen() % 6;
    const auto pages = static_cast<long long>(k * ((1 + gen() % 4) << 20) / 4096);
    for (size_t step = 1; step <= 3; ++step) {
      CAPTURE(step);
      CHECK(std::stoll(off[step]) > pages / 2);
      CHECK(std::stoll(on[step]) < pages / 20);
    }
    CHECK(on[4] == off[4]);  // the arithmetic is the same, bit for bit
    // Fastbins off with the policy (bf16 tiny_lm swept them 6% of its time): no freed block lands in one.
    CHECK(std::stoll(on[5]) == 0);
    CHECK(std::stoll(off[5]) >= 64 - 7);
  }
}
