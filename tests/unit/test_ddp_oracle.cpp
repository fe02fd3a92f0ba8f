// parallel::DataParallel side by side with PyTorch's DistributedDataParallel, the oracle. For each scenario,
// torchrun (--nproc-per-node 2, Gloo) runs tests/integration/ddp_oracle.py, which writes the data set and the
// initial weights and trains with DDP; then 2 ranks of this binary (started by parallel::launch_local, or by two
// torchrun "nodes" on loopback) load the same data and weights and train the same model (an MLP with batch norm and
// one parameter its forward never uses) with the same shards and AdamW. After the last step every rank's
// parameters, buffers (batch-norm statistics, broadcast from rank 0 before each window's forward) and AdamW state
// (exp_avg, exp_avg_sq, step) equal DDP's rank's within 1e-6. A worker is this binary with POLICYTRAIN_ORACLE_WORKER
// set: a static initialiser runs it before doctest's main and exits.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include <policytrain/memory/recompute.hpp>
#include <policytrain/parallel.hpp>

#include "unit/helpers.hpp"
#include "unit/oracle_tensors.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kIn = 8, kHidden = 16, kOut = 3, kEpochs = 2, kGlobalBatch = 16;
constexpr double kLr = 0.01, kWd = 0.1;

/// The model of ddp_oracle.py, with the same parameter and buffer names.
struct NetImpl : torch::nn::Module {
  NetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(kIn, kHidden))),
        bn(register_module("bn", torch::nn::BatchNorm1d(kHidden))),
        fc2(register_module("fc2", torch::nn::Linear(kHidden, kOut))) {
    unused = register_parameter("unused", torch::ones({4}));  // never used by forward
  }
  torch::Tensor forward(torch::Tensor x) {
    if (!recompute) return fc2(bn(torch::tanh(fc1(x))));
    // As ddp_oracle.py's rc-* scenarios: fc1 + tanh and fc2 each recomputed in backward.
    auto h = pt::memory::recompute([this](const torch::Tensor& t) { return torch::tanh(fc1(t)); }, x);
    return pt::memory::recompute([this](const torch::Tensor& t) { return fc2(t); }, bn(h));
  }
  bool recompute = false;
  torch::nn::Linear fc1;
  torch::nn::BatchNorm1d bn;
  torch::nn::Linear fc2;
  torch::Tensor unused;
};
TORCH_MODULE(Net);

struct NetTask {
  Net net;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) {
    return torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
  }
};

using testing::oracle::Tensors;
using testing::oracle::load_tensors;
using testing::oracle::save_tensors;

/// After the last step: how many gradients are views into one of c10d::Reducer's buckets (gradient_as_bucket_view).
struct CountBucketViews {
  int64_t* views;
  template <class C> void after_step(C& c, bool) {
    auto* reducer = c.template policy<pt::Category::parallel>().reducer();
    if (!reducer) return;
    const auto buckets = reducer->get_grad_buckets(/*return_zero_tensors=*/false);
    *views = 0;
    for (auto& p : c.module().parameters())
      if (p.grad().defined())
        for (const auto& b : buckets)
          if (p.grad().is_alias_of(b.getBuffer())) {
            ++*views;
            break;
          }
  }
};

