// parallel::ShardedDataParallel's dim-0 partition (ShardingOptions::partition = dim0) at stages 1 and 2, against
// DataParallel, the oracle by a formula: Adam's, AdamW's and SGD-with-momentum's updates are element-wise, so the
// rows of a parameter updated from its dim-0 chunk are the rows of the unsharded update, and the weights after N
// steps equal DataParallel's. The model has a parameter whose dim 0 is no multiple of the world size (7 rows), ones
// with fewer rows than ranks (2 rows on 3 ranks: a rank holds none) and a 0-dim one. Inputs are drawn from a seed
// (POLICYTRAIN_DIM0_SEED; the test draws its seeds from one generator). A worker is this binary with
// POLICYTRAIN_DIM0_WORKER set: a static initialiser runs it before doctest's main and exits.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include <policytrain/checkpoint.hpp>
#include <policytrain/parallel.hpp>
#include <policytrain/policytrain.hpp>

#include "unit/helpers.hpp"
#include "unit/oracle_tensors.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

using testing::oracle::Tensors;
using testing::oracle::load_tensors;
using testing::oracle::save_tensors;

constexpr int64_t kSamples = 48, kIn = 5, kHidden = 7, kOut = 2, kBatchPerRank = 4;

/// fc1.weight 7 x 5 (7 rows: no multiple of 2 or 3), fc2 2 x 7 and its bias (2 rows: fewer than 3 ranks), and a 0-dim
/// scale.
struct OddNetImpl : torch::nn::Module {
  OddNetImpl()
      : fc1(register_module("fc1", torch::nn::Linear(kIn, kHidden))),
        fc2(register_module("fc2", torch::nn::Linear(kHidden, kOut))) {
    scale = register_parameter("scale", torch::ones({}));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))) * scale; }
  torch::nn::Linear fc1, fc2;
  torch::Tensor scale;
};
TORCH_MODULE(OddNet);

struct OddTask {
  OddNet net;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
};

std::string env(const char* k, const char* fallback = "") { return std::getenv(k) ? std::getenv(k) : fallback; }

/// State tensors of `p`'s entry in `opt` (exp_avg and exp_avg_sq, or the momentum), as `<prefix>.<key>`.
void add_state(Tensors& out, const std::string& prefix, torch::optim::Optimizer& opt, const torch::Tensor& p) {
  auto it = opt.state().find(p.unsafeGetTensorImpl());
  if (it == opt.state().end()) return;
  int k = 0;
  pt::parallel::map_state_tensors(*it->second, [&](const torch::Tensor& t) {
    out[prefix + "." + std::to_string(k++)] = t.clone();
    return t;
  });
}

