// Data parallel on c10d with real processes on loopback (Gloo, CPU): equivalence with one process, no-sync on
// accumulation micro-steps, a dead or hung rank, a bad environment. The ranks are this test binary itself,
// started by parallel::launch_local with POLICYTRAIN_TEST_WORKER set: a static initialiser runs the worker
// before doctest's main and exits.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;
using testing::MlpTask;

namespace {

constexpr int64_t kGlobalBatch = 16;
constexpr int64_t kEpochs = 2;
constexpr double kBucketMb = 256.0 / (1024 * 1024);  // 256 bytes: the MLP's 4 tensors fall into 3 buckets

/// Accumulates `every` micro-batches per optimizer step, averaging them (a minimal accumulation policy).
struct AccumulateEvery {
  static constexpr pt::Category category = pt::Category::accumulation;
  int64_t every = 1;
  template <class C> torch::Tensor transform_loss(C&, torch::Tensor l) { return l / static_cast<double>(every); }
  template <class C> bool should_step(C& c) { return c.state().micro_step % every == 0; }
};

/// Counts the all-reduce calls of each optimizer step (read in after_step, after the parallel policy's before_step).
struct CountPerStep {
  std::vector<int64_t>* per_step;
  template <class C> void after_step(C& c, bool) {
    per_step->push_back(c.template policy<pt::Category::parallel>().allreduce_calls_last_step());
  }
};

/// Kills (SIGKILL) or hangs (SIGSTOP) this process at a given step on a given rank.
struct FailAt {
  int rank = 1;
  int64_t step = 3;
  int sig = SIGKILL;
  template <class C> void after_step(C& c, bool) {
    if (c.template policy<pt::Category::parallel>().rank() == rank && c.state().global_step == step) ::raise(sig);
  }
};

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }
std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<torch::Tensor> params_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> v;
  for (auto& p : m.parameters()) v.push_back(p.detach().clone());
  return v;
}

/// One rank of a scenario. Writes its parameters and counters under POLICYTRAIN_TEST_OUT.
int run_worker(const std::string& scenario, const fs::path& out) {
  const int64_t accumulate = scenario == "accumulate" ? 2 : 1;
  pt::parallel::DataParallel dp({.timeout = std::chrono::milliseconds(4000), .bucket_mb = kBucketMb});
  const int world = dp.world_size(), rank = dp.rank();
  // Every rank starts from different weights: the broadcast from rank 0 must make them equal.
  MlpTask task(1 + static_cast<uint64_t>(rank));
  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = kGlobalBatch / world / accumulate, .shuffle = true, .seed = 3,
                                       .rank = rank, .world_size = world});
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::vector<int64_t> per_step;
  const bool fail = scenario == "kill" || scenario == "hang";
  pt::Trainer<MlpTask, pt::parallel::DataParallel, AccumulateEvery, CountPerStep, FailAt> trainer(
      task, opt, std::move(dp), AccumulateEvery{accumulate}, CountPerStep{&per_step},
      FailAt{fail ? 1 : -1, 3, scenario == "hang" ? SIGSTOP : SIGKILL});
  trainer.fit(loader, {.epochs = fail ? 1000 : kEpochs});
  auto& p = trainer.policy<pt::Category::parallel>();
  // Evaluation on this rank's shard; reduce_metrics makes it the evaluation of the whole set.
  pt::data::TensorLoader eval(x, y, {.batch_size = 10, .shuffle = false, .rank = rank, .world_size = world});
  const auto m = trainer.evaluate(eval);
  write_text(out / fmt::format("metrics{}.txt", rank), fmt::format("{} {:.17g} {:.17g}", m.samples, m.loss, m.accuracy));
  torch::save(params_of(task.module()), (out / fmt::format("params{}.pt", rank)).string());
  write_text(out / fmt::format("counts{}.txt", rank),
             fmt::format("{} {} {} {} {}", p.bucket_count(), p.allreduce_calls(), p.allreduce_calls_in_hooks(),
                         trainer.state().global_step, fmt::join(per_step, " ")));
  return 0;
}