/// One rank of our side: the same training as ddp_oracle.py, written to <dir>/<subdir>/rank<r>.
int run_worker(const std::string& scenario, const fs::path& dir, const std::string& subdir) {
  const bool recompute = scenario.starts_with("rc-");
  const std::string base = recompute ? scenario.substr(3) : scenario;
  const bool unused = base == "unused" || base == "static-unused";
  const int64_t accumulate = base == "accumulate" || base == "view" ? 2 : 1;
  // POLICYTRAIN_ORACLE_NO_BUFFERS=1 turns the buffer broadcast off (the behaviour before it existed: the
  // oracle then fails on the batch-norm statistics; for checking the check by hand).
  const bool no_buffers = std::getenv("POLICYTRAIN_ORACLE_NO_BUFFERS") != nullptr;
  pt::parallel::DataParallel dp({.timeout = std::chrono::seconds(120),
                                 .broadcast_buffers = !no_buffers,
                                 .find_unused_parameters = unused,
                                 .compression = base == "bf16" || base == "fp16" ? base : "none",
                                 .gradient_as_bucket_view = base == "view",
                                 .static_graph = base == "static" || base == "static-unused"});
  const int world = dp.world_size(), rank = dp.rank();
  NetTask task;
  {
    torch::manual_seed(1000 + static_cast<uint64_t>(rank));  // whatever: the initial weights are loaded below
    task.net = Net();
    torch::NoGradGuard ng;
    const auto init = load_tensors(dir / "init");
    for (auto& p : task.net->named_parameters()) p.value().copy_(init.at(p.key()));
    for (auto& b : task.net->named_buffers()) b.value().copy_(init.at(b.key()));
  }
  if (!unused) task.net->unused.requires_grad_(false);
  task.net->recompute = recompute;
  const auto data = load_tensors(dir / "data");
  pt::data::TensorLoader loader(data.at("x"), data.at("y"),
                                {.batch_size = kGlobalBatch / world / accumulate, .shuffle = false, .rank = rank,
                                 .world_size = world});
  torch::optim::AdamW opt(task.net->parameters(), torch::optim::AdamWOptions(kLr).weight_decay(kWd));
  int64_t views = 0;
  pt::Trainer<NetTask, pt::parallel::DataParallel, pt::accumulate::Steps, CountBucketViews> trainer(
      task, opt, std::move(dp), pt::accumulate::Steps(accumulate), CountBucketViews{&views});
  trainer.fit(loader, {.epochs = kEpochs});
  Tensors out;
  for (auto& p : task.net->named_parameters()) out["param." + p.key()] = p.value();
  for (auto& b : task.net->named_buffers()) out["buffer." + b.key()] = b.value();
  for (auto& p : task.net->named_parameters()) {
    auto it = opt.state().find(p.value().unsafeGetTensorImpl());
    if (it == opt.state().end()) continue;
    auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
    out["opt." + p.key() + ".exp_avg"] = st.exp_avg();
    out["opt." + p.key() + ".exp_avg_sq"] = st.exp_avg_sq();
    out["opt." + p.key() + ".step"] = torch::tensor(static_cast<float>(st.step()));
  }
  save_tensors(dir / subdir / fmt::format("rank{}", rank), out);
  std::ofstream(dir / subdir / fmt::format("views{}.txt", rank)) << views;
  return 0;
}

const int kWorkerHook = [] {
  const char* scenario = std::getenv("POLICYTRAIN_ORACLE_WORKER");
  if (!scenario) return 0;
  const fs::path dir = std::getenv("POLICYTRAIN_ORACLE_DIR");
  const std::string subdir = std::getenv("POLICYTRAIN_ORACLE_SUBDIR");
  const std::string rank = std::getenv("RANK") ? std::getenv("RANK") : "0";
  std::freopen((dir / (subdir + "-stderr" + rank + ".txt")).c_str(), "w", stderr);
  testing::run_worker_and_exit([&] { return run_worker(scenario, dir, subdir); });
}();

using testing::read_text;

