// memory::recompute under data parallel (2 ranks, Gloo on loopback): the gradients computed inside the recompute
// reach the parallel policy once each, so 2 ranks with batch B/2 and recompute end with the parameters of one
// process with batch B and no recompute. Public API only (parallel::DataParallel, parallel::launch_local): the
// ranks are this binary, started with POLICYTRAIN_RECOMPUTE_WORKER set; a static initialiser runs the worker
// before doctest's main.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <policytrain/memory/recompute.hpp>
#include <policytrain/parallel.hpp>

#include "unit/deep_mlp.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kGlobalBatch = 16, kEpochs = 2, kWidth = 24, kDepth = 6;

/// A deep MLP (blocks Linear -> GELU), every block recomputed when `recompute` (recompute_sequential); with
/// `wrapped` the last layer is a memory::Recomputed module instead (recomputed by itself).
struct DeepTask {
  torch::nn::Sequential net;
  bool recompute;
  explicit DeepTask(bool rc, uint64_t seed = 1, bool wrapped = false) : recompute(rc && !wrapped) {
    torch::manual_seed(seed);
    net->push_back(torch::nn::Linear(8, kWidth));
    for (int64_t i = 0; i < kDepth; ++i)
      net->push_back(testing::MlpBlock(kWidth, 0.0));
    if (wrapped) net->push_back(pt::memory::Recomputed<torch::nn::Linear>(torch::nn::Linear(kWidth, 3)));
    else net->push_back(torch::nn::Linear(kWidth, 3));
  }
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) {
    auto out = recompute ? pt::memory::recompute_sequential(net, 1, b.x) : net->forward(b.x);
    return torch::nn::functional::cross_entropy(out, b.y);
  }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = net->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};

std::vector<torch::Tensor> params_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> v;
  for (auto& p : m.parameters()) v.push_back(p.detach().clone());
  return v;
}

/// POLICYTRAIN_RECOMPUTE_OPTIONS: default, static (static_graph), unused (find_unused_parameters), unused-wrapped
/// (find_unused_parameters, the model holding a Recomputed module).
int run_worker(const fs::path& out) {
  const std::string mode = std::getenv("POLICYTRAIN_RECOMPUTE_OPTIONS") ? std::getenv("POLICYTRAIN_RECOMPUTE_OPTIONS") : "default";
  pt::parallel::DataParallel dp({.find_unused_parameters = mode.starts_with("unused"), .static_graph = mode == "static"});
  const int world = dp.world_size(), rank = dp.rank();
  // rank 0's weights are broadcast
  DeepTask task(/*recompute=*/true, 1 + static_cast<uint64_t>(rank), /*wrapped=*/mode == "unused-wrapped");
  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = kGlobalBatch / world, .shuffle = true, .seed = 3,
                                       .rank = rank, .world_size = world});
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  pt::Trainer<DeepTask, pt::parallel::DataParallel> trainer(task, opt, std::move(dp));
  trainer.fit(loader, {.epochs = kEpochs});
  torch::save(params_of(task.module()), (out / fmt::format("params{}.pt", rank)).string());
  return 0;
}

const int kWorkerHook = [] {
  if (!std::getenv("POLICYTRAIN_RECOMPUTE_WORKER")) return 0;
  const fs::path out = std::getenv("POLICYTRAIN_RECOMPUTE_WORKER");
  const std::string rank = std::getenv("RANK") ? std::getenv("RANK") : "0";
  std::freopen((out / ("stderr" + rank + ".txt")).c_str(), "w", stderr);
  int code = 0;
  try {
    code = run_worker(out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker error: %s\n", e.what());
    code = 3;
  }
  std::fflush(nullptr);
  std::_Exit(code);
}();

std::vector<torch::Tensor> reference(bool recompute) {
  DeepTask task(recompute, 1);
  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = kGlobalBatch, .shuffle = true, .seed = 3});
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  pt::Trainer<DeepTask> trainer(task, opt);
  trainer.fit(loader, {.epochs = kEpochs});
  return params_of(task.module());
}

double max_abs_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Runs 2 ranks of the worker with `mode`; returns the exit status (the ranks' stderr is in `out`). A rank that
/// fails stops the other unless `each_to_its_end` (a refusal that every rank reaches by itself).
int run_ranks(const fs::path& out, const std::string& mode, bool each_to_its_end = false) {
  return pt::parallel::launch_local({.nproc = 2,
                                     .env = {{"POLICYTRAIN_RECOMPUTE_WORKER", out.string()},
                                             {"POLICYTRAIN_RECOMPUTE_OPTIONS", mode},
                                             {"OMP_NUM_THREADS", "1"}},
                                     .stop_others_on_failure = !each_to_its_end,
                                     .deadline = std::chrono::seconds(120)});
}

void check_against_one_process(const std::string& mode) {
  const auto out = testing::temp_dir("recompute-dp-" + mode);
  const int code = run_ranks(out, mode);
  INFO("rank 0: " << read_text(out / "stderr0.txt") << "\nrank 1: " << read_text(out / "stderr1.txt"));
  REQUIRE(code == 0);
  const auto want = reference(/*recompute=*/false);
  // In one process recompute changes nothing, bit for bit.
  CHECK(max_abs_diff(reference(/*recompute=*/true), want) == 0.0);
  for (int r = 0; r < 2; ++r) {
    std::vector<torch::Tensor> got;
    torch::load(got, (out / fmt::format("params{}.pt", r)).string());
    // Not bit for bit: the 2 ranks sum the half-batch gradients in another order than 1 process.
    CHECK(max_abs_diff(got, want) < 1e-5);
    // A gradient counted twice (or lost) moves the weights by about lr x gradient, far above this bound.
  }
  fs::remove_all(out);
}

}  // namespace

TEST_CASE("2 ranks with recompute and batch B/2 each end with the parameters of 1 process with batch B") {
  check_against_one_process("default");
}

// Every layer recomputed: every gradient is accumulated inside a nested (reentrant) backward. The static graph's
// delayed all-reduce once ran at the end of the first of them and averaged the last layer only: the ranks
// diverged silently.
TEST_CASE("2 ranks with recompute and static_graph end with the parameters of 1 process") {
  check_against_one_process("static");
}

// find_unused_parameters (without static_graph) cannot see the parameters of a recomputed segment: refused on
// every rank before the first gradient is synchronised, naming the fix.
TEST_CASE("find_unused_parameters with recompute is refused with a message naming static_graph") {
  for (const std::string mode : {"unused", "unused-wrapped"}) {
    CAPTURE(mode);
    const auto out = testing::temp_dir("recompute-dp-" + mode);
    const int code = run_ranks(out, mode, /*each_to_its_end=*/true);
    CHECK(code != 0);
    for (int r = 0; r < 2; ++r) {
      const std::string err = read_text(out / fmt::format("stderr{}.txt", r));
      INFO("rank " << r << ": " << err);
      CHECK(err.find("find_unused_parameters = true") != std::string::npos);
      CHECK(err.find("Set static_graph = true in DataParallelOptions") != std::string::npos);
      // The Recomputed module is found at fit begin, a recompute() call after the first forward.
      CHECK(err.find(mode == "unused" ? "the forward called memory::recompute" : "memory::Recomputed module '7'") !=
            std::string::npos);
    }
    fs::remove_all(out);
  }
}