/// One rank. POLICYTRAIN_DIM0_MODE: dp (DataParallel), z1 / z2 (dim-0 partition, stage 1 / 2), g1 / g2 (greedy).
/// _OPT: adamw, sgd (momentum), fusedadamw, fusedsgd. _CLIP: 1 clips by the global norm. _EPOCHS: epochs to train
/// (2 micro-steps per step, Ema). _CKPT: consolidated or sharded saves at each epoch end into _CKPT_DIR (resumed
/// from when it holds one). Writes the parameters, Ema's average, rank 0's consolidated optimizer state
/// ("opt.<param>.<k>", DataParallel: its own), this rank's state bytes and its chunks' rows.
int run_worker() {
  const fs::path dir = env("POLICYTRAIN_DIM0_DIR");
  const std::string mode = env("POLICYTRAIN_DIM0_MODE"), kind = env("POLICYTRAIN_DIM0_OPT", "adamw"),
                    ckpt = env("POLICYTRAIN_DIM0_CKPT");
  const int64_t seed = std::atoll(env("POLICYTRAIN_DIM0_SEED", "1").c_str());
  const int64_t epochs = std::atoll(env("POLICYTRAIN_DIM0_EPOCHS", "4").c_str());
  pt::parallel::DataParallelOptions dpo{.timeout = std::chrono::seconds(120)};
  pt::parallel::DataParallel probe(dpo);
  const int world = probe.world_size(), rank = probe.rank();
  torch::manual_seed(seed);
  OddTask task;
  const auto x = torch::randn({kSamples, kIn}), y = torch::randint(0, kOut, {kSamples});
  const auto params = task.net->parameters();
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (kind == "adamw") opt = std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(0.05).weight_decay(0.1));
  else if (kind == "sgd") opt = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1).momentum(0.9));
  else if (kind == "fusedadamw") opt = std::make_unique<pt::optim::FusedAdamW>(params, torch::optim::AdamWOptions(0.05).weight_decay(0.1));
  else if (kind == "fusedsgd") opt = std::make_unique<pt::optim::FusedSgd>(params, torch::optim::SGDOptions(0.1).momentum(0.9));
  else throw std::invalid_argument("unknown optimizer " + kind);
  pt::data::TensorLoader loader(x, y, {.batch_size = kBatchPerRank, .shuffle = true, .seed = static_cast<uint64_t>(seed),
                                       .rank = rank, .world_size = world});
  const double max_norm = env("POLICYTRAIN_DIM0_CLIP") == "1" ? 0.05 : 1e9;
  Tensors out;
  nlohmann::json info;
  auto run = [&](auto parallel) {
    pt::checkpoint::Disk disk({.directory = ckpt.empty() ? fs::path() : fs::path(env("POLICYTRAIN_DIM0_CKPT_DIR")),
                               .resume = ckpt.empty() ? "" : "auto",
                               .run = {.world_size = -1},  // may resume on another world size
                               .export_final = false,
                               .sharded = ckpt == "sharded"});
    pt::Trainer trainer(task, *opt, std::move(parallel), std::move(disk), pt::accumulate::Steps(2),
                        pt::callbacks::GradClip({.max_norm = max_norm}), pt::callbacks::Ema({.tau = 0}));
    trainer.fit(loader, {.epochs = epochs});
    trainer.context().before_save();  // rank 0: the consolidated state (DataParallel: its own)
    if (rank == 0)
      for (auto& p : task.net->named_parameters()) add_state(out, "opt." + p.key(), *opt, p.value());
    trainer.context().after_save();
    const auto& ema = trainer.template get<pt::callbacks::Ema>().average();
    for (size_t i = 0; i < ema.size(); ++i) out[fmt::format("ema.{}", i)] = ema[i].clone();
    auto& par = trainer.template policy<pt::Category::parallel>();
    if constexpr (requires { par.chunk(torch::Tensor()); }) {
      info["state_bytes"] = par.optimizer_state_bytes();
      info["state_bytes_total"] = par.optimizer_state_bytes_total();
      info["grad_bytes"] = par.gradient_bytes();
      for (auto& p : task.net->named_parameters())
        if (const auto* c = par.chunk(p.value())) {
          info["rows"][p.key()] = {c->start, c->length, c->rows};
          add_state(out, "local." + p.key(), *opt, p.value());
        }
    }
  };
  const bool greedy = mode.starts_with("g");
  const pt::parallel::ShardingOptions z{.stage = mode == "z2" || mode == "g2" ? 2 : 1,
                                        .partition = greedy ? pt::parallel::Partition::greedy : pt::parallel::Partition::dim0};
  if (mode == "dp") run(pt::parallel::DataParallel(dpo));
  else run(pt::parallel::ShardedDataParallel(dpo, z));
  for (auto& p : task.net->named_parameters()) out["param." + p.key()] = p.value().clone();
  save_tensors(dir / fmt::format("rank{}", rank), out);
  std::ofstream(dir / fmt::format("info{}.json", rank)) << info.dump();
  return 0;
}

const int kWorkerHook = [] {
  if (!std::getenv("POLICYTRAIN_DIM0_WORKER")) return 0;
  const fs::path dir = env("POLICYTRAIN_DIM0_DIR");
  fs::create_directories(dir);
  std::freopen((dir / ("stderr" + env("RANK", "0") + ".txt")).c_str(), "w", stderr);
  testing::run_worker_and_exit([] { return run_worker(); });
}();

/// Runs `world` ranks of this binary with `vars` into `dir`.
void run_ranks(int world, const fs::path& dir, std::map<std::string, std::string> vars) {
  vars.insert({{"POLICYTRAIN_DIM0_WORKER", "1"}, {"POLICYTRAIN_DIM0_DIR", dir.string()}, {"OMP_NUM_THREADS", "1"}});
  const int rc = pt::parallel::launch_local(
      {.nproc = world, .program = "/proc/self/exe", .env = vars, .deadline = std::chrono::seconds(300)});
  std::string logs;
  for (int r = 0; r < world; ++r) logs += fmt::format("\nrank {}: {}", r, testing::read_text(dir / fmt::format("stderr{}.txt", r)));
  INFO(logs);
  REQUIRE(rc == 0);
}