/// Runs a shell command line with a generous limit (the machine may be loaded); returns its exit status.
int sh(const std::string& cmd, const fs::path& log) {
  const std::string line = "timeout 900 sh -c '" + cmd + "' >" + log.string() + " 2>&1";
  const int rc = std::system(line.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

/// DDP's side: torchrun on ddp_oracle.py.
void run_python(const std::string& scenario, const fs::path& dir) {
  const int port = pt::parallel::free_port();
  const std::string cmd = fmt::format(
      "OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 --master-addr 127.0.0.1 --master-port {} {}/tests/integration/"
      "ddp_oracle.py --scenario {} --out {}", port, POLICYTRAIN_SOURCE_DIR, scenario, dir.string());
  const int rc = sh(cmd, dir / "torchrun.log");
  INFO("torchrun: " << read_text(dir / "torchrun.log"));
  REQUIRE(rc == 0);
}

/// Our side: 2 ranks of this binary on one node (launch_local).
void run_ours(const std::string& scenario, const fs::path& dir, const std::string& subdir) {
  const int rc = pt::parallel::launch_local({.nproc = 2,
                                             .program = "/proc/self/exe",
                                             .env = {{"POLICYTRAIN_ORACLE_WORKER", scenario},
                                                     {"POLICYTRAIN_ORACLE_DIR", dir.string()},
                                                     {"POLICYTRAIN_ORACLE_SUBDIR", subdir},
                                                     {"OMP_NUM_THREADS", "1"}},
                                             .deadline = std::chrono::seconds(600)});
  INFO("rank 0: " << read_text(dir / (subdir + "-stderr0.txt")) << "\nrank 1: " << read_text(dir / (subdir + "-stderr1.txt")));
  REQUIRE(rc == 0);
}

/// Compares every tensor of `got` with `want` (the same names on both sides).
void compare(const fs::path& want_dir, const fs::path& got_dir, double tol) {
  const auto want = load_tensors(want_dir), got = load_tensors(got_dir);
  std::vector<std::string> wn, gn;
  for (const auto& [k, v] : want) wn.push_back(k);
  for (const auto& [k, v] : got) gn.push_back(k);
  CHECK(fmt::format("{}", fmt::join(gn, " ")) == fmt::format("{}", fmt::join(wn, " ")));
  for (const auto& [name, w] : want) {
    if (!got.count(name)) continue;
    const auto& g = got.at(name);
    REQUIRE(g.sizes() == w.sizes());
    const double d = (g.to(torch::kDouble) - w.to(torch::kDouble)).abs().max().item<double>();
    INFO(got_dir.string() << " " << name << ": max |ours - DDP| = " << d);
    CHECK(d <= tol);
  }
}

fs::path side_by_side(const std::string& scenario, double tol = 1e-6) {
  const auto dir = testing::temp_dir("ddp-oracle-" + scenario);
  run_python(scenario, dir);
  run_ours(scenario, dir, "cpp");
  for (int r = 0; r < 2; ++r) compare(dir / "py" / fmt::format("rank{}", r), dir / "cpp" / fmt::format("rank{}", r), tol);
  return dir;
}

}  // namespace

TEST_CASE("DDP oracle: plain data parallel (2 ranks, batch norm, a frozen parameter) equals DDP within 1e-6") {
  side_by_side("plain");
}

TEST_CASE("DDP oracle: accumulation (no all-reduce on the first micro-step, DDP's no_sync) equals DDP within 1e-6") {
  side_by_side("accumulate");
}

TEST_CASE("DDP oracle: a parameter no rank uses stays untouched, as DDP with find_unused_parameters") {
  const auto dir = testing::temp_dir("ddp-oracle-unused");
  run_python("unused", dir);
  run_ours("unused", dir, "cpp");
  for (int r = 0; r < 2; ++r) {
    compare(dir / "py" / fmt::format("rank{}", r), dir / "cpp" / fmt::format("rank{}", r), 1e-6);
    const auto got = load_tensors(dir / "cpp" / fmt::format("rank{}", r));
    CHECK(torch::equal(got.at("param.unused"), torch::ones({4})));  // AdamW's weight decay did not touch it
    CHECK(got.count("opt.unused.exp_avg") == 0);                     // no optimizer state: its grad stayed undefined
  }
}

TEST_CASE("DDP oracle: bf16 gradient compression equals DDP's bf16_compress_hook") {
  side_by_side("bf16");
}

TEST_CASE("DDP oracle: fp16 gradient compression equals DDP's fp16_compress_hook") {
  side_by_side("fp16");
}

TEST_CASE("DDP oracle: gradient_as_bucket_view with accumulation equals DDP's, and the gradients are bucket views") {
  const auto dir = side_by_side("view");
  for (int r = 0; r < 2; ++r) CHECK(read_text(dir / "cpp" / fmt::format("views{}.txt", r)) == "6");  // every one
}

TEST_CASE("DDP oracle: static_graph equals DDP's (the first step's all-reduce waits for the end of its backward)") {
  const auto dir = side_by_side("static");
  // Without gradient_as_bucket_view the gradients are copies, not views.
  CHECK(read_text(dir / "cpp" / "views0.txt") == "0");
}

// memory::recompute inside the model (fc1 + tanh and fc2 each recomputed), against DDP with
// torch.utils.checkpoint(use_reentrant=True): 20 optimizer steps, every option both accept.
TEST_CASE("DDP oracle: recompute under default options equals DDP with reentrant checkpointing within 1e-6") {
  side_by_side("rc-plain");
}

TEST_CASE("DDP oracle: recompute with accumulation (no_sync) equals DDP with reentrant checkpointing") {
  side_by_side("rc-accumulate");
}

TEST_CASE("DDP oracle: recompute with gradient_as_bucket_view and accumulation equals DDP's") {
  const auto dir = side_by_side("rc-view");
  for (int r = 0; r < 2; ++r) CHECK(read_text(dir / "cpp" / fmt::format("views{}.txt", r)) == "6");
}

// Before the delayed all-reduce was queued from the outer backward, it ran at the end of fc2's recompute (the
// first gradient accumulated), before fc1 and the batch norm had theirs: the ranks diverged silently.
TEST_CASE("DDP oracle: recompute with static_graph equals DDP's (the delayed all-reduce waits for the outer backward)") {
  side_by_side("rc-static");
}

TEST_CASE("DDP oracle: recompute with static_graph and find_unused_parameters equals DDP's, the unused parameter untouched") {
  const auto dir = side_by_side("rc-static-unused");
  for (int r = 0; r < 2; ++r) {
    const auto got = load_tensors(dir / "cpp" / fmt::format("rank{}", r));
    CHECK(torch::equal(got.at("param.unused"), torch::ones({4})));
  }
}

// find_unused_parameters without static_graph searches the graph from the outputs, which cannot see the
// parameters a reentrant recompute uses: DDP fails in the first backward with c10d's "marked ready only once";
// we refuse before any gradient is synchronised, naming the fix.
TEST_CASE("DDP oracle: find_unused_parameters with recompute fails in DDP too, and is refused naming static_graph") {
  const auto dir = testing::temp_dir("ddp-oracle-rc-unused");
  const int port = pt::parallel::free_port();
  const int rc = sh(fmt::format("OMP_NUM_THREADS=1 torchrun --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "
                                "{} {}/tests/integration/ddp_oracle.py --scenario rc-unused --out {}",
                                port, POLICYTRAIN_SOURCE_DIR, dir.string()),
                    dir / "torchrun.log");
  const std::string py = read_text(dir / "torchrun.log");
  INFO("torchrun: " << py);
  CHECK(rc != 0);
  CHECK(py.find("Expected to mark a variable ready only once") != std::string::npos);
  const int ours = pt::parallel::launch_local({.nproc = 2,
                                               .program = "/proc/self/exe",
                                               .env = {{"POLICYTRAIN_ORACLE_WORKER", "rc-unused"},
                                                       {"POLICYTRAIN_ORACLE_DIR", dir.string()},
                                                       {"POLICYTRAIN_ORACLE_SUBDIR", "cpp"},
                                                       {"OMP_NUM_THREADS", "1"}},
                                               .deadline = std::chrono::seconds(120)});
  CHECK(ours != 0);
  for (int r = 0; r < 2; ++r) {
    const std::string err = read_text(dir / fmt::format("cpp-stderr{}.txt", r));
    INFO("rank " << r << ": " << err);
    CHECK(err.find("find_unused_parameters") != std::string::npos);
    CHECK(err.find("static_graph = true") != std::string::npos);
    CHECK(err.find("Expected to mark a variable ready only once") == std::string::npos);  // not c10d's raw error
  }
}

TEST_CASE("two torchrun 'nodes' on loopback (--nnodes 2 --node-rank 0/1, --no-python) equal DDP and one node of 2") {
  const auto dir = testing::temp_dir("ddp-oracle-nodes");
  run_python("plain", dir);
  run_ours("plain", dir, "cpp");
  const int port = pt::parallel::free_port();
  auto node = [&](int r) {
    return fmt::format("torchrun --nnodes 2 --node-rank {} --nproc-per-node 1 --master-addr 127.0.0.1 "
                       "--master-port {} --no-python /proc/{}/exe", r, port, ::getpid());
  };
  // Both launchers run at once, as on two machines; each node's agent hosts or joins the store.
  const std::string cmd = fmt::format(
      "export OMP_NUM_THREADS=1 POLICYTRAIN_ORACLE_WORKER=plain POLICYTRAIN_ORACLE_DIR={} "
      "POLICYTRAIN_ORACLE_SUBDIR=nodes; {} > {}/node0.log 2>&1 & a=$!; {} > {}/node1.log 2>&1 & b=$!; "
      "wait $a; ra=$?; wait $b; rb=$?; exit $((ra + rb))", dir.string(), node(0), dir.string(), node(1), dir.string());
  const int rc = sh(cmd, dir / "nodes.log");
  INFO("node 0: " << read_text(dir / "node0.log") << read_text(dir / "nodes-stderr0.txt"));
  INFO("node 1: " << read_text(dir / "node1.log") << read_text(dir / "nodes-stderr1.txt"));
  REQUIRE(rc == 0);
  for (int r = 0; r < 2; ++r) {
    compare(dir / "py" / fmt::format("rank{}", r), dir / "nodes" / fmt::format("rank{}", r), 1e-6);
    compare(dir / "cpp" / fmt::format("rank{}", r), dir / "nodes" / fmt::format("rank{}", r), 0.0);
  }
}
