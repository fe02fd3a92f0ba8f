// Per-rank memory of the training state under data parallelism and ZeRO (issue 53): the bytes of parameters,
// gradients and optimizer state each rank holds, measured, at 1, 2 and 3 ranks, for DataParallel, ZeRO-1/2 with the
// greedy partition (ZeroRedundancyOptimizer's: whole parameters) and with the dim-0 partition (every parameter
// chunked on dim 0, as FSDP2), against the formula total / N (+ padding). Models: the main job's CNN (width 32: its
// fc1 weight is 95% of the parameters, so the greedy partition cannot go below it) and a balanced MLP (8 equal
// Linear(256, 256) layers). AdamW, 3 steps of random data (32 samples per rank). Not a timed benchmark: one run,
// exact counts.
//   ./build/bench/zero_memory [--out FILE.md]
// Columns: params = the model's parameters plus any dim-0 chunk buffer the policy keeps between steps (none: they live
// for the step only);
// grads = the gradient bytes a rank holds after its backward (the most over the steps); state = the optimizer
// state this rank keeps; sum and formula = params + grads + state of the largest rank, and what total / N gives for
// the sharded parts (state at stages 1 and 2, gradients at stage 2); peak = memory::TensorBytesMeter's peak of the
// rank's LibTorch CPU tensors over the run (activations and buffers in flight included).
// Stage 3 (z3, ShardingOptions::prefetch on; z3-noprefetch off): both models with every layer that has parameters a
// parallel::FullyShard unit (the same modules for every variant: without stage 3 a unit calls its layer). Its params
// column is the parameter shards plus the peak of the gathered bytes alive at once (the gathered parameters, a
// prefetched unit's from its issue: an all-gather writes into them in place and allocates nothing else;
// detail::GatheredBytes: the transient cost of stage 3), measured over the steps (the whole model that every rank builds before fit begin is not in it: FSDP2 without the meta device
// has it too); its formula is total / N (+ padding) for parameters, gradients and both moments, plus the largest
// unit's unsharded bytes and, with prefetch, the next largest (the unit gathered ahead).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/memory/peak.hpp>
#include <policytrain/parallel.hpp>
#include <policytrain/policytrain.hpp>

#include "fashion_mnist/model.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

struct Mlp {
  torch::nn::Sequential net;
  Mlp() {
    for (int i = 0; i < 8; ++i) {
      net->push_back(pt::parallel::FullyShard<torch::nn::Linear>(torch::nn::Linear(256, 256)));
      net->push_back(torch::nn::Tanh());
    }
  }
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::mse_loss(net->forward(b.x), b.y); }
};