/// The largest |a - b| (0 for empty tensors: a rank's chunk of a parameter with fewer rows than ranks).
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return a.numel() == 0 ? 0.0 : (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

/// The largest |a - b| over the tensors `want` lists whose names start with `prefix` (every one present in `got`).
double max_diff(const Tensors& want, const Tensors& got, const std::string& prefix = "") {
  double d = 0;
  for (const auto& [name, w] : want) {
    if (!name.starts_with(prefix) || name.starts_with("local.")) continue;
    INFO(name);
    REQUIRE(got.count(name));
    REQUIRE(got.at(name).sizes() == w.sizes());
    d = std::max(d, max_abs_diff(got.at(name), w));
  }
  return d;
}

/// The test's seeds: drawn from one generator seeded by POLICYTRAIN_DIM0_SEEDS (default 53), `n` of them.
std::vector<int64_t> seeds(int n) {
  std::mt19937_64 g(std::getenv("POLICYTRAIN_DIM0_SEEDS") ? std::strtoull(std::getenv("POLICYTRAIN_DIM0_SEEDS"), nullptr, 10) : 53);
  std::vector<int64_t> s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<int64_t>(g() % 100000));
  return s;
}

/// A rank's optimizer state bytes by the formula: the rows it holds of every parameter, times the row's elements,
/// times 4 bytes, times the state tensors per parameter (2 for Adam(W), 1 for SGD's momentum).
int64_t expected_state_bytes(int world, int rank, int tensors) {
  int64_t n = 0;
  for (auto [d0, row] : std::vector<std::pair<int64_t, int64_t>>{{kHidden, kIn}, {kHidden, 1}, {kOut, kHidden}, {kOut, 1}, {1, 1}}) {
    const int64_t rows = (d0 + world - 1) / world, start = std::min(d0, rows * rank);
    n += (std::min(d0, start + rows) - start) * row;
  }
  return n * 4 * tensors;
}

}  // namespace

TEST_CASE("dim-0 partition, ZeRO-1 and ZeRO-2, 2 and 3 ranks: the weights, Ema and the consolidated state equal DataParallel's, each rank's state bytes are its chunks' (AdamW, SGD momentum, fused AdamW and SGD, accumulation, clipping)") {
  double worst_z2 = 0;
  int compared = 0;
  const auto s = seeds(2);
  for (const int world : {2, 3})
    for (const std::string kind : {"adamw", "sgd", "fusedadamw", "fusedsgd"})
      for (const std::string clip : {"0", "1"}) {
        const int64_t seed = s[static_cast<size_t>(compared % 2)];
        const auto dir = testing::temp_dir(fmt::format("dim0-{}-{}-{}", world, kind, clip));
        const std::map<std::string, std::string> base{{"POLICYTRAIN_DIM0_OPT", kind}, {"POLICYTRAIN_DIM0_CLIP", clip},
                                                      {"POLICYTRAIN_DIM0_SEED", std::to_string(seed)}};
        for (const std::string mode : {"dp", "z1", "z2"}) {
          auto v = base;
          v["POLICYTRAIN_DIM0_MODE"] = mode;
          run_ranks(world, dir / mode, v);
        }
        const auto dp0 = load_tensors(dir / "dp" / "rank0");  // with DataParallel's whole optimizer state
        for (int r = 0; r < world; ++r) {
          const auto dp = load_tensors(dir / "dp" / fmt::format("rank{}", r));
          for (const std::string mode : {"z1", "z2"}) {
            INFO("seed " << seed << ", " << world << " ranks, " << kind << ", clip " << clip << ", " << mode << ", rank " << r);
            const auto got = load_tensors(dir / mode / fmt::format("rank{}", r));
            const double d = max_diff(dp, got);
            // Stage 1 and stage 2 on 2 ranks step the chunks from the gradients DataParallel steps from: the same
            // element-wise update, bit for bit. Clipping at stage 2 sums each rank's squares of its rows (a norm
            // of other partial sums), and 3 ranks reduce-scatter in another order than Gloo's all-reduce adds.
            // The fused kernels (at::_fused_adamw_, _fused_sgd_) run a vector loop over a tensor and a scalar loop
            // over its tail, which may round an element's multiply-adds otherwise; whether an element is in the tail
            // depends on the tensor it is in (the chunk, or the whole parameter), so the fused optimizers agree
            // within the last bits (measured: 9e-8 after 12 steps), torch::optim's bit for bit.
            const bool exact = !kind.starts_with("fused") && (mode == "z1" || (world == 2 && clip == "0"));
            if (exact) CHECK(d == 0);
            else CHECK(d <= 1e-6);
            if (mode == "z2") worst_z2 = std::max(worst_z2, d);
            const auto info = nlohmann::json::parse(testing::read_text(dir / mode / fmt::format("info{}.json", r)));
            const int tensors = kind.ends_with("sgd") ? 1 : 2;
            CHECK(info["state_bytes"].get<int64_t>() == expected_state_bytes(world, r, tensors));
            CHECK(info["state_bytes_total"].get<int64_t>() == expected_state_bytes(1, 0, tensors));
            if (mode == "z2") CHECK(info["grad_bytes"].get<int64_t>() == expected_state_bytes(world, r, 1));
            // Each rank's chunk state equals DataParallel's state rows.
            for (const auto& [name, rows] : info["rows"].items()) {
              const int64_t start = rows[0], length = rows[1];
              for (int k = 0; k < tensors; ++k) {
                const auto whole = dp0.at(fmt::format("opt.{}.{}", name, k));
                const auto mine = got.at(fmt::format("local.{}.{}", name, k));
                const auto want = (whole.dim() == 0 ? whole.reshape({1}) : whole).narrow(0, start, length);
                CHECK(mine.sizes() == want.sizes());
                CHECK(max_abs_diff(mine, want) <= (exact ? 0 : 1e-6));
              }
            }
          }
        }
        ++compared;
      }
  // The greedy partition beside it (the default; the paths the dim-0 one branches from): ZeRO-1 bit for bit,
  // ZeRO-2 within 1e-6 on 3 ranks.
  const auto dir = testing::temp_dir("dim0-greedy");
  for (const std::string mode : {"dp", "g1", "g2"})
    run_ranks(3, dir / mode, {{"POLICYTRAIN_DIM0_MODE", mode}, {"POLICYTRAIN_DIM0_CLIP", "1"}, {"POLICYTRAIN_DIM0_SEED", std::to_string(s[0])}});
  for (int r = 0; r < 3; ++r) {
    const auto dp = load_tensors(dir / "dp" / fmt::format("rank{}", r));
    CHECK(max_diff(dp, load_tensors(dir / "g1" / fmt::format("rank{}", r))) == 0);
    CHECK(max_diff(dp, load_tensors(dir / "g2" / fmt::format("rank{}", r))) <= 1e-6);
  }
  MESSAGE("dim-0 partition: " << compared << " runs compared with DataParallel; largest ZeRO-2 difference " << worst_z2);
}