/// Runs the worker when this process is one of the ranks, before doctest sees the command line.
const int kWorkerHook = [] {
  const char* scenario = std::getenv("POLICYTRAIN_TEST_WORKER");
  if (!scenario) return 0;
  const fs::path out = std::getenv("POLICYTRAIN_TEST_OUT");
  const std::string rank = std::getenv("RANK") ? std::getenv("RANK") : "0";
  std::freopen((out / ("stderr" + rank + ".txt")).c_str(), "w", stderr);
  int code = 0;
  try {
    code = run_worker(scenario, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker error: %s\n", e.what());
    code = 3;
  }
  std::fflush(nullptr);
  std::_Exit(code);
}();

/// Starts `nproc` ranks of this binary in `scenario`; returns launch_local's exit code.
int launch(const std::string& scenario, const fs::path& out, int nproc, bool stop_others = true) {
  return pt::parallel::launch_local({.nproc = nproc,
                                     .env = {{"POLICYTRAIN_TEST_WORKER", scenario},
                                             {"POLICYTRAIN_TEST_OUT", out.string()},
                                             {"OMP_NUM_THREADS", "1"}},
                                     .stop_others_on_failure = stop_others,
                                     .deadline = std::chrono::seconds(60)});
}

std::vector<int64_t> counts(const fs::path& p) {
  std::istringstream in(read_text(p));
  std::vector<int64_t> v;
  for (int64_t x; in >> x;) v.push_back(x);
  return v;
}

std::vector<double> counts_d(const fs::path& p) {
  std::istringstream in(read_text(p));
  std::vector<double> v;
  for (double x; in >> x;) v.push_back(x);
  return v;
}

/// The same training in this process: global batch B on one rank, by a plain Trainer.
std::vector<torch::Tensor> reference(int64_t accumulate, pt::Metrics* metrics = nullptr) {
  MlpTask task(1);
  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = kGlobalBatch / accumulate, .shuffle = true, .seed = 3});
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  pt::Trainer<MlpTask, AccumulateEvery> trainer(task, opt, AccumulateEvery{accumulate});
  trainer.fit(loader, {.epochs = kEpochs});
  if (metrics) {
    pt::data::TensorLoader eval(x, y, {.batch_size = 10, .shuffle = false});
    *metrics = trainer.evaluate(eval);
  }
  return params_of(task.module());
}

double max_abs_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

std::vector<torch::Tensor> load_params(const fs::path& p) {
  std::vector<torch::Tensor> v;
  torch::load(v, p.string());
  return v;
}

/// Sets environment variables for the scope of one check, restoring them afterwards.
struct ScopedEnv {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [k, v] : vars) {
      const char* old = std::getenv(k);
      saved.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      if (v) ::setenv(k, v, 1);
      else ::unsetenv(k);
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }
};

std::string connect_error(std::initializer_list<std::pair<const char*, const char*>> vars) {
  ScopedEnv env(vars);
  try {
    pt::parallel::DataParallel dp({.timeout = std::chrono::milliseconds(1500)});
    dp.connect();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("2 ranks with batch B/2 each end with the parameters of 1 process with batch B, buckets launch from hooks, "
          "metrics reduce") {
  const auto out = testing::temp_dir("dp-equal");
  REQUIRE(launch("plain", out, 2) == 0);
  pt::Metrics want_metrics;
  const auto want = reference(1, &want_metrics);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << read_text(out / fmt::format("stderr{}.txt", r)));
    CHECK(max_abs_diff(load_params(out / fmt::format("params{}.pt", r)), want) < 1e-5);
    const auto c = counts(out / fmt::format("counts{}.txt", r));
    REQUIRE(c.size() >= 4);
    const int64_t buckets = c[0], calls = c[1], in_hooks = c[2], steps = c[3];
    CHECK(buckets == 3);
    CHECK(steps == kEpochs * 96 / kGlobalBatch);
    CHECK(calls == buckets * steps);
    CHECK(in_hooks == calls);  // every bucket was launched while backward still ran
    // Validation metrics reduced over the two shards equal those of the whole set in one process.
    const auto m = counts_d(out / fmt::format("metrics{}.txt", r));
    REQUIRE(m.size() == 3);
    CHECK(m[0] == 96);
    CHECK(m[1] == doctest::Approx(want_metrics.loss).epsilon(1e-5));
    CHECK(m[2] == doctest::Approx(want_metrics.accuracy));
  }
  // The initial weights differed per rank; the broadcast made them equal, so the results are identical.
  CHECK(max_abs_diff(load_params(out / "params0.pt"), load_params(out / "params1.pt")) == 0.0);
}