int64_t bytes_of(const torch::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

/// The gradient bytes this rank holds when the optimizer steps (after the backward and its synchronisation): the
/// gradients of what the optimizer steps (the module's parameters; at stage 3 their shards).
struct GradMeter {
  int64_t most = 0;
  int64_t gathered = 0;  ///< stage 3: the peak of detail::GatheredBytes over the steps (fit end gathers everything)
  template <class Ctx>
  void before_step(Ctx& ctx) {
    gathered = std::max(gathered, pt::parallel::detail::GatheredBytes::peak.load());
    int64_t n = 0;
    for (const auto& g : ctx.optimizer().param_groups())
      for (const auto& p : g.params()) n += bytes_of(p.grad());
    most = std::max(most, n);
  }
};

template <class Task>
nlohmann::json train(Task& task, const std::string& variant, torch::Tensor x, torch::Tensor y, pt::memory::TensorBytesMeter& meter) {
  pt::parallel::DataParallelOptions dpo{.timeout = std::chrono::seconds(300)};
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
  pt::data::TensorLoader loader(x, y, {.batch_size = 32, .shuffle = false});
  nlohmann::json out;
  auto run = [&](auto parallel) {
    pt::Trainer trainer(task, opt, std::move(parallel), GradMeter{});
    trainer.fit(loader, {.epochs = 1});
    int64_t params = 0, state = 0;
    for (const auto& p : task.module().parameters()) params += bytes_of(p);
    auto& par = trainer.template policy<pt::Category::parallel>();
    if constexpr (requires { par.shard_bytes(); })
      if (variant.starts_with("z3")) params = par.shard_bytes() + trainer.template get<GradMeter>().gathered;
    for (const auto& [key, st] : opt.state()) state += pt::parallel::param_state_bytes(*st);
    if constexpr (requires { par.chunk(torch::Tensor()); })
      for (const auto& p : task.module().parameters())
        if (const auto* c = par.chunk(p)) params += bytes_of(c->padded);
    out = {{"params", params}, {"grads", trainer.template get<GradMeter>().most}, {"state", state}, {"peak", meter.peak()},
           {"gathered", trainer.template get<GradMeter>().gathered}};
  };
  if (variant == "dp") {
    run(pt::parallel::DataParallel(dpo));
  } else {
    const int stage = variant[1] - '0';
    run(pt::parallel::ShardedDataParallel(
        dpo, {.stage = stage, .partition = variant.ends_with("dim0") ? pt::parallel::Partition::dim0 : pt::parallel::Partition::greedy,
              .prefetch = variant == "z3"}));
  }
  return out;
}

int worker(const std::string& model, const std::string& variant, const fs::path& out) {
  pt::memory::TensorBytesMeter meter;
  torch::manual_seed(0);
  nlohmann::json j;
  if (model == "cnn") {
    fmnist::Classifier task(32, false, 0, fmnist::BlockOrder::conv_bn_relu_pool, 0, /*units=*/true);
    j = train(task, variant, torch::randn({96, 1, 28, 28}), torch::randint(0, 10, {96}), meter);
  } else {
    Mlp task;
    j = train(task, variant, torch::randn({96, 256}), torch::randn({96, 256}), meter);
  }
  std::ofstream(out / fmt::format("rank{}.json", std::getenv("RANK") ? std::getenv("RANK") : "0")) << j.dump();
  return 0;
}

/// Calls `f` on a freshly built `model` (its module).
template <class F>
void with_model(const std::string& model, F&& f) {
  if (model == "cnn") {
    fmnist::Classifier t(32, false, 0, fmnist::BlockOrder::conv_bn_relu_pool, 0, /*units=*/true);
    f(t.module());
  } else {
    Mlp t;
    f(t.module());
  }
}

/// Parameter bytes and, per parameter, its rows and row elements (for the formula).
std::vector<std::pair<int64_t, int64_t>> shapes(const std::string& model) {
  std::vector<std::pair<int64_t, int64_t>> s;
  with_model(model, [&](torch::nn::Module& m) {
    for (const auto& p : m.parameters()) s.emplace_back(p.dim() ? p.size(0) : 1, p.dim() && p.size(0) ? p.numel() / p.size(0) : 1);
  });
  return s;
}

/// The unsharded bytes of each FullyShard unit, largest first.
std::vector<int64_t> unit_bytes(const std::string& model) {
  std::vector<int64_t> v;
  with_model(model, [&](torch::nn::Module& m) {
    for (const auto& c : m.modules())
      if (dynamic_cast<pt::parallel::FullyShardedUnit*>(c.get())) {
        int64_t n = 0;
        for (const auto& p : c->parameters()) n += bytes_of(p);
        v.push_back(n);
      }
  });
  std::sort(v.rbegin(), v.rend());
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* w = std::getenv("ZERO_MEMORY_WORKER")) {
    const std::string spec = w;
    const auto cut = spec.find(':');
    return worker(spec.substr(0, cut), spec.substr(cut + 1), std::getenv("ZERO_MEMORY_DIR"));
  }
  std::string out_file = argc > 2 && std::string(argv[1]) == "--out" ? argv[2] : "";
  const fs::path dir = fs::temp_directory_path() / fmt::format("zero-memory-{}", ::getpid());
  std::string table =
      "| model | ranks | variant | params | grads | state | sum (largest rank) | formula | state: largest rank / total "
      "| tensor peak MiB |\n|---|---|---|---|---|---|---|---|---|---|\n";
  // The summary: the largest rank's sum per variant, with a column for stage 3 (fully sharded parameters).
  std::map<std::string, std::map<std::string, int64_t>> pivot;
  for (const std::string model : {"cnn", "mlp"}) {
    const auto sh = shapes(model);
    int64_t total = 0;
    for (auto [rows, row] : sh) total += rows * row * 4;
    for (int world = 1; world <= 3; ++world)
      for (const std::string variant : {"dp", "z1-greedy", "z2-greedy", "z1-dim0", "z2-dim0", "z3", "z3-noprefetch"}) {
        if (world == 1 && variant != "dp") continue;  // one process shards nothing
        const fs::path d = dir / fmt::format("{}-{}-{}", model, world, variant);
        fs::create_directories(d);
        const int rc = pt::parallel::launch_local({.nproc = world, .program = "/proc/self/exe",
                                                   .env = {{"ZERO_MEMORY_WORKER", model + ":" + variant},
                                                           {"ZERO_MEMORY_DIR", d.string()}, {"OMP_NUM_THREADS", "1"}},
                                                   .deadline = std::chrono::seconds(600)});
        if (rc != 0) {
          std::fprintf(stderr, "zero_memory: %s on %d ranks failed (exit code %d)\n", variant.c_str(), world, rc);
          return 1;
        }
        nlohmann::json big;
        int64_t sum = -1, state_max = 0, state_total = 0;
        for (int r = 0; r < world; ++r) {
          const auto j = nlohmann::json::parse(std::ifstream(d / fmt::format("rank{}.json", r)));
          const int64_t s = j["params"].get<int64_t>() + j["grads"].get<int64_t>() + j["state"].get<int64_t>();
          state_max = std::max(state_max, j["state"].get<int64_t>());
          state_total += j["state"].get<int64_t>();
          if (s > sum) sum = s, big = j;
        }
        // The formula: parameters whole on every rank; AdamW's two moments of total / N (dim0: the largest rank's
        // rows, ceil(d0 / N) of each parameter: the padding), and at stage 2 one gradient of the same.
        const bool sharded = variant != "dp" && world > 1;
        int64_t part = total;
        if (sharded) {
          part = 0;
          for (auto [rows, row] : sh) part += (rows + world - 1) / world * row * 4;
          if (variant.ends_with("greedy")) part = total / world;  // the goal, which greedy misses by its largest parameter
        }
        int64_t formula = total + (sharded ? 2 * part : 2 * total) + (sharded && variant[1] == '2' ? part : total);
        if (variant.starts_with("z3")) {
          // Parameters, gradients and both moments at total / N (+ padding), plus the unit being computed and, with
          // prefetch, the one gathered ahead (bounded by the two largest).
          const auto units = unit_bytes(model);
          formula = 4 * part + units.at(0) + (variant == "z3" && units.size() > 1 ? units.at(1) : 0);
        }
        table += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {:.3f} | {:.1f} |\n", model, world, variant,
                             big["params"].get<int64_t>(), big["grads"].get<int64_t>(), big["state"].get<int64_t>(), sum,
                             formula, static_cast<double>(state_max) / static_cast<double>(state_total),
                             big["peak"].get<double>() / (1 << 20));
        pivot[fmt::format("| {} | {} |", model, world)][variant] = sum;
      }
  }
  fs::remove_all(dir);
  table += "\n| model | ranks | DataParallel | ZeRO-1 greedy | ZeRO-2 greedy | ZeRO-1 dim0 | ZeRO-2 dim0 | stage 3 | stage 3, no prefetch |\n"
           "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [key, v] : pivot) {
    auto cell = [&](const char* k) { return v.count(k) ? fmt::format("{}", v.at(k)) : std::string("-"); };
    table += fmt::format("{} {} | {} | {} | {} | {} | {} | {} |\n", key, cell("dp"), cell("z1-greedy"), cell("z2-greedy"),
                         cell("z1-dim0"), cell("z2-dim0"), cell("z3"), cell("z3-noprefetch"));
  }
  std::fputs(table.c_str(), stdout);
  if (!out_file.empty()) std::ofstream(out_file) << table;
  return 0;
}