TEST_CASE("dim-0 partition checkpoints: consolidated and sharded saves resume bit-identical at the same world size, and a sharded one of 3 ranks resumes on 2 as the consolidated one does") {
  const int64_t seed = seeds(3)[2];
  const auto dir = testing::temp_dir("dim0-ckpt");
  for (const std::string stage : {"z1", "z2"}) {
    const std::map<std::string, std::string> base{{"POLICYTRAIN_DIM0_MODE", stage}, {"POLICYTRAIN_DIM0_SEED", std::to_string(seed)}};
    auto full = base;
    full["POLICYTRAIN_DIM0_EPOCHS"] = "4";
    run_ranks(3, dir / (stage + "-full"), full);
    for (const std::string ckpt : {"consolidated", "sharded"}) {
      auto half = base;
      half["POLICYTRAIN_DIM0_EPOCHS"] = "2";
      half["POLICYTRAIN_DIM0_CKPT"] = ckpt;
      half["POLICYTRAIN_DIM0_CKPT_DIR"] = (dir / (stage + "-" + ckpt + "-ckpt")).string();
      run_ranks(3, dir / (stage + "-" + ckpt + "-half"), half);
      fs::copy(dir / (stage + "-" + ckpt + "-ckpt"), dir / (stage + "-" + ckpt + "-ckpt2"), fs::copy_options::recursive);
      auto resume = half;
      resume["POLICYTRAIN_DIM0_EPOCHS"] = "4";
      run_ranks(3, dir / (stage + "-" + ckpt + "-resume"), resume);
      for (int r = 0; r < 3; ++r) {
        INFO(stage << " " << ckpt << " rank " << r);
        CHECK(max_diff(load_tensors(dir / (stage + "-full") / fmt::format("rank{}", r)),
                       load_tensors(dir / (stage + "-" + ckpt + "-resume") / fmt::format("rank{}", r))) == 0);
      }
      // On 2 ranks: read back (no further training), every rank's consolidated state is the 3 ranks' at the save.
      auto reshard = half;
      reshard["POLICYTRAIN_DIM0_CKPT_DIR"] = (dir / (stage + "-" + ckpt + "-ckpt2")).string();
      run_ranks(2, dir / (stage + "-" + ckpt + "-two"), reshard);
      const auto written = load_tensors(dir / (stage + "-" + ckpt + "-half") / "rank0");
      const auto read = load_tensors(dir / (stage + "-" + ckpt + "-two") / "rank0");
      INFO(stage << " " << ckpt << " read on 2 ranks");
      CHECK(max_diff(written, read, "opt.") == 0);
      CHECK(max_diff(written, read, "param.") == 0);
    }
  }
}