TEST_CASE("with accumulation, 2 ranks match 1 process and all-reduce only on the last micro-step") {
  const auto out = testing::temp_dir("dp-accumulate");
  REQUIRE(launch("accumulate", out, 2) == 0);
  const auto want = reference(2);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << read_text(out / fmt::format("stderr{}.txt", r)));
    CHECK(max_abs_diff(load_params(out / fmt::format("params{}.pt", r)), want) < 1e-5);
    const auto c = counts(out / fmt::format("counts{}.txt", r));
    const int64_t buckets = c[0], calls = c[1], steps = c[3];
    CHECK(steps == kEpochs * 96 / kGlobalBatch);
    CHECK(calls == buckets * steps);  // not buckets × 2 micro-steps
    REQUIRE(c.size() == static_cast<size_t>(4 + steps));
    for (int64_t s = 0; s < steps; ++s) CHECK(c[4 + s] == buckets);
  }
}

TEST_CASE("a rank that dies or hangs: the other exits non-zero naming the collective and the silent rank") {
  for (const std::string scenario : {"kill", "hang"}) {
    CAPTURE(scenario);
    const auto out = testing::temp_dir("dp-" + scenario);
    // A killed rank must not make the launcher stop the survivor before it reports; a hung one is stopped
    // by the launcher once the survivor has failed.
    const int code = launch(scenario, out, 2, /*stop_others=*/scenario == "hang");
    CHECK(code != 0);
    CHECK(code != 124);  // the survivor failed by itself, well before the launcher's deadline
    const std::string err = read_text(out / "stderr0.txt");
    CHECK(err.find("rank 0 of 2") != std::string::npos);
    CHECK(err.find("all-reduce of gradient bucket") != std::string::npos);
    CHECK(err.find("rank 1 did not answer") != std::string::npos);
    CHECK(!fs::exists(out / "params0.pt"));
  }
}

TEST_CASE("a bad environment gives an error naming the variable and its value") {
  SUBCASE("WORLD_SIZE > 1 without RANK") {
    const auto e = connect_error({{"WORLD_SIZE", "2"}, {"RANK", nullptr}});
    CHECK(e.find("WORLD_SIZE=2 but RANK is not set") != std::string::npos);
  }
  SUBCASE("RANK out of range") {
    const auto e = connect_error({{"WORLD_SIZE", "2"}, {"RANK", "2"}});
    CHECK(e.find("RANK=2 but WORLD_SIZE=2") != std::string::npos);
  }
  SUBCASE("MASTER_PORT not a port") {
    const auto e = connect_error({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "http"}});
    CHECK(e.find("MASTER_PORT='http'") != std::string::npos);
  }
  SUBCASE("MASTER_PORT in use") {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    const std::string port = std::to_string(ntohs(a.sin_port));
    const auto e = connect_error({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port.c_str()}});
    ::close(fd);
    CHECK(e.find("could not open the store at MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port) != std::string::npos);
    CHECK(e.find("port in use") != std::string::npos);
  }
  SUBCASE("nobody at MASTER_ADDR:MASTER_PORT") {
    const std::string port = std::to_string(pt::parallel::free_port());
    const auto e = connect_error({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port.c_str()}});
    CHECK(e.find("rank 1 could not reach the store at MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port) != std::string::npos);
  }
  SUBCASE("WORLD_SIZE unset: one process, no process group, identity agreement") {
    ScopedEnv env({{"WORLD_SIZE", nullptr}, {"RANK", nullptr}});
    pt::parallel::DataParallel dp;
    CHECK_FALSE(dp.active());
    CHECK(dp.is_main());
    CHECK(dp.world_size() == 1);
  }
}
