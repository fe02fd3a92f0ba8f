// Stage 3 of parallel::ShardedDataParallel (fully sharded parameters, parallel::FullyShard units) side by side with
// PyTorch's FSDP2, the oracle: torchrun (Gloo, 2 or 3 ranks) runs tests/integration/fsdp_oracle.py, which draws the
// data and the initial weights from a seed, applies fully_shard to the same units and the root, and trains; then as
// many ranks of this binary (parallel::launch_local) load them and train the same model. Every rank's full
// parameters, shards, gradient shards at the last step, optimizer state and buffers must equal Python's within 1e-6.
// A worker is this binary with POLICYTRAIN_FSDP_WORKER set: a static initialiser runs it before doctest's main.
// Each case takes 11 to 14 s (AMD EPYC, 2 cores): the 2-rank AdamW case is in the quick tier, the others (the mixed
// precision ones among them) extended. The cases against DataParallel or an uninterrupted run (recompute among them),
// and the refusals, draw their data from a seed and run our side only (0.4 to 7 s each on the same machine): quick.
// Prefetch on against off: 2.7 s on 2 ranks (quick), 8.6 s on 3 ranks twice (extended). The memory-budget case
// (DataParallel out of memory, stage 3 trains): 5.3 s, extended. The sharded checkpoints' case (9 runs, 32 s):
// extended. The in-place gather's bytes (2 runs, 3.1 s): quick. Sharded checkpoints with callbacks::Ema: the exports
// and a resume on 2 ranks (4 runs, 6.3 s), quick; the average's rows through policytrain-ckpt and a 3 -> 2 -> 1 -> 3
// cycle (8 runs, 14 s), extended.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/CPUAllocator.h>

#include <policytrain/checkpoint.hpp>
#include <policytrain/memory.hpp>
#include <policytrain/observe.hpp>
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

constexpr int64_t kBatchPerRank = 4;

/// fsdp_oracle.py's model, with the same parameter names: three units (a convolution with batch norm, a linear
/// layer, an embedding) and a head that no unit claims (the root's). The convolution has no bias: batch norm
/// removes it, so its gradient is rounding noise, which AdamW's normalisation would blow up to the learning rate.
// [snippet:fsdp-units]
struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv(register_module("conv", pt::parallel::FullyShard<torch::nn::Sequential>(
                                         torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 4, 3).padding(1).bias(false)),
                                                               torch::nn::BatchNorm2d(4)),
                                         reshard()))),
        fc(register_module("fc", pt::parallel::FullyShard<torch::nn::Linear>(torch::nn::Linear(64, 16), reshard()))),
        emb(register_module("emb", pt::parallel::FullyShard<torch::nn::Embedding>(torch::nn::Embedding(10, 4), reshard()))),
        head(register_module("head", torch::nn::Linear(20, 3))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    auto ids = x.flatten(1).narrow(1, 0, 3).gt(0).to(torch::kLong) + torch::arange(3, torch::kLong) * 3;  // 0..8
    auto h = torch::tanh(fc(torch::relu(conv(x)).flatten(1)));
    return head(torch::cat({h, emb(ids).mean(1)}, 1));
  }
  // [/snippet:fsdp-units]
  /// POLICYTRAIN_FSDP_RECOMPUTE=1: the fc unit runs inside a memory::recompute segment (a unit within a recomputed
  /// block), in training only.
  torch::Tensor forward_recomputed(const torch::Tensor& x) {
    auto ids = x.flatten(1).narrow(1, 0, 3).gt(0).to(torch::kLong) + torch::arange(3, torch::kLong) * 3;
    auto h = pt::memory::recompute([this](const torch::Tensor& in) { return torch::tanh(fc(in)); },
                                   torch::relu(conv(x)).flatten(1));
    return head(torch::cat({h, emb(ids).mean(1)}, 1));
  }
  /// POLICYTRAIN_FSDP_RESHARD=0: the units keep their parameters from the forward to the backward.
  static bool reshard() {
    const char* v = std::getenv("POLICYTRAIN_FSDP_RESHARD");
    return !v || std::string(v) != "0";
  }
  pt::parallel::FullyShard<torch::nn::Sequential> conv;
  pt::parallel::FullyShard<torch::nn::Linear> fc;
  pt::parallel::FullyShard<torch::nn::Embedding> emb;
  torch::nn::Linear head;
};
TORCH_MODULE(Net);

struct Task {
  Net net;
  torch::nn::Module& module() { return *net; }
  bool recompute = std::getenv("POLICYTRAIN_FSDP_RECOMPUTE") != nullptr;
  torch::Tensor training_step(const pt::Batch& b) {
    return torch::nn::functional::cross_entropy(recompute ? net->forward_recomputed(b.x) : net->forward(b.x), b.y);
  }
};

/// Keeps the gradients the optimizer is about to step at step `last` (after the parallel policy's before_step), by
/// the name of the module's parameter in the same position (the optimizer was built over module.parameters()).
struct GradCapture {
  int64_t last;
  Tensors* out;
  template <class Ctx>
  void before_step(Ctx& ctx) {
    if (ctx.state().global_step + 1 != last) return;
    const auto named = ctx.module().named_parameters();
    const auto& ps = ctx.optimizer().param_groups().at(0).params();
    for (size_t i = 0; i < ps.size(); ++i)
      if (ps[i].grad().defined()) (*out)["grad." + named[i].key()] = ps[i].grad().clone();
  }
  /// POLICYTRAIN_FSDP_EXPORT=1: at the epoch's end (mid-fit: stage 3's parameters are freed) the parallel policy
  /// exports the weights to <dir>/<subdir>/export.pt; the most gathered bytes this rank held go to "export_peak".
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    const char* on = std::getenv("POLICYTRAIN_FSDP_EXPORT");
    if (!on || std::string(on) != "1") return;
    auto& par = ctx.template policy<pt::Category::parallel>();
    par.export_weights(ctx.module(), fs::path(std::getenv("POLICYTRAIN_FSDP_DIR")) / std::getenv("POLICYTRAIN_FSDP_SUBDIR") / "export.pt");
    (*out)["export_peak"] = torch::tensor(par.export_gathered_bytes_peak());
  }
};

std::string env(const char* k, const char* fallback) { return std::getenv(k) ? std::getenv(k) : fallback; }

/// "fp32", "bf16", "fp16" (fsdp_oracle.py's names) as a dtype; "" unset.
std::optional<c10::ScalarType> dtype_named(const std::string& s) {
  if (s.empty()) return std::nullopt;
  if (s == "bf16") return torch::kBFloat16;
  if (s == "fp16") return torch::kHalf;
  return torch::kFloat;
}

/// A linear map by a weight it is given (shared with another module: tied).
struct TiedImpl : torch::nn::Module {
  explicit TiedImpl(const torch::Tensor& w) : weight(register_parameter("weight", w)) {}
  torch::Tensor forward(const torch::Tensor& x) { return torch::matmul(x, weight.t()); }
  torch::Tensor weight;
};
TORCH_MODULE(Tied);

/// Scenario "tied": units `a` and `b` share one weight; fit begin must refuse it, naming both. Writes the message.
int run_tied(const fs::path& dir, const std::string& subdir) {
  struct TwoUnits : torch::nn::Module {
    torch::Tensor w = torch::randn({4, 4});
    pt::parallel::FullyShard<Tied> a{register_module("a", pt::parallel::FullyShard<Tied>(Tied(w)))};
    pt::parallel::FullyShard<Tied> b{register_module("b", pt::parallel::FullyShard<Tied>(Tied(w)))};
  };
  struct TiedTask {
    std::shared_ptr<TwoUnits> net = std::make_shared<TwoUnits>();
    torch::nn::Module& module() { return *net; }
    torch::Tensor training_step(const pt::Batch& b) { return net->b(net->a(b.x)).sum(); }
  };
  pt::parallel::ShardedDataParallel parallel({.timeout = std::chrono::seconds(120)}, {.stage = 3});
  const int rank = parallel.rank(), world = parallel.world_size();
  TiedTask task;
  torch::optim::SGD opt(pt::unique_parameters(*task.net), torch::optim::SGDOptions(0.1));
  pt::data::TensorLoader loader(torch::randn({8, 4}), torch::zeros({8}, torch::kLong),
                                {.batch_size = 2, .shuffle = false, .rank = rank, .world_size = world});
  std::string message = "no error";
  try {
    pt::Trainer trainer(task, opt, std::move(parallel));
    trainer.fit(loader, {.epochs = 1});
  } catch (const std::exception& e) {
    message = e.what();
  }
  std::ofstream(dir / subdir / fmt::format("error{}.txt", rank)) << message;
  return 0;
}

/// Scenario "recomputed": a memory::Recomputed module inside a unit, at POLICYTRAIN_FSDP_STAGE (3, or 0: DataParallel),
/// 4 SGD steps on data and weights drawn from a seed; writes the parameters.
int run_recomputed(const fs::path& dir, const std::string& subdir) {
  struct Model : torch::nn::Module {
    pt::parallel::FullyShard<torch::nn::Sequential> block{register_module(
        "block", pt::parallel::FullyShard<torch::nn::Sequential>(torch::nn::Sequential(
                     pt::memory::Recomputed<torch::nn::Linear>(torch::nn::Linear(4, 4)), torch::nn::Linear(4, 2))))};
  };
  struct RecomputedTask {
    std::shared_ptr<Model> net = std::make_shared<Model>();
    torch::nn::Module& module() { return *net; }
    torch::Tensor training_step(const pt::Batch& b) { return net->block(b.x).sum(); }
  };
  pt::parallel::ShardedDataParallel parallel({.timeout = std::chrono::seconds(120)},
                                             {.stage = std::stoi(env("POLICYTRAIN_FSDP_STAGE", "3"))});
  const int rank = parallel.rank(), world = parallel.world_size();
  torch::manual_seed(std::stoull(env("POLICYTRAIN_FSDP_SEED", "7")));  // the same weights and data on every rank and run
  RecomputedTask task;
  torch::optim::SGD opt(task.net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  pt::data::TensorLoader loader(torch::randn({16, 4}), torch::zeros({16}, torch::kLong),
                                {.batch_size = 2, .shuffle = false, .rank = rank, .world_size = world});
  pt::Trainer trainer(task, opt, std::move(parallel));
  trainer.fit(loader, {.epochs = 1});
  Tensors out;
  for (auto& p : task.net->named_parameters()) out["param." + p.key()] = p.value().detach().clone();
  save_tensors(dir / subdir / fmt::format("rank{}", rank), out);
  return 0;
}

/// Scenario "reshard": two units of linear layers (fc2's 7 rows chunk unevenly on 2 and 3 ranks) and a root head, no
/// batch norm (its batch statistics would depend on the per-rank batch), AdamW, a global batch of 12 on every world
/// size. POLICYTRAIN_FSDP_UNTIL: train to that optimizer step (checkpoints every 2 steps, resumed from the newest
/// when POLICYTRAIN_FSDP_RESUME=1, at whatever world size this phase has); writes the parameters at the end.
int run_reshard(const fs::path& dir, const std::string& subdir) {
  struct Model : torch::nn::Module {
    pt::parallel::FullyShard<torch::nn::Linear> fc1{register_module("fc1", pt::parallel::FullyShard<torch::nn::Linear>(torch::nn::Linear(32, 12)))};
    pt::parallel::FullyShard<torch::nn::Linear> fc2{register_module("fc2", pt::parallel::FullyShard<torch::nn::Linear>(torch::nn::Linear(12, 7)))};
    torch::nn::Linear head{register_module("head", torch::nn::Linear(7, 3))};
    torch::Tensor forward(const torch::Tensor& x) { return head(torch::tanh(fc2(torch::tanh(fc1(x.flatten(1)))))); }
  };
  struct ReshardTask {
    std::shared_ptr<Model> net;
    torch::nn::Module& module() { return *net; }
    torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
  };
  pt::parallel::ShardedDataParallel parallel({.timeout = std::chrono::seconds(120)}, {.stage = 3});
  const int rank = parallel.rank(), world = parallel.world_size();
  torch::manual_seed(5);  // the same initial weights on every rank and phase (a resume replaces them)
  ReshardTask task{std::make_shared<Model>()};
  torch::optim::AdamW opt(task.net->parameters(), torch::optim::AdamWOptions(0.01).weight_decay(0.1));
  const auto data = load_tensors(dir / "data");
  pt::data::TensorLoader loader(data.at("x"), data.at("y"), {.batch_size = 12 / world, .shuffle = false, .rank = rank, .world_size = world});
  const bool resume = env("POLICYTRAIN_FSDP_RESUME", "0") == "1";
  // POLICYTRAIN_FSDP_SHARDED=1: sharded checkpoints (each rank its rows of every parameter and of its state);
  // POLICYTRAIN_FSDP_RESUME_FROM: resume from that file or folder rather than the newest of the run.
  const std::string from = env("POLICYTRAIN_FSDP_RESUME_FROM", "");
  // The world size left out of the run fingerprint (-1): a checkpoint resumes on another one.
  pt::checkpoint::Disk disk({.directory = dir / (subdir + "-run"), .every_steps = 2,
                             .resume = !from.empty() ? from : resume ? "auto" : "", .run = {.world_size = -1},
                             .export_final = false, .log = nullptr, .sharded = env("POLICYTRAIN_FSDP_SHARDED", "0") == "1"});
  // POLICYTRAIN_FSDP_EMA=1: callbacks::Ema too (its average is written whole after fit as "ema.<name>").
  pt::Trainer trainer(task, opt, std::move(parallel), std::move(disk),
                      pt::callbacks::Ema({.enabled = env("POLICYTRAIN_FSDP_EMA", "0") == "1", .decay = 0.7, .tau = 2}));
  trainer.fit(loader, {.epochs = 1, .max_steps = std::stoll(env("POLICYTRAIN_FSDP_UNTIL", "-1"))});
  Tensors out;
  for (auto& p : task.net->named_parameters()) out["param." + p.key()] = p.value().detach().clone();
  const auto& ema = trainer.template get<pt::callbacks::Ema>();
  const auto unique = pt::unique_named_parameters(*task.net);
  for (size_t i = 0; i < ema.average().size(); ++i) out["ema." + unique[i].first] = ema.average()[i].clone();
  out["steps"] = torch::tensor(trainer.state().global_step);
  save_tensors(dir / subdir / fmt::format("rank{}", rank), out);
  return 0;
}

/// A rank's memory, enforced: LibTorch's CPU allocator for every tensor created after install(), refusing (with
/// c10::OutOfMemoryError, as an exhausted allocator) an allocation that would bring the bytes it has handed out and
/// not taken back above the budget. The default allocator does the work underneath.
class BudgetAllocator final : public c10::Allocator {
 public:
  /// Makes a budget of `bytes` LibTorch's CPU allocator for the rest of the process (leaked on purpose: tensors
  /// freed at exit still call its deleter).
  static BudgetAllocator& install(int64_t bytes) {
    auto* a = new BudgetAllocator(bytes);
    c10::SetCPUAllocator(a, /*priority=*/1);
    return *a;
  }
  c10::DataPtr allocate(size_t n) override {
    const int64_t now = live_ += static_cast<int64_t>(n);
    if (now > budget_) {
      live_ -= static_cast<int64_t>(n);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "rank budget: an allocation of ", n, " bytes would bring this rank's "
                       "tensor bytes to ", now, ", above its budget of ", budget_, " bytes");
    }
    for (int64_t p = peak_.load(); now > p && !peak_.compare_exchange_weak(p, now);) {
    }
    auto* held = new Held{inner_->allocate(n), static_cast<int64_t>(n), this};
    void* data = held->block.get();
    return {data, held, &Held::release, c10::Device(c10::DeviceType::CPU)};
  }
  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }
  /// The most bytes handed out at once.
  int64_t peak() const { return peak_.load(); }

 private:
  explicit BudgetAllocator(int64_t budget) : inner_(c10::GetDefaultCPUAllocator()), budget_(budget) {}
  struct Held {
    c10::DataPtr block;
    int64_t n;
    BudgetAllocator* owner;
    static void release(void* p) {
      auto* h = static_cast<Held*>(p);
      h->owner->live_ -= h->n;
      delete h;
    }
  };
  c10::Allocator* inner_;
  int64_t budget_;
  std::atomic<int64_t> live_{0}, peak_{0};
};

/// Scenario "budget": a model whose training state (parameters, gradients, SGD's momentum) does not fit in a
/// rank's budget (POLICYTRAIN_FSDP_BUDGET bytes, enforced by BudgetAllocator; 0: none), six units of
/// Linear(512, 512) and a root head, trained POLICYTRAIN_FSDP_STEPS steps of a global batch of 12 by
/// POLICYTRAIN_FSDP_STAGE ("dp": DataParallel; "3": stage 3; on 1 process both train the plain model). Writes the
/// parameters, or the error, and the allocator's peak.
int run_budget(const fs::path& dir, const std::string& subdir) {
  const int64_t budget = std::stoll(env("POLICYTRAIN_FSDP_BUDGET", "0"));
  BudgetAllocator* meter = budget > 0 ? &BudgetAllocator::install(budget) : nullptr;
  struct Model : torch::nn::Module {
    std::vector<pt::parallel::FullyShard<torch::nn::Linear>> units;
    torch::nn::Linear head{nullptr};
    Model() {
      for (int i = 0; i < 6; ++i)
        units.push_back(register_module(fmt::format("fc{}", i), pt::parallel::FullyShard<torch::nn::Linear>(torch::nn::Linear(512, 512))));
      head = register_module("head", torch::nn::Linear(512, 10));
    }
    torch::Tensor forward(torch::Tensor x) {
      for (auto& u : units) x = torch::tanh(u(x));
      return head(x);
    }
  };
  struct BudgetTask {
    std::shared_ptr<Model> net;
    torch::nn::Module& module() { return *net; }
    torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
  };
  const std::string stage = env("POLICYTRAIN_FSDP_STAGE", "3");
  const pt::parallel::DataParallelOptions dpo{.timeout = std::chrono::seconds(60)};
  Tensors out;
  std::string message = "no error";
  try {
    pt::parallel::ShardedDataParallel parallel(dpo, {.stage = stage == "dp" ? 0 : 3});
    const int rank = parallel.rank(), world = parallel.world_size();
    torch::manual_seed(7);  // the same initial weights on every rank and in the reference
    BudgetTask task{std::make_shared<Model>()};
    torch::optim::SGD opt(task.net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    const auto data = load_tensors(dir / "data");
    pt::data::TensorLoader loader(data.at("x"), data.at("y"), {.batch_size = 12 / world, .shuffle = false, .rank = rank, .world_size = world});
    pt::Trainer trainer(task, opt, std::move(parallel));
    trainer.fit(loader, {.epochs = 1});
    for (auto& p : task.net->named_parameters()) out["param." + p.key()] = p.value().detach().clone();
    out["steps"] = torch::tensor(trainer.state().global_step);
  } catch (const std::exception& e) {
    message = e.what();
  }
  const std::string rank = env("RANK", "0");
  std::ofstream(dir / subdir / ("error" + rank + ".txt")) << message;
  out["peak"] = torch::tensor(meter ? meter->peak() : int64_t{0});
  save_tensors(dir / subdir / ("rank" + rank), out);
  return 0;
}

/// Scenario "gathered"'s probe: the most detail::GatheredBytes held at any step's before_step so far ("step_peak"),
/// and at step `last`'s (the backward done, every unit freed) each unit gathered and freed again alone, measured.
struct AloneProbe {
  int64_t last;
  Tensors* out;
  template <class Ctx>
  void before_step(Ctx& ctx) {
    out->insert_or_assign("step_peak", torch::tensor(std::max(
        out->count("step_peak") ? out->at("step_peak").item<int64_t>() : int64_t{0}, pt::parallel::detail::GatheredBytes::peak.load())));
    if (ctx.state().global_step + 1 != last) return;
    int i = 0;
    for (const auto& m : ctx.module().modules()) {
      auto* unit = dynamic_cast<pt::parallel::FullyShardedUnit*>(m.get());
      if (!unit) continue;
      auto group = std::dynamic_pointer_cast<pt::parallel::detail::ShardGroup>(unit->shard_group());
      if (!group) throw std::runtime_error("a unit without its shard group mid-fit");
      if (group->unsharded()) throw std::runtime_error("a unit gathered after the backward");
      const int64_t counted = pt::parallel::detail::GatheredBytes::live.load();
      int64_t peak = 0, live = 0;
      {
        pt::memory::TensorBytesMeter meter;
        group->unshard();
        peak = meter.peak();
        live = meter.live();
      }
      (*out)[fmt::format("unit{}.alloc_peak", i)] = torch::tensor(peak);
      (*out)[fmt::format("unit{}.alloc_live", i)] = torch::tensor(live);
      (*out)[fmt::format("unit{}.counted", i)] = torch::tensor(pt::parallel::detail::GatheredBytes::live.load() - counted);
      group->reshard();
      ++i;
    }
  }
};

/// Scenario "gathered": a chain of units of Linear layers whose widths a seed draws (POLICYTRAIN_FSDP_SEED: 3 to 5
/// units, 5 to 40 features, so that rows chunk unevenly) and a root head, SGD for 3 steps of seeded data with
/// prefetch on, in POLICYTRAIN_FSDP_PARAM_DTYPE (mixed precision's param_dtype, "" none). Writes, from the model: each
/// unit's gathered bytes (its parameters in the dtype it computes in) and the bound of the gathered bytes alive at
/// once in a step (the root's, which stay gathered from the forward to the end of the backward, plus the largest
/// pair of units adjacent in the forward order: the one computing and the one prefetched); measured: the most
/// detail::GatheredBytes held during the steps, and at the last step's before_step, for each unit in turn, what its
/// all-gather alone allocated, counted by LibTorch's CPU allocator (memory::TensorBytesMeter: tensor bytes, the
/// collective's own included) and by GatheredBytes.
int run_gathered(const fs::path& dir, const std::string& subdir) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(std::stoull(env("POLICYTRAIN_FSDP_SEED", "1")));
  const auto draw = [&](int64_t lo, int64_t hi) { return torch::randint(lo, hi + 1, {1}, g).item<int64_t>(); };
  std::vector<int64_t> width{draw(5, 40)};
  for (int64_t i = 0, n = draw(3, 5); i < n; ++i) width.push_back(draw(5, 40));
  struct Chain : torch::nn::Module {
    std::vector<pt::parallel::FullyShard<torch::nn::Linear>> units;
    torch::nn::Linear head{nullptr};
    explicit Chain(const std::vector<int64_t>& w) {
      for (size_t i = 0; i + 1 < w.size(); ++i)
        units.push_back(register_module(fmt::format("fc{}", i), pt::parallel::FullyShard<torch::nn::Linear>(torch::nn::Linear(w[i], w[i + 1]))));
      head = register_module("head", torch::nn::Linear(w.back(), 2));
    }
    torch::Tensor forward(torch::Tensor x) {
      for (auto& u : units) x = torch::tanh(u(x));
      return head(x);
    }
  };
  struct ChainTask {
    std::shared_ptr<Chain> net;
    torch::nn::Module& module() { return *net; }
    torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::mse_loss(net->forward(b.x), b.y); }
  };
  const auto param_dtype = dtype_named(env("POLICYTRAIN_FSDP_PARAM_DTYPE", ""));
  pt::parallel::ShardedDataParallel parallel({.timeout = std::chrono::seconds(120)},
                                             {.stage = 3, .mp_policy = {.param_dtype = param_dtype}, .prefetch = true});
  const int rank = parallel.rank(), world = parallel.world_size();
  torch::manual_seed(3);  // the same initial weights on every rank
  ChainTask task{std::make_shared<Chain>(width)};
  // The bytes of a module's parameters in the dtype its gathered copies have.
  const auto gathered_bytes = [&](torch::nn::Module& m, bool recurse) {
    int64_t n = 0;
    for (const auto& p : m.parameters(recurse))
      n += p.numel() * static_cast<int64_t>(c10::elementSize(param_dtype.value_or(p.scalar_type())));
    return n;
  };
  Tensors out;
  std::vector<int64_t> unit_bytes;
  for (auto& u : task.net->units) unit_bytes.push_back(gathered_bytes(*u, true));
  int64_t pair = 0;
  for (size_t i = 0; i + 1 < unit_bytes.size(); ++i) pair = std::max(pair, unit_bytes[i] + unit_bytes[i + 1]);
  out["bound"] = torch::tensor(gathered_bytes(*task.net->head, true) + pair);
  for (size_t i = 0; i < unit_bytes.size(); ++i) out[fmt::format("unit{}.bytes", i)] = torch::tensor(unit_bytes[i]);
  constexpr int64_t kSteps = 3;
  auto gd = at::make_generator<at::CPUGeneratorImpl>(std::stoull(env("POLICYTRAIN_FSDP_SEED", "1")) + 1000);
  const int64_t n = kSteps * 4 * world;
  pt::data::TensorLoader loader(torch::randn({n, width.front()}, gd), torch::randn({n, 2}, gd),
                                {.batch_size = 4, .shuffle = false, .rank = rank, .world_size = world});
  torch::optim::SGD opt(task.net->parameters(), torch::optim::SGDOptions(0.1));
  pt::parallel::detail::GatheredBytes::reset_peak();
  pt::Trainer trainer(task, opt, std::move(parallel), AloneProbe{kSteps, &out});
  trainer.fit(loader, {.epochs = 1});
  out["prefetches"] = torch::tensor(trainer.policy<pt::Category::parallel>().prefetch_calls());
  out["steps"] = torch::tensor(trainer.state().global_step);
  save_tensors(dir / subdir / fmt::format("rank{}", rank), out);
  return 0;
}

/// The elements of callbacks::Ema's average this rank holds during a fit (at each epoch's end).
struct AverageSize {
  int64_t* numel;
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    *numel = 0;
    for (const auto& t : ctx.template get<pt::callbacks::Ema>().average()) *numel += t.numel();
  }
};

/// What checkpoint::Disk's exports gathered at stage 3 (detail::GatheredBytes, the bytes of gathered parameters alive
/// in this process beyond those alive before): during each epoch end's save (best.pt with best.ckpt), the most over
/// the epochs, "save_gathered"; during final.pt's export at fit end, "final_gathered", and whether final.pt was
/// on disk before the parallel policy gathered the whole model ("final_before_unshard", rank 0). Its before_unshard
/// hook runs after Disk's (callbacks come after the checkpoint policy).
struct ExportGathered {
  Tensors* out;
  int64_t base = 0;
  std::filesystem::path final_pt;
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    using pt::parallel::detail::GatheredBytes;
    auto& par = ctx.template policy<pt::Category::parallel>();
    if constexpr (requires(std::function<void()> f) { par.before_unshard(f); })
      par.before_unshard([this, &ctx] {
        (*out)["final_gathered"] = torch::tensor(GatheredBytes::peak.load() - base);
        if (ctx.is_main()) (*out)["final_before_unshard"] = torch::tensor(std::filesystem::exists(final_pt) ? 1 : 0);
      });
  }
  /// Once the validation is over (before Disk's epoch-end save) and after each step (the last one's: before fit end).
  template <class Ctx>
  void on_validation_end(Ctx&, const pt::Metrics&) {
    start();
  }
  template <class Ctx>
  void on_epoch_end(Ctx&) {
    using pt::parallel::detail::GatheredBytes;
    auto& v = (*out)["save_gathered"];
    const int64_t now = GatheredBytes::peak.load() - base;
    v = torch::tensor(v.defined() ? std::max(v.item<int64_t>(), now) : now);
    start();
  }
  void start() {
    using pt::parallel::detail::GatheredBytes;
    GatheredBytes::reset_peak();
    base = GatheredBytes::live.load();
  }
};

/// Scenario "ema": callbacks::Ema (decay 0.8 with a ramp of tau 3, every POLICYTRAIN_FSDP_EMA_EVERY steps taken) at
/// POLICYTRAIN_FSDP_STAGE (3, or 0: ShardedDataParallel's DataParallel behaviour, or "dp": parallel::DataParallel
/// itself), SGD with momentum on <dir>/data and <dir>/init, a validation after each of 2 epochs (the average swapped
/// in), checkpoint::Disk (last.ckpt, best.ckpt with best.pt, final.pt) in <dir>/<subdir>-run; POLICYTRAIN_FSDP_UNTIL:
/// stop at that optimizer step (-1: the end), POLICYTRAIN_FSDP_RESUME=1: resume from the directory's newest
/// checkpoint. Writes the parameters, the average (whole after fit), the buffers' average and each validation's loss
/// and accuracy.
template <class Parallel>
int run_ema_with(const fs::path& dir, const std::string& subdir, Parallel parallel) {
  struct EmaTask : Task {
    pt::Prediction validation_step(const pt::Batch& b) {
      auto out = net->forward(b.x);
      return {torch::nn::functional::cross_entropy(out, b.y), out};
    }
  };
  const int rank = parallel.rank(), world = parallel.world_size();
  EmaTask task;
  {
    torch::NoGradGuard ng;
    const auto init = load_tensors(dir / "init");
    for (auto& p : task.net->named_parameters()) p.value().copy_(init.at(p.key()));
    for (auto& b : task.net->named_buffers()) b.value().copy_(init.at(b.key()));
  }
  const auto data = load_tensors(dir / "data");
  pt::data::TensorLoader loader(data.at("x"), data.at("y"), {.batch_size = kBatchPerRank, .shuffle = false, .rank = rank, .world_size = world});
  pt::data::TensorLoader val(data.at("x").narrow(0, 0, 16), data.at("y").narrow(0, 0, 16),
                             {.batch_size = 4, .shuffle = false, .rank = rank, .world_size = world});
  torch::optim::SGD opt(task.net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  const bool resume = env("POLICYTRAIN_FSDP_RESUME", "0") == "1";
  // POLICYTRAIN_FSDP_SHARDED=1: sharded checkpoints (each rank its rows of the parameters, the state and the average).
  pt::checkpoint::Disk disk({.directory = dir / (subdir + "-run"), .best = true, .resume = resume ? "auto" : "", .log = nullptr,
                             .sharded = env("POLICYTRAIN_FSDP_SHARDED", "0") == "1"});
  int64_t average_numel = -1;
  Tensors out;
  pt::Trainer trainer(task, opt, std::move(parallel), std::move(disk),
                      pt::callbacks::Ema({.decay = 0.8, .tau = 3, .every = std::stoll(env("POLICYTRAIN_FSDP_EMA_EVERY", "1"))}),
                      AverageSize{&average_numel}, ExportGathered{&out, 0, dir / (subdir + "-run") / "final.pt"});
  const auto result = trainer.fit(loader, val, {.epochs = 2, .max_steps = std::stoll(env("POLICYTRAIN_FSDP_UNTIL", "-1"))});
  const auto& ema = trainer.template get<pt::callbacks::Ema>();
  if (ema.sharded()) throw std::runtime_error("the average is still sharded after fit");
  const auto named = pt::unique_named_parameters(*task.net);
  for (size_t i = 0; i < named.size(); ++i) {
    out["param." + named[i].first] = named[i].second.detach().clone();
    out["ema." + named[i].first] = ema.average().at(i).clone();
  }
  for (auto& b : task.net->named_buffers()) out["buffer." + b.key()] = b.value().clone();
  size_t averaged = 0;  // the buffers' average holds the floating-point buffers, in the module's order
  for (const auto& [name, b] : pt::unique_named_buffers(*task.net))
    if (b.is_floating_point()) out["ema_buffer." + name] = ema.buffer_average().at(averaged++).clone();
  if (averaged != ema.buffer_average().size()) throw std::runtime_error("the buffers' average has other buffers than the model");
  for (size_t i = 0; i < result.validation.size(); ++i) {
    out[fmt::format("val.{}.loss", result.validation_steps[i])] = torch::tensor(result.validation[i].loss, torch::kDouble);
    out[fmt::format("val.{}.accuracy", result.validation_steps[i])] = torch::tensor(result.validation[i].get("accuracy"), torch::kDouble);
  }
  out["steps"] = torch::tensor(trainer.state().global_step);
  out["average_numel"] = torch::tensor(average_numel);
  save_tensors(dir / subdir / fmt::format("rank{}", rank), out);
  return 0;
}
int run_ema(const fs::path& dir, const std::string& subdir) {
  const auto stage = env("POLICYTRAIN_FSDP_STAGE", "3");
  if (stage == "dp") return run_ema_with(dir, subdir, pt::parallel::DataParallel({.timeout = std::chrono::seconds(120)}));
  return run_ema_with(dir, subdir, pt::parallel::ShardedDataParallel({.timeout = std::chrono::seconds(120)}, {.stage = std::stoi(stage)}));
}

/// Keeps every step's loss on this rank (a non-finite one as -1) in `out`'s "losses" (a double's bits each).
struct LossLog {
  Tensors* out;
  std::vector<double> losses;
  template <class Ctx>
  void after_step(Ctx& ctx, bool) {
    const double l = ctx.state().loss_value();
    losses.push_back(std::isfinite(l) ? l : -1.0);
    // The doubles' bits, as int64 (save_tensors keeps floating point as float32): compared bit for bit.
    (*out)["losses"] = torch::tensor(losses, torch::kDouble).view(torch::kLong);
  }
};

/// Scenario "rollback": POLICYTRAIN_FSDP_STAGE (dp: parallel::DataParallel, or 3) with callbacks::DivergenceRollback
/// (a snapshot every 2 steps) and TensorBoard's histograms every step (<dir>/<subdir>-tb), SGD with momentum under a
/// cosine schedule; one input of rank 1 is inf at step POLICYTRAIN_FSDP_NAN_AT, so that step's loss is NaN there:
/// NonFinite::rollback skips it on every rank and DivergenceRollback puts every rank back to its last snapshot with
/// half the lr. Writes the weights, each rank's rows of the momentum (the rows stage 3 holds; DataParallel's cut
/// alike), the buffers, the rollback count, the lr and the losses.
int run_rollback_with(const fs::path& dir, const std::string& subdir, auto parallel) {
  const int rank = parallel.rank(), world = parallel.world_size();
  Task task;
  {
    torch::NoGradGuard ng;
    const auto init = load_tensors(dir / "init");
    for (auto& p : task.net->named_parameters()) p.value().copy_(init.at(p.key()));
    for (auto& b : task.net->named_buffers()) b.value().copy_(init.at(b.key()));
  }
  const auto data = load_tensors(dir / "data");
  auto x = data.at("x").clone();
  const int64_t nan_at = std::stoll(env("POLICYTRAIN_FSDP_NAN_AT", "3"));
  x[(nan_at - 1) * kBatchPerRank * 2 + 1][0][0][0] = std::numeric_limits<float>::infinity();  // rank 1's batch of that step
  pt::data::TensorLoader loader(x, data.at("y"), {.batch_size = kBatchPerRank, .shuffle = false, .rank = rank, .world_size = world});
  torch::optim::SGD opt(task.net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  Tensors out;
  pt::Trainer trainer(task, opt, std::move(parallel), pt::schedule::Lr({.kind = pt::schedule::Kind::cosine}),
                      pt::precision::Fp32(pt::NonFinite::rollback),
                      pt::callbacks::DivergenceRollback({.snapshot_every = 2, .log = nullptr}),
                      pt::callbacks::TensorBoard({.dir = dir / (subdir + "-tb"), .histogram_every = 1}), LossLog{&out, {}});
  trainer.fit(loader, {.epochs = 1});
  for (const auto& [name, p] : pt::unique_named_parameters(*task.net)) {
    out["param." + name] = p.detach().clone();
    torch::Tensor shard;  // stage 3: the tensor the optimizer stepped
    auto& par = trainer.template policy<pt::Category::parallel>();
    if constexpr (requires { par.shard(p); }) shard = par.shard(p);
    auto it = opt.state().find((shard.defined() ? shard : p).unsafeGetTensorImpl());
    if (it == opt.state().end()) throw std::runtime_error("no optimizer state for " + name);
    const auto m = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
    out["state." + name + ".momentum_buffer"] = shard.defined() ? m.clone() : pt::parallel::dim0_piece(m, rank, world).clone();
  }
  for (auto& b : task.net->named_buffers()) out["buffer." + b.key()] = b.value().clone();
  out["rollbacks"] = torch::tensor(trainer.template get<pt::callbacks::DivergenceRollback>().rollbacks());
  out["snapshot_bytes"] = torch::tensor(trainer.template get<pt::callbacks::DivergenceRollback>().snapshot_bytes());
  out["skipped"] = torch::tensor(trainer.state().skipped_steps);
  out["lr"] = torch::tensor({opt.param_groups().at(0).options().get_lr()}, torch::kDouble).view(torch::kLong);  // the bits
  save_tensors(dir / subdir / fmt::format("rank{}", rank), out);
  return 0;
}
int run_rollback(const fs::path& dir, const std::string& subdir) {
  if (env("POLICYTRAIN_FSDP_STAGE", "3") == "dp") return run_rollback_with(dir, subdir, pt::parallel::DataParallel({.timeout = std::chrono::seconds(120)}));
  return run_rollback_with(dir, subdir, pt::parallel::ShardedDataParallel({.timeout = std::chrono::seconds(120)}, {.stage = 3}));
}

/// One rank of our side: POLICYTRAIN_FSDP_STAGE (3, or 0: DataParallel's averaged gradients on whole parameters),
/// _OPTIMIZER (adamw, sgd), _STEPS (optimizer steps), _ACCUMULATE (micro-batches per step); the data and initial
/// weights of <dir>/data and <dir>/init.
int run_worker(const fs::path& dir, const std::string& subdir) {
  if (env("POLICYTRAIN_FSDP_SCENARIO", "") == "tied") return run_tied(dir, subdir);
  if (env("POLICYTRAIN_FSDP_SCENARIO", "") == "recomputed") return run_recomputed(dir, subdir);
  if (env("POLICYTRAIN_FSDP_SCENARIO", "") == "reshard") return run_reshard(dir, subdir);
  if (env("POLICYTRAIN_FSDP_SCENARIO", "") == "budget") return run_budget(dir, subdir);
  if (env("POLICYTRAIN_FSDP_SCENARIO", "") == "ema") return run_ema(dir, subdir);
  if (env("POLICYTRAIN_FSDP_SCENARIO", "") == "rollback") return run_rollback(dir, subdir);
  if (env("POLICYTRAIN_FSDP_SCENARIO", "") == "gathered") return run_gathered(dir, subdir);
  const int stage = std::stoi(env("POLICYTRAIN_FSDP_STAGE", "3"));
  const int64_t steps = std::stoll(env("POLICYTRAIN_FSDP_STEPS", "5"));
  const std::string kind = env("POLICYTRAIN_FSDP_OPTIMIZER", "adamw");
  const int64_t accumulate = std::stoll(env("POLICYTRAIN_FSDP_ACCUMULATE", "1"));
  const double clip = std::stod(env("POLICYTRAIN_FSDP_CLIP", "0"));  // > 0: GradClip to this total norm
  // FSDP2 does not synchronise buffers: each rank's batch norm keeps its own running statistics.
  // POLICYTRAIN_FSDP_PARAM_DTYPE / _REDUCE_DTYPE: FSDP2's MixedPrecisionPolicy (fsdp_oracle.py's --param-dtype,
  // --reduce-dtype).
  const auto param_dtype = dtype_named(env("POLICYTRAIN_FSDP_PARAM_DTYPE", ""));
  // [snippet:fsdp-policy]
  pt::parallel::ShardedDataParallel parallel({.timeout = std::chrono::seconds(120), .broadcast_buffers = false},
                                             {.stage = stage, .mp_policy = {.param_dtype = param_dtype,
                                                                            .reduce_dtype = dtype_named(env("POLICYTRAIN_FSDP_REDUCE_DTYPE", ""))},
                                              .prefetch = env("POLICYTRAIN_FSDP_PREFETCH", "1") == "1"});
  // [/snippet:fsdp-policy]
  const int rank = parallel.rank(), world = parallel.world_size();
  Task task;
  {
    torch::NoGradGuard ng;
    const auto init = load_tensors(dir / "init");
    for (auto& p : task.net->named_parameters()) p.value().copy_(init.at(p.key()));
    for (auto& b : task.net->named_buffers()) b.value().copy_(init.at(b.key()));
    // As fsdp_oracle.py: batch norm's running statistics in param_dtype (FSDP2 casts parameters, not buffers).
    if (param_dtype)
      for (auto& b : task.net->named_buffers())
        if (b.key().rfind("conv.1.", 0) == 0 && b.value().is_floating_point()) b.value().set_data(b.value().to(*param_dtype));
  }
  if (env("POLICYTRAIN_FSDP_FREEZE", "0") == "1") {
    // Frozen parameters: a whole unit (the embedding), one parameter of a unit beside a trained one (fc.bias), and one
    // of the root (head.bias).
    for (const auto* name : {"emb.weight", "fc.bias", "head.bias"}) task.net->named_parameters()[name].requires_grad_(false);
  }
  const auto data = load_tensors(dir / "data");
  pt::data::TensorLoader loader(data.at("x"), data.at("y"),
                                {.batch_size = kBatchPerRank / accumulate, .shuffle = false, .rank = rank, .world_size = world});
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (kind == "adamw") opt = std::make_unique<torch::optim::AdamW>(task.net->parameters(), torch::optim::AdamWOptions(0.01).weight_decay(0.1));
  else opt = std::make_unique<torch::optim::SGD>(task.net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  Tensors out;
  // [snippet:fsdp-trainer]
  pt::Trainer trainer(task, *opt, std::move(parallel), GradCapture{steps, &out}, pt::accumulate::Steps(accumulate),
                      pt::callbacks::GradClip(clip > 0 ? pt::callbacks::GradClip::Options{.mode = pt::callbacks::GradClip::Mode::norm,
                                                                                          .max_norm = clip}
                                                       : pt::callbacks::GradClip::Options{}),
                      pt::callbacks::Ema({.enabled = env("POLICYTRAIN_FSDP_EMA", "0") == "1", .decay = 0.5, .tau = 0}),
                      pt::callbacks::DivergenceRollback({.enabled = env("POLICYTRAIN_FSDP_ROLLBACK", "0") == "1", .spike_factor = 100}),
                      pt::callbacks::TensorBoard({.dir = env("POLICYTRAIN_FSDP_TB", "0") == "1" ? dir / (subdir + "-tb") : fs::path(),
                                                  .histogram_every = 1}),
                      pt::precision::Autocast({.dtype = dtype_named(env("POLICYTRAIN_FSDP_AUTOCAST", "fp32"))}));
  // [/snippet:fsdp-trainer]
  if (env("POLICYTRAIN_FSDP_EXPECT_ERROR", "0") == "1") {
    // A combination stage 3 refuses: every rank writes what fit said (or "no error", or the loss of a trained run).
    std::string message = "no error";
    try {
      trainer.fit(loader, {.epochs = 1});
      message += fmt::format(" (trained {} steps; fc.weight's sum {})", trainer.state().global_step,
                             task.net->fc->inner()->weight.sum().item<double>());
    } catch (const std::exception& e) {
      message = e.what();
    }
    std::ofstream(dir / subdir / fmt::format("error{}.txt", rank)) << message;
    return 0;
  }
  trainer.fit(loader, {.epochs = 1});
  if (trainer.state().global_step != steps) throw std::runtime_error("trained " + std::to_string(trainer.state().global_step) + " steps");
  const auto named = task.net->named_parameters();
  const auto& ps = opt->param_groups().at(0).params();
  auto& z = trainer.policy<pt::Category::parallel>();
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto& name = named[i].key();
    out["param." + name] = named[i].value().detach().clone();
    if (stage == 3) {
      if (!z.shard(named[i].value()).is_same(ps[i])) throw std::runtime_error("the optimizer does not step the shard of " + name);
      out["shard." + name] = ps[i].detach().clone();
    }
    auto it = opt->state().find(ps[i].unsafeGetTensorImpl());
    if (it == opt->state().end()) continue;
    if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) {
      out["state." + name + ".exp_avg"] = a->exp_avg().clone();
      out["state." + name + ".exp_avg_sq"] = a->exp_avg_sq().clone();
      out["state." + name + ".step"] = torch::tensor(static_cast<float>(a->step()));
    } else if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
      out["state." + name + ".momentum_buffer"] = s->momentum_buffer().clone();
    }
  }
  for (auto& b : task.net->named_buffers()) out["buffer." + b.key()] = b.value().clone();
  if (clip > 0) out["clip.norm"] = trainer.template get<pt::callbacks::GradClip>().last_norm_tensor().reshape({1});
  out["all_gathers"] = torch::tensor(z.all_gather_calls());
  out["reduce_scatters"] = torch::tensor(z.reduce_scatter_calls());
  out["prefetches"] = torch::tensor(z.prefetch_calls());
  save_tensors(dir / subdir / fmt::format("rank{}", rank), out);
  return 0;
}

const int kWorkerHook = [] {
  if (!std::getenv("POLICYTRAIN_FSDP_WORKER")) return 0;
  const fs::path dir = std::getenv("POLICYTRAIN_FSDP_DIR");
  const std::string subdir = std::getenv("POLICYTRAIN_FSDP_SUBDIR");
  const std::string rank = std::getenv("RANK") ? std::getenv("RANK") : "0";
  fs::create_directories(dir / subdir);
  std::freopen((dir / (subdir + "-stderr" + rank + ".txt")).c_str(), "w", stderr);
  testing::run_worker_and_exit([&] { return run_worker(dir, subdir); });
}();

using testing::read_text;

int sh(const std::string& cmd, const fs::path& log) {
  const std::string line = "timeout 900 sh -c '" + cmd + "' >" + log.string() + " 2>&1";
  const int rc = std::system(line.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

/// Python's side: torchrun on fsdp_oracle.py.
void run_python(int world, const fs::path& dir, int seed, const std::string& optimizer, int64_t steps, bool reshard,
                const std::string& extra = "") {
  const int port = pt::parallel::free_port();
  const std::string cmd = fmt::format(
      "OMP_NUM_THREADS=1 torchrun --nproc-per-node {} --master-addr 127.0.0.1 --master-port {} {}/tests/integration/"
      "fsdp_oracle.py --seed {} --optimizer {} --steps {} --reshard {} --out {}{}", world, port, POLICYTRAIN_SOURCE_DIR,
      seed, optimizer, steps, reshard ? 1 : 0, dir.string(), extra);
  const int rc = sh(cmd, dir / "torchrun.log");
  INFO("torchrun: " << read_text(dir / "torchrun.log"));
  REQUIRE(rc == 0);
}

/// Our side: `world` ranks of this binary (launch_local).
void run_ours(int world, const fs::path& dir, const std::string& subdir, std::map<std::string, std::string> extra) {
  extra.insert({{"POLICYTRAIN_FSDP_WORKER", "1"},
                {"POLICYTRAIN_FSDP_DIR", dir.string()},
                {"POLICYTRAIN_FSDP_SUBDIR", subdir},
                {"OMP_NUM_THREADS", "1"}});
  const int rc = pt::parallel::launch_local({.nproc = world, .program = "/proc/self/exe", .env = extra,
                                             .deadline = std::chrono::seconds(300)});
  std::string logs;
  for (int r = 0; r < world; ++r) logs += fmt::format("\nrank {}: {}", r, read_text(dir / fmt::format("{}-stderr{}.txt", subdir, r)));
  INFO(logs);
  REQUIRE(rc == 0);
}

/// Compares every tensor `want` has whose name starts with one of `prefixes` with `got`'s of the same name.
void compare(const fs::path& want_dir, const fs::path& got_dir, double tol, const std::vector<std::string>& prefixes) {
  const auto want = load_tensors(want_dir), got = load_tensors(got_dir);
  int compared = 0;
  for (const auto& [name, w] : want) {
    bool take = false;
    for (const auto& p : prefixes) take = take || name.rfind(p, 0) == 0;
    if (!take) continue;
    INFO(got_dir.string() << " " << name);
    REQUIRE(got.count(name) == 1);
    const auto& g = got.at(name);
    REQUIRE(g.sizes() == w.sizes());
    ++compared;
    if (w.numel() == 0) continue;
    const double d = (g.to(torch::kDouble) - w.to(torch::kDouble)).abs().max().item<double>();
    INFO("max |ours - reference| = " << d);
    CHECK(d <= tol);
  }
  CHECK(compared > 0);
}

/// What fsdp_oracle.py writes, drawn here from `seed` (for the tests whose reference is DataParallel, not Python):
/// `n` samples in <dir>/data and the model's initial weights and buffers in <dir>/init.
void write_seeded_inputs(const fs::path& dir, int seed, int64_t n) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  save_tensors(dir / "data", {{"x", torch::randn({n, 2, 4, 4}, g)}, {"y", torch::randint(0, 3, {n}, g)}});
  torch::manual_seed(static_cast<uint64_t>(seed));
  Net net;
  Tensors init;
  for (auto& p : net->named_parameters()) init[p.key()] = p.value().detach();
  for (auto& b : net->named_buffers()) init[b.key()] = b.value().detach();
  save_tensors(dir / "init", init);
}

/// Mixed precision of both sides: FSDP2's MixedPrecisionPolicy(param_dtype, reduce_dtype), "" unset.
struct Mp {
  std::string param, reduce;
};

/// Python's FSDP2 and ours on `world` ranks, compared tensor by tensor on every rank: parameters, shards and
/// optimizer state within `tol`, gradient shards and buffers within `grad_tol`.
void side_by_side(int world, const std::string& optimizer, int seed, bool reshard = true, const Mp& mp = {}, double tol = 1e-6,
                  double grad_tol = 1e-6) {
  const auto dir = testing::temp_dir(fmt::format("fsdp-oracle-{}-{}-{}-{}{}{}", world, optimizer, seed, reshard, mp.param, mp.reduce));
  constexpr int64_t kSteps = 5;
  std::string extra;
  if (!mp.param.empty()) extra += " --param-dtype " + mp.param;
  if (!mp.reduce.empty()) extra += " --reduce-dtype " + mp.reduce;
  run_python(world, dir, seed, optimizer, kSteps, reshard, extra);
  run_ours(world, dir, "cpp", {{"POLICYTRAIN_FSDP_OPTIMIZER", optimizer}, {"POLICYTRAIN_FSDP_STEPS", std::to_string(kSteps)},
                               {"POLICYTRAIN_FSDP_RESHARD", reshard ? "1" : "0"}, {"POLICYTRAIN_FSDP_PARAM_DTYPE", mp.param},
                               {"POLICYTRAIN_FSDP_REDUCE_DTYPE", mp.reduce}});
  for (int r = 0; r < world; ++r) {
    compare(dir / "py" / fmt::format("rank{}", r), dir / "cpp" / fmt::format("rank{}", r), tol, {"param.", "shard.", "state."});
    compare(dir / "py" / fmt::format("rank{}", r), dir / "cpp" / fmt::format("rank{}", r), grad_tol, {"grad.", "buffer."});
  }
  // One reduce-scatter per unit (3) and the root per step. The 3 units gather before their forward and, when they
  // reshard after it, again before their backward; the root gathers before every forward but the first (its
  // parameters are whole at fit begin, and freed after each step; with a param_dtype they are whole in fp32 then, so
  // the first forward gathers them too); fit end gathers all 4 once more.
  const auto got = load_tensors(dir / "cpp" / "rank0");
  CHECK(got.at("reduce_scatters").item<int64_t>() == 4 * kSteps);
  CHECK(got.at("all_gathers").item<int64_t>() == (reshard ? 7 : 4) * kSteps - (mp.param.empty() ? 1 : 0) + 4);
}

}  // namespace

TEST_CASE("stage 3 oracle: 2 ranks, AdamW, equal PyTorch FSDP2's fully_shard (parameters, shards, gradient shards, state, buffers) within 1e-6") {
  side_by_side(2, "adamw", 1);
}

TEST_CASE("stage 3 oracle: 3 ranks (rank 2's convolution shards empty), SGD with momentum, equal fully_shard within 1e-6" * doctest::test_suite("extended")) {
  side_by_side(3, "sgd", 2);
}

TEST_CASE("stage 3 oracle: 3 ranks, AdamW, reshard_after_forward off, equal fully_shard within 1e-6" * doctest::test_suite("extended")) {
  side_by_side(3, "adamw", 3, /*reshard=*/false);
}

TEST_CASE("stage 3 oracle: 2 ranks, SGD with momentum, equal fully_shard within 1e-6" * doctest::test_suite("extended")) {
  side_by_side(2, "sgd", 4);
}

// Mixed precision: the forward and backward run in bf16 on both sides with the same casts (the shard cast before the
// all-gather, the gradients cast to reduce_dtype before the reduce-scatter and to fp32 after), so the gradient shards
// and batch norm's statistics are bit-identical, and so is everything under SGD with momentum. AdamW's parameters
// and exp_avg differ in the last bits (up to 6e-8): LibTorch's AdamW updates exp_avg as mul_(beta1).add_(grad,
// 1 - beta1), Python's as lerp_(grad, 1 - beta1), with or without mixed precision; the 1e-6 of the fp32 cases.
TEST_CASE("stage 3 oracle: mixed precision, param_dtype bf16, 2 ranks, AdamW, equal to fully_shard with MixedPrecisionPolicy(param_dtype=bfloat16) (gradient shards bit-identical)" * doctest::test_suite("extended")) {
  side_by_side(2, "adamw", 5, true, {.param = "bf16", .reduce = ""}, 1e-6, 0.0);
}

TEST_CASE("stage 3 oracle: mixed precision, param_dtype bf16 and reduce_dtype fp32, 3 ranks, SGD with momentum, bit-identical to fully_shard" * doctest::test_suite("extended")) {
  side_by_side(3, "sgd", 6, true, {.param = "bf16", .reduce = "fp32"}, 0.0, 0.0);
}

TEST_CASE("stage 3 oracle: mixed precision, param_dtype bf16 and reduce_dtype fp32, 2 ranks, AdamW, equal to fully_shard (gradient shards bit-identical)" * doctest::test_suite("extended")) {
  side_by_side(2, "adamw", 7, true, {.param = "bf16", .reduce = "fp32"}, 1e-6, 0.0);
}

TEST_CASE("stage 3 oracle: mixed precision, param_dtype bf16, 3 ranks, SGD with momentum, bit-identical to fully_shard" * doctest::test_suite("extended")) {
  side_by_side(3, "sgd", 8, true, {.param = "bf16", .reduce = ""}, 0.0, 0.0);
}

TEST_CASE("stage 3 oracle: mixed precision, param_dtype fp16 (gradients reduce-scattered in fp16), 3 ranks, SGD with momentum, bit-identical to fully_shard" * doctest::test_suite("extended")) {
  side_by_side(3, "sgd", 9, true, {.param = "fp16", .reduce = ""}, 0.0, 0.0);
}

TEST_CASE("stage 3 refuses a weight tied across two units at fit begin, naming both places, on every rank") {
  const auto dir = testing::temp_dir("fsdp-tied");
  run_ours(2, dir, "tied", {{"POLICYTRAIN_FSDP_SCENARIO", "tied"}});
  for (int r = 0; r < 2; ++r) {
    const auto m = read_text(dir / "tied" / fmt::format("error{}.txt", r));
    INFO(m);
    CHECK(m.find("one tensor is the parameter 'a.weight' (unit 'a') and 'b.weight' (unit 'b')") != std::string::npos);
    CHECK(m.find("put both modules in one unit") != std::string::npos);
  }
}

TEST_CASE("ShardingOptions: stage 4 is refused, naming the stages there are, and stage 3 refuses the Reducer's options") {
  const auto what = [](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto m4 = what([] { pt::parallel::ShardedDataParallel({.enabled = false}, {.stage = 4}); });
  CHECK(m4.find("stage 4 is not supported") != std::string::npos);
  CHECK(m4.find("3 (parameters too, gathered per parallel::FullyShard unit)") != std::string::npos);
  const auto m3 = what([] { pt::parallel::ShardedDataParallel({.enabled = false, .static_graph = true}, {.stage = 3}); });
  CHECK(m3.find("stage 3 does not support DataParallelOptions::static_graph") != std::string::npos);
}

TEST_CASE("Dim0Chunk: torch.chunk's pieces, padded, for every row count up to 12 and 1 to 5 ranks") {
  for (int64_t world = 1; world <= 5; ++world)
    for (int64_t rows = 0; rows <= 12; ++rows) {
      const auto c = pt::parallel::Dim0Chunk::of(rows, world);
      // torch.chunk: pieces of ceil(rows / world) rows, the last shorter, as many as needed (maybe fewer than world).
      const auto pieces = rows == 0 ? std::vector<torch::Tensor>{} : torch::arange(rows).chunk(world, 0);
      int64_t covered = 0;
      for (int64_t r = 0; r < world; ++r) {
        INFO("rows " << rows << ", world " << world << ", rank " << r);
        const int64_t want = r < static_cast<int64_t>(pieces.size()) ? pieces[static_cast<size_t>(r)].size(0) : 0;
        CHECK(c.size(r) == want);
        if (want > 0) CHECK(c.begin(r) == pieces[static_cast<size_t>(r)][0].item<int64_t>());
        CHECK(c.size(r) <= c.chunk);
        covered += c.size(r);
      }
      CHECK(covered == rows);
      CHECK(c.padded_rows() % world == 0);
      CHECK(c.padded_rows() >= rows);
    }
}

TEST_CASE("stage 3 with 2 micro-steps per step (gradients kept whole until the window's last backward) ends bit-identical to DataParallel on 2 ranks, seeded data") {
  // The reference: stage 0 (DataParallel's Reducer on whole parameters). On 2 ranks both averages are exact (a + b is
  // commutative, halving exact), so the weights must agree bit for bit. The data and weights come from a seeded
  // generator; the units' and the root's gradients cross two micro-steps before they are reduce-scattered.
  for (const int seed : {11, 12}) {
    const auto dir = testing::temp_dir(fmt::format("fsdp-accumulate-{}", seed));
    constexpr int64_t kSteps = 4;
    write_seeded_inputs(dir, seed, kSteps * kBatchPerRank * 2);
    for (const std::string stage : {"0", "3"})
      run_ours(2, dir, "stage" + stage, {{"POLICYTRAIN_FSDP_STAGE", stage}, {"POLICYTRAIN_FSDP_ACCUMULATE", "2"},
                                         {"POLICYTRAIN_FSDP_STEPS", std::to_string(kSteps)}});
    for (int r = 0; r < 2; ++r)
      compare(dir / "stage0" / fmt::format("rank{}", r), dir / "stage3" / fmt::format("rank{}", r), 0.0, {"param.", "buffer."});
    // The gradient averaged over the window: stage 3's shards are DataParallel's rows.
    const auto dp = load_tensors(dir / "stage0" / "rank1"), z3 = load_tensors(dir / "stage3" / "rank1");
    const auto& g_dp = dp.at("grad.fc.weight");
    CHECK(torch::equal(z3.at("grad.fc.weight"), g_dp.narrow(0, 8, 8)));
  }
}

TEST_CASE("stage 3 with GradClip by the global norm over all shards ends within 1e-6 of DataParallel's clip_grad_norm on 2 and 3 ranks, seeded data") {
  // Every step is clipped (a max norm of 0.05, below the gradients' norm): the total norm is summed over the shards
  // of every rank (another summation order than the per-parameter norms of the whole gradients, hence a tolerance).
  for (const int world : {2, 3}) {
    const auto dir = testing::temp_dir(fmt::format("fsdp-clip-{}", world));
    constexpr int64_t kSteps = 4;
    write_seeded_inputs(dir, 20 + world, kSteps * kBatchPerRank * world);
    for (const std::string stage : {"0", "3"})
      run_ours(world, dir, "stage" + stage, {{"POLICYTRAIN_FSDP_STAGE", stage}, {"POLICYTRAIN_FSDP_CLIP", "0.05"},
                                             {"POLICYTRAIN_FSDP_OPTIMIZER", "sgd"},
                                             {"POLICYTRAIN_FSDP_STEPS", std::to_string(kSteps)}});
    for (int r = 0; r < world; ++r)
      compare(dir / "stage0" / fmt::format("rank{}", r), dir / "stage3" / fmt::format("rank{}", r), 1e-6,
              {"param.", "buffer.", "clip.norm"});
    CHECK(load_tensors(dir / "stage3" / "rank0").at("clip.norm").item<double>() > 0.05);  // it clipped
  }
}

namespace {
/// Runs 2 ranks of stage 3 with the worker's `extra` settings on seeded data; returns each rank's message.
std::vector<std::string> refused_on_two_ranks(const std::string& name, std::map<std::string, std::string> extra) {
  const auto dir = testing::temp_dir("fsdp-refuse-" + name);
  write_seeded_inputs(dir, 31, 4 * kBatchPerRank * 2);
  extra.insert({{"POLICYTRAIN_FSDP_EXPECT_ERROR", "1"}, {"POLICYTRAIN_FSDP_STEPS", "4"}});
  run_ours(2, dir, name, extra);
  std::vector<std::string> out;
  for (int r = 0; r < 2; ++r) out.push_back(read_text(dir / name / fmt::format("error{}.txt", r)));
  return out;
}
}  // namespace

namespace {
/// The "ema" scenario's settings (every `every` steps) with `more`.
std::map<std::string, std::string> ema_env(const std::string& every, std::map<std::string, std::string> more) {
  more.insert({{"POLICYTRAIN_FSDP_SCENARIO", "ema"}, {"POLICYTRAIN_FSDP_EMA_EVERY", every}});
  return more;
}
/// Whether `a`'s and `b`'s files in their run directories are the same bytes (final.pt, best.pt).
void same_exports(const fs::path& a, const fs::path& b) {
  for (const auto* file : {"final.pt", "best.pt"}) {
    INFO(a.string() << " " << b.string() << " " << file);
    const auto want = read_text(a / file);
    CHECK(!want.empty());
    CHECK(read_text(b / file) == want);
  }
}
}  // namespace

TEST_CASE("stage 3 with callbacks::Ema (each rank averaging its shards) ends bit-identical to DataParallel with Ema on 2 ranks: weights, average, validation with the average, best.pt and final.pt, seeded data") {
  // SGD with momentum: on 2 ranks the gradient averages are exact, so stage 3's shards are DataParallel's rows bit for
  // bit, and so is the average of them (the same elementwise update, row by row); the validations compute with the
  // average gathered into the units, the exports hold the average gathered whole. Every 1 and every 2 steps (the
  // decay of the ramp raised to the power `every`).
  for (const auto& [seed, every] : std::vector<std::pair<int, std::string>>{{81, "1"}, {82, "2"}}) {
    const auto dir = testing::temp_dir(fmt::format("fsdp-ema-{}", seed));
    write_seeded_inputs(dir, seed, 4 * kBatchPerRank * 2);  // 4 steps an epoch, 2 epochs
    for (const std::string stage : {"0", "3"}) run_ours(2, dir, "stage" + stage, ema_env(every, {{"POLICYTRAIN_FSDP_STAGE", stage}}));
    for (int r = 0; r < 2; ++r)
      compare(dir / "stage0" / fmt::format("rank{}", r), dir / "stage3" / fmt::format("rank{}", r), 0.0, {"param.", "ema.", "buffer.", "val."});
    const auto dp = load_tensors(dir / "stage0" / "rank0");
    CHECK(dp.count("val.4.loss") == 1);
    CHECK(dp.count("val.8.loss") == 1);
    CHECK_FALSE(torch::equal(dp.at("ema.fc.weight"), dp.at("param.fc.weight")));  // the average is not the weights
    same_exports(dir / "stage0-run", dir / "stage3-run");
    // During the fit each rank of stage 3 holds its rows of the average: the two ranks' rows make the whole one,
    // which each DataParallel rank holds (rank 1's rows are fewer where a parameter's rows do not split evenly).
    int64_t whole = 0, first = 0;  // first: rank 0's rows, torch.chunk's first piece of every parameter
    for (const auto& [name, t] : dp)
      if (name.rfind("ema.", 0) == 0) {
        whole += t.numel();
        first += (t.size(0) + 1) / 2 * (t.numel() / t.size(0));
      }
    const auto rows = [&](int r) { return load_tensors(dir / "stage3" / fmt::format("rank{}", r)).at("average_numel").item<int64_t>(); };
    CHECK(dp.at("average_numel").item<int64_t>() == whole);
    CHECK(rows(0) == first);
    CHECK(rows(1) == whole - first);
  }
}

namespace {
/// callbacks::Ema with batch norm on 2 ranks (seeded data from `seed`, the average moved every `every` steps taken),
/// stopped at step `until` and resumed, under parallel::DataParallel and stage 3, against DataParallel's
/// uninterrupted run: the weights, the average, the buffers and their average on every rank, every validation after
/// the resume (loss and accuracy) bit for bit, and best.pt and final.pt byte for byte.
void ema_resumed_as_uninterrupted(int seed, const std::string& every, int64_t until) {
  const auto dir = testing::temp_dir(fmt::format("fsdp-ema-resume-{}", seed));
  write_seeded_inputs(dir, seed, 4 * kBatchPerRank * 2);  // 4 steps an epoch, 2 epochs
  run_ours(2, dir, "whole", ema_env(every, {{"POLICYTRAIN_FSDP_STAGE", "dp"}}));
  for (const std::string stage : {"dp", "3"}) {
    const auto part = "part" + stage;
    run_ours(2, dir, part, ema_env(every, {{"POLICYTRAIN_FSDP_STAGE", stage}, {"POLICYTRAIN_FSDP_UNTIL", std::to_string(until)}}));
    CHECK(load_tensors(dir / part / "rank0").at("steps").item<int64_t>() == until);
    run_ours(2, dir, part, ema_env(every, {{"POLICYTRAIN_FSDP_STAGE", stage}, {"POLICYTRAIN_FSDP_RESUME", "1"}}));
    const auto resumed = load_tensors(dir / part / "rank0");
    CHECK(resumed.count("val.8.loss") == 1);
    CHECK(resumed.count("val.4.loss") == (until < 4 ? 1u : 0u));  // the resumed fit's validations only
    // The resumed run's every validation against the uninterrupted run's at the same step.
    for (int r = 0; r < 2; ++r)
      compare(dir / part / fmt::format("rank{}", r), dir / "whole" / fmt::format("rank{}", r), 0.0,
              {"param.", "ema.", "ema_buffer.", "buffer.", "val."});
    same_exports(dir / "whole-run", dir / (part + "-run"));
    // The finished run resumed once more: a fit with no step left, which begins no epoch (what a signal after the
    // fit's end leaves to the next start). It ends as it began: the weights, average and buffers of the finished
    // run, and final.pt rewritten with the same bytes. Before, stage 3's shards took the checkpoint's weights at the
    // first epoch's begin only: final.pt was rewritten and the model left with the weights it was built with.
    run_ours(2, dir, part, ema_env(every, {{"POLICYTRAIN_FSDP_STAGE", stage}, {"POLICYTRAIN_FSDP_RESUME", "1"}}));
    CHECK(load_tensors(dir / part / "rank0").at("steps").item<int64_t>() == 8);
    for (int r = 0; r < 2; ++r)
      compare(dir / part / fmt::format("rank{}", r), dir / "whole" / fmt::format("rank{}", r), 0.0,
              {"param.", "ema.", "ema_buffer.", "buffer."});
    same_exports(dir / "whole-run", dir / (part + "-run"));
  }
}
}  // namespace

// Each rank's batch norm moves its running statistics with its own batch, so each rank's average of them differs, and
// a checkpoint keeps rank 0's. The average's buffers are rank 0's, as the model's are (broadcast before every
// evaluation with the average), so a resumed run validates as the uninterrupted one. Before that rule every rank
// validated with its own buffers' average, and rank 1 with rank 0's after a resume: the validation loss after the
// resume was 1e-4 off here (2e-5 to 3e-5 in the main job). Stage 3 (the average's rows, its checkpoint consolidated)
// ends bit-identical to DataParallel's uninterrupted run too (SGD on 2 ranks: the gradient averages are exact).
TEST_CASE("callbacks::Ema with batch norm on 2 ranks stopped mid-epoch before the first validation and resumed ends bit-identical to the uninterrupted run (DataParallel and stage 3): weights, average, buffers' average, every validation after the resume, best.pt and final.pt, which a resume with no step left keeps, seeded data") {
  ema_resumed_as_uninterrupted(83, "1", 3);
}

TEST_CASE("callbacks::Ema every 2 steps with batch norm on 2 ranks stopped mid-epoch after a validation and resumed ends bit-identical to the uninterrupted run (DataParallel and stage 3): weights, average, buffers' average, the validation after the resume, best.pt and final.pt, which a resume with no step left keeps, seeded data") {
  ema_resumed_as_uninterrupted(84, "2", 6);
}

TEST_CASE("stage 3 with mp_policy.param_dtype bf16 refuses precision::Autocast to fp16 at the first forward on every rank, and trains under Autocast to bf16") {
  for (const auto& m : refused_on_two_ranks("mp-autocast-fp16", {{"POLICYTRAIN_FSDP_PARAM_DTYPE", "bf16"}, {"POLICYTRAIN_FSDP_AUTOCAST", "fp16"}})) {
    INFO(m);
    CHECK(m.rfind("policytrain::parallel::ShardedDataParallel: stage 3: unit 'conv' computes in ShardingOptions::mp_policy.param_dtype "
                  "BFloat16 under an autocast to Half", 0) == 0);
    CHECK(m.find("give precision::Autocast the dtype BFloat16 (or fp32: off), or leave param_dtype unset") != std::string::npos);
  }
  for (const auto& m : refused_on_two_ranks("mp-autocast-bf16", {{"POLICYTRAIN_FSDP_PARAM_DTYPE", "bf16"}, {"POLICYTRAIN_FSDP_AUTOCAST", "bf16"}})) {
    INFO(m);
    CHECK(m.rfind("no error (trained 4 steps", 0) == 0);
  }
}

TEST_CASE("ShardingOptions::mp_policy: refused below stage 3 and for a dtype that is not Float, BFloat16 or Half") {
  const auto what = [](auto&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const int stage : {0, 1, 2}) {
    const auto m = what([stage] {
      pt::parallel::ShardedDataParallel({.enabled = false}, {.stage = stage, .mp_policy = {.param_dtype = torch::kBFloat16, .reduce_dtype = {}}});
    });
    INFO(m);
    CHECK(m.find(fmt::format("stage {} with ShardingOptions::mp_policy set", stage)) != std::string::npos);
    CHECK(m.find("use stage 3, or precision::Autocast") != std::string::npos);
  }
  const auto m = what([] {
    pt::parallel::ShardedDataParallel({.enabled = false}, {.stage = 3, .mp_policy = {.param_dtype = {}, .reduce_dtype = torch::kLong}});
  });
  CHECK(m.find("ShardingOptions::mp_policy.reduce_dtype is Long; expected Float, BFloat16 or Half") != std::string::npos);
  CHECK(what([] { pt::parallel::ShardedDataParallel({.enabled = false}, {.stage = 3, .mp_policy = {.param_dtype = torch::kHalf, .reduce_dtype = torch::kFloat}}); }) == "no error");
}

// Before, stage 3 refused both at fit begin on every rank ("policytrain::callbacks::DivergenceRollback: the parallel
// policy shards the parameters (stage 3 ..."): a snapshot copied the freed parameters, and rank 0 died of a segmentation
// fault writing the histograms. SGD with momentum on 2 ranks: the gradient averages are exact, so stage 3's shards are
// DataParallel's rows bit for bit, and every value below is compared with tolerance 0.
TEST_CASE("stage 3 with DivergenceRollback and TensorBoard's histograms on 2 ranks equals DataParallel's run bit for bit: a NaN loss at a seeded step rolls back to the shards' snapshot (weights, momentum rows, buffers, rollback count, lr, losses), and TensorBoard's reader finds the same histograms and scalars, seeded data") {
  for (const int seed : {91, 92}) {
    const int64_t nan_at = 3 + seed % 3;  // steps 4 and 5: after the snapshot of step 2 and at the one of step 4
    const auto dir = testing::temp_dir(fmt::format("fsdp-rollback-{}", seed));
    write_seeded_inputs(dir, seed, 6 * kBatchPerRank * 2);  // 6 steps
    for (const std::string stage : {"dp", "3"})
      run_ours(2, dir, "stage" + stage, {{"POLICYTRAIN_FSDP_SCENARIO", "rollback"}, {"POLICYTRAIN_FSDP_STAGE", stage},
                                         {"POLICYTRAIN_FSDP_NAN_AT", std::to_string(nan_at)}});
    for (int r = 0; r < 2; ++r)
      compare(dir / "stagedp" / fmt::format("rank{}", r), dir / "stage3" / fmt::format("rank{}", r), 0.0,
              {"param.", "state.", "buffer.", "rollbacks", "skipped", "lr", "losses"});
    const auto dp = load_tensors(dir / "stagedp" / "rank1");
    CHECK(dp.at("rollbacks").item<int64_t>() == 1);
    CHECK(dp.at("skipped").item<int64_t>() == 1);
    CHECK(dp.at("losses").size(0) == 6);
    CHECK(dp.at("losses").view(torch::kDouble)[nan_at - 1].item<double>() == -1.0);  // the NaN loss, on rank 1
    CHECK(dp.at("lr").view(torch::kDouble).item<double>() < 0.1);  // halved, and the cosine schedule's
    // Memory: a snapshot of stage 3 holds the rank's rows of the weights (and the buffers): the two ranks' rows make
    // DataParallel's whole weights, and each rank holds fewer than them.
    const auto weight_bytes = [&](const std::string& subdir, int r) {
      const auto t = load_tensors(dir / subdir / fmt::format("rank{}", r));
      int64_t n = t.at("snapshot_bytes").item<int64_t>();
      for (const auto& [name, b] : t)
        if (name.rfind("buffer.", 0) == 0) n -= b.numel() * static_cast<int64_t>(b.element_size());
      return n;
    };
    CHECK(weight_bytes("stage3", 0) + weight_bytes("stage3", 1) == weight_bytes("stagedp", 0));
    CHECK(weight_bytes("stage3", 0) < weight_bytes("stagedp", 0));
    CHECK(weight_bytes("stage3", 1) < weight_bytes("stagedp", 0));
    // The event files, read by TensorBoard's EventAccumulator (the venv of the tensorboard.venv fixture).
    const std::string py = POLICYTRAIN_BINARY_DIR "/venv-tensorboard/bin/python";
    REQUIRE_MESSAGE(fs::exists(py), "no TensorBoard venv at " << py << "; run `ctest -R tensorboard.venv` first");
    const int rc = sh(py + " " POLICYTRAIN_SOURCE_DIR "/tests/integration/same_tensorboard.py " + (dir / "stagedp-tb").string() +
                          " " + (dir / "stage3-tb").string() + " train/loss train/lr/group0",
                      dir / "same_tensorboard.log");
    INFO(read_text(dir / "same_tensorboard.log"));
    CHECK(rc == 0);
  }
}

TEST_CASE("stage 3 with a unit inside memory::recompute (gathered again for the recomputed forward) ends bit-identical to DataParallel with the same recompute on 2 ranks, seeded data") {
  // The fc unit runs inside a recompute segment: its first forward runs under no-grad, its recomputed forward inside
  // the backward gathers again, and its gradients are reduce-scattered once the segment's backward reached its input.
  // SGD with momentum and AdamW; on 2 ranks the averages are exact, so the weights must agree bit for bit.
  for (const std::string optimizer : {"sgd", "adamw"}) {
    const auto dir = testing::temp_dir("fsdp-recompute-" + optimizer);
    constexpr int64_t kSteps = 4;
    write_seeded_inputs(dir, optimizer == "sgd" ? 61 : 62, kSteps * kBatchPerRank * 2);
    for (const std::string stage : {"0", "3"})
      run_ours(2, dir, "stage" + stage, {{"POLICYTRAIN_FSDP_STAGE", stage}, {"POLICYTRAIN_FSDP_RECOMPUTE", "1"},
                                         {"POLICYTRAIN_FSDP_OPTIMIZER", optimizer}, {"POLICYTRAIN_FSDP_STEPS", std::to_string(kSteps)}});
    for (int r = 0; r < 2; ++r)
      compare(dir / "stage0" / fmt::format("rank{}", r), dir / "stage3" / fmt::format("rank{}", r), 0.0, {"param.", "buffer."});
  }
}

TEST_CASE("stage 3 with a memory::Recomputed module inside a unit ends bit-identical to DataParallel with the same module on 2 ranks, seeded data") {
  for (const int seed : {71, 72}) {
    const auto dir = testing::temp_dir(fmt::format("fsdp-recomputed-{}", seed));
    for (const std::string stage : {"0", "3"})
      run_ours(2, dir, "stage" + stage, {{"POLICYTRAIN_FSDP_SCENARIO", "recomputed"}, {"POLICYTRAIN_FSDP_STAGE", stage},
                                         {"POLICYTRAIN_FSDP_SEED", std::to_string(seed)}});
    for (int r = 0; r < 2; ++r)
      compare(dir / "stage0" / fmt::format("rank{}", r), dir / "stage3" / fmt::format("rank{}", r), 0.0, {"param."});
  }
}

TEST_CASE("stage 3 with frozen parameters (a whole unit, one parameter of a unit, one of the root) ends bit-identical to DataParallel on 2 ranks, seeded data") {
  // requires_grad false before the optimizer is built over every parameter: the frozen ones get no gradient on
  // either side, so the optimizer leaves them (and their shards) as they were. On 2 ranks the averages are exact.
  for (const int seed : {41, 42}) {
    const auto dir = testing::temp_dir(fmt::format("fsdp-frozen-{}", seed));
    constexpr int64_t kSteps = 4;
    write_seeded_inputs(dir, seed, kSteps * kBatchPerRank * 2);
    for (const std::string stage : {"0", "3"})
      run_ours(2, dir, "stage" + stage, {{"POLICYTRAIN_FSDP_STAGE", stage}, {"POLICYTRAIN_FSDP_FREEZE", "1"},
                                         {"POLICYTRAIN_FSDP_STEPS", std::to_string(kSteps)}});
    for (int r = 0; r < 2; ++r)
      compare(dir / "stage0" / fmt::format("rank{}", r), dir / "stage3" / fmt::format("rank{}", r), 0.0, {"param.", "buffer."});
    const auto init = load_tensors(dir / "init"), z3 = load_tensors(dir / "stage3" / "rank0");
    for (const auto* name : {"emb.weight", "fc.bias", "head.bias"}) CHECK(torch::equal(z3.at(std::string("param.") + name), init.at(name)));
    CHECK_FALSE(torch::equal(z3.at("param.fc.weight"), init.at("fc.weight")));  // trained beside its frozen bias
    CHECK(z3.count("grad.emb.weight") == 0);
  }
}

TEST_CASE("stage 3 checkpoints reshard 3 -> 2 -> 1 -> 3 ranks mid-epoch and end within 1e-6 of the uninterrupted 3-rank run, seeded data") {
  // 8 AdamW steps of a global batch of 12, 2 per phase, each phase resuming the last one's consolidated checkpoint at
  // another world size (1 rank: no process group, the units are plain modules). Every step averages the gradient over
  // the same 12 samples; only the summation order differs (the mean over 12 / world samples per rank, then over the
  // ranks), so the weights differ by rounding, which AdamW's normalisation carries into the update.
  const auto dir = testing::temp_dir("fsdp-reshard");
  write_seeded_inputs(dir, 51, 8 * 12);
  run_ours(3, dir, "whole", {{"POLICYTRAIN_FSDP_SCENARIO", "reshard"}, {"POLICYTRAIN_FSDP_UNTIL", "8"}});
  int until = 0;
  for (const int world : {3, 2, 1, 3}) {
    until += 2;
    run_ours(world, dir, "cycle", {{"POLICYTRAIN_FSDP_SCENARIO", "reshard"}, {"POLICYTRAIN_FSDP_UNTIL", std::to_string(until)},
                                   {"POLICYTRAIN_FSDP_RESUME", until > 2 ? "1" : "0"}});
    CHECK(load_tensors(dir / "cycle" / "rank0").at("steps").item<int64_t>() == until);
  }
  for (int r = 0; r < 3; ++r) compare(dir / "whole" / fmt::format("rank{}", r), dir / "cycle" / fmt::format("rank{}", r), 1e-6, {"param."});
  CHECK(load_tensors(dir / "whole" / "rank0").at("steps").item<int64_t>() == 8);
}

namespace {
/// Stage 3 with prefetch on and off on `world` ranks, seeded data: every tensor equal bit for bit, the same
/// all-gathers, and the prefetched ones counted on one side only.
void prefetch_on_off(int world, int seed, const std::string& optimizer, const std::string& accumulate, const std::string& reshard) {
  const auto dir = testing::temp_dir(fmt::format("fsdp-prefetch-{}-{}", world, seed));
  constexpr int64_t kSteps = 4;
  write_seeded_inputs(dir, seed, kSteps * kBatchPerRank * world);
  for (const std::string on : {"0", "1"})
    run_ours(world, dir, "prefetch" + on, {{"POLICYTRAIN_FSDP_PREFETCH", on}, {"POLICYTRAIN_FSDP_OPTIMIZER", optimizer},
                                           {"POLICYTRAIN_FSDP_ACCUMULATE", accumulate}, {"POLICYTRAIN_FSDP_RESHARD", reshard},
                                           {"POLICYTRAIN_FSDP_STEPS", std::to_string(kSteps)}});
  for (int r = 0; r < world; ++r)
    compare(dir / "prefetch0" / fmt::format("rank{}", r), dir / "prefetch1" / fmt::format("rank{}", r), 0.0,
            {"param.", "shard.", "grad.", "state.", "buffer.", "all_gathers", "reduce_scatters"});
  const auto off = load_tensors(dir / "prefetch0" / "rank0"), on = load_tensors(dir / "prefetch1" / "rank0");
  CHECK(off.at("prefetches").item<int64_t>() == 0);
  // From the second step on (the first records the order), each forward prefetches fc and emb (after conv and fc)
  // and, when the units reshard after their forward, each backward fc and conv (after emb and fc), per micro-step.
  const int64_t micro = std::stoll(accumulate);
  CHECK(on.at("prefetches").item<int64_t>() == (kSteps * micro - 1) * (reshard == "1" ? 4 : 2));
}
}  // namespace

TEST_CASE("stage 3 prefetch (the next unit's all-gather issued before the current unit's compute) ends bit-identical to prefetch off on 2 ranks, AdamW, seeded data") {
  prefetch_on_off(2, 61, "adamw", "1", "1");
}

TEST_CASE("stage 3 prefetch ends bit-identical to prefetch off on 3 ranks, SGD with momentum, 2 micro-steps per step, and with reshard_after_forward off, seeded data" * doctest::test_suite("extended")) {
  prefetch_on_off(3, 62, "sgd", "2", "1");
  prefetch_on_off(3, 63, "adamw", "1", "0");
}

TEST_CASE("stage 3 gathers a unit's parameters in place: its all-gather allocates the unit's parameter bytes and nothing more (LibTorch's allocator), and a step holds at most the root's plus two adjacent units' (computing, prefetched), on 2 ranks in fp32 and 3 in bf16, seeded unit sizes") {
  for (const auto& [world, dtype, seed] : {std::tuple{2, "", 81}, std::tuple{3, "bf16", 82}}) {
    const auto dir = testing::temp_dir(fmt::format("fsdp-gathered-{}-{}", world, seed));
    run_ours(world, dir, "run", {{"POLICYTRAIN_FSDP_SCENARIO", "gathered"}, {"POLICYTRAIN_FSDP_SEED", std::to_string(seed)},
                                 {"POLICYTRAIN_FSDP_PARAM_DTYPE", dtype}});
    for (int r = 0; r < world; ++r) {
      const auto got = load_tensors(dir / "run" / fmt::format("rank{}", r));
      INFO(world << " ranks, " << std::string(*dtype ? dtype : "fp32") << ", seed " << seed << ", rank " << r);
      REQUIRE(got.at("steps").item<int64_t>() == 3);
      CHECK(got.at("prefetches").item<int64_t>() > 0);
      for (int i = 0; got.count(fmt::format("unit{}.bytes", i)); ++i) {
        const int64_t bytes = got.at(fmt::format("unit{}.bytes", i)).item<int64_t>();
        INFO("unit fc" << i << ": " << bytes << " parameter bytes; its all-gather's allocations peaked at "
                       << got.at(fmt::format("unit{}.alloc_peak", i)).item<int64_t>() << ", GatheredBytes counted "
                       << got.at(fmt::format("unit{}.counted", i)).item<int64_t>());
        CHECK(got.at(fmt::format("unit{}.alloc_peak", i)).item<int64_t>() == bytes);
        CHECK(got.at(fmt::format("unit{}.alloc_live", i)).item<int64_t>() == bytes);
        CHECK(got.at(fmt::format("unit{}.counted", i)).item<int64_t>() == bytes);
      }
      const int64_t peak = got.at("step_peak").item<int64_t>(), bound = got.at("bound").item<int64_t>();
      INFO("gathered bytes alive at once in a step: " << peak << "; the root's plus the largest adjacent pair of units: " << bound);
      CHECK(peak <= bound);
    }
  }
}

TEST_CASE("a model whose training state exceeds a rank's memory budget: DataParallel runs out of memory on 3 ranks, stage 3 trains it on 3 ranks to a 1-process run's weights within 1e-6 (SGD with momentum), seeded data" * doctest::test_suite("extended")) {
  // The budget (enforced by LibTorch's CPU allocator in every rank: BudgetAllocator) is 3.5 x the parameter bytes P.
  // Both policies pass through about 3 P at fit begin (every rank builds the whole model, checks it and receives
  // rank 0's through a flat buffer, as FSDP2 without the meta device); then under DataParallel a rank holds the
  // parameters, their gradients, the Reducer's bucket and SGD's momentum (4 P), while stage 3 on 3 ranks holds a
  // third of the parameters, gradients and momentum (P) plus the units it gathers. SGD rather than AdamW: AdamW's
  // normalisation blows the rounding of near-zero gradients up to the learning rate (4e-5 apart after 4 steps). The reference is one process without a budget, on the same 12 samples per step; only the summation
  // order differs (the mean over 4 samples per rank, then over the ranks).
  const auto dir = testing::temp_dir("fsdp-budget");
  constexpr int64_t kSteps = 4;
  auto g = at::make_generator<at::CPUGeneratorImpl>(71);
  save_tensors(dir / "data", {{"x", torch::randn({kSteps * 12, 512}, g)}, {"y", torch::randint(0, 10, {kSteps * 12}, g)}});
  constexpr int64_t kParamBytes = (6 * (512 * 512 + 512) + 512 * 10 + 10) * 4;
  const std::string budget = std::to_string(7 * kParamBytes / 2);
  run_ours(1, dir, "reference", {{"POLICYTRAIN_FSDP_SCENARIO", "budget"}, {"POLICYTRAIN_FSDP_STAGE", "3"}});
  run_ours(3, dir, "dp", {{"POLICYTRAIN_FSDP_SCENARIO", "budget"}, {"POLICYTRAIN_FSDP_STAGE", "dp"}, {"POLICYTRAIN_FSDP_BUDGET", budget}});
  run_ours(3, dir, "stage3", {{"POLICYTRAIN_FSDP_SCENARIO", "budget"}, {"POLICYTRAIN_FSDP_STAGE", "3"}, {"POLICYTRAIN_FSDP_BUDGET", budget}});
  CHECK(read_text(dir / "reference" / "error0.txt") == "no error");
  for (int r = 0; r < 3; ++r) {
    const auto dp = read_text(dir / "dp" / fmt::format("error{}.txt", r));
    INFO("DataParallel, rank " << r << ": " << dp);
    CHECK(dp.find("rank budget: an allocation of") != std::string::npos);
    CHECK(load_tensors(dir / "dp" / fmt::format("rank{}", r)).count("steps") == 0);
    const auto z3 = read_text(dir / "stage3" / fmt::format("error{}.txt", r));
    INFO("stage 3, rank " << r << ": " << z3);
    REQUIRE(z3 == "no error");
    const auto got = load_tensors(dir / "stage3" / fmt::format("rank{}", r));
    CHECK(got.at("steps").item<int64_t>() == kSteps);
    const int64_t peak = got.at("peak").item<int64_t>();
    MESSAGE("stage 3, rank " << r << ": peak tensor bytes " << peak << " of a budget of " << budget << " (parameters: "
                             << kParamBytes << ")");
    CHECK(peak <= 7 * kParamBytes / 2);
    compare(dir / "reference" / "rank0", dir / "stage3" / fmt::format("rank{}", r), 1e-6, {"param."});
  }
}

namespace {
/// The "reshard" scenario's settings: `common`, then `extra`.
std::map<std::string, std::string> reshard_env(std::map<std::string, std::string> common, const std::map<std::string, std::string>& extra) {
  common.insert({"POLICYTRAIN_FSDP_SCENARIO", "reshard"});
  common.insert(extra.begin(), extra.end());
  return common;
}
/// The "reshard" scenario on 3 ranks with `common`: the uninterrupted run to step 8 ("whole"), a consolidated save of
/// step 4 ("cons") and a sharded one ("same", which a test resumes). Returns the sharded folder and its manifest.
std::pair<fs::path, nlohmann::json> reshard_runs(const fs::path& dir, const std::map<std::string, std::string>& common) {
  run_ours(3, dir, "whole", reshard_env(common, {{"POLICYTRAIN_FSDP_UNTIL", "8"}}));
  run_ours(3, dir, "cons", reshard_env(common, {{"POLICYTRAIN_FSDP_UNTIL", "4"}}));
  run_ours(3, dir, "same", reshard_env(common, {{"POLICYTRAIN_FSDP_UNTIL", "4"}, {"POLICYTRAIN_FSDP_SHARDED", "1"}}));
  const fs::path folder = dir / "same-run" / pt::checkpoint::Layout::step(4);
  return {folder, nlohmann::json::parse(read_text(folder / "manifest.json"))};
}
/// The "reshard" scenario with `common`, sharded checkpoints every 2 steps, on 3, 2, 1, then 3 ranks, each phase
/// resuming the last one's: the tensors named by `prefixes` end within 1e-6 of reshard_runs' uninterrupted run.
void sharded_cycle(const fs::path& dir, const std::map<std::string, std::string>& common, const std::vector<std::string>& prefixes) {
  int until = 0;
  for (const int world : {3, 2, 1, 3}) {
    until += 2;
    run_ours(world, dir, "cycle", reshard_env(common, {{"POLICYTRAIN_FSDP_UNTIL", std::to_string(until)}, {"POLICYTRAIN_FSDP_SHARDED", "1"},
                                                       {"POLICYTRAIN_FSDP_RESUME", until > 2 ? "1" : "0"}}));
    CHECK(load_tensors(dir / "cycle" / "rank0").at("steps").item<int64_t>() == until);
  }
  for (int r = 0; r < 3; ++r) compare(dir / "whole" / fmt::format("rank{}", r), dir / "cycle" / fmt::format("rank{}", r), 1e-6, prefixes);
}
}  // namespace

TEST_CASE("stage 3 sharded checkpoints: each rank writes its rows of every parameter and of its state, the manifest records the layout: resumed bit-identical on 3 ranks, resharded 3 -> 2 -> 1 -> 3 within 1e-6, and policytrain-ckpt consolidates them into a consolidated save's step" * doctest::test_suite("extended")) {
  // 9 runs of 1 to 3 ranks: 32 s on 2 loaded cores (AMD EPYC), so extended.
  // The model of the case above (fc2's 7 rows on 3 ranks: 3, 3 and 1; on 2: 4 and 3), AdamW, a global batch of 12.
  const auto dir = testing::temp_dir("fsdp-sharded-ckpt");
  write_seeded_inputs(dir, 53, 8 * 12);
  const auto with = [](std::map<std::string, std::string> extra) { return reshard_env({}, std::move(extra)); };
  // 3 ranks, sharded: to step 4, then resumed to 8 on 3 ranks: bit-identical to the uninterrupted run.
  const auto [folder, man] = reshard_runs(dir, {});
  INFO(man.dump(1));
  CHECK(man["sharded"]["world_size"] == 3);
  CHECK(man["sharded"]["stage"] == 3);
  REQUIRE(man["sharded"]["model"].size() == 6);  // fc1, fc2 and head: weight and bias
  for (const auto& m : man["sharded"]["model"]) {
    const auto shape = m["shape"].get<std::vector<int64_t>>();
    CHECK(m["rule"] == "dim0");
    CHECK(m["world_size"] == 3);
    CHECK(m["chunk"].get<int64_t>() == (shape[0] + 2) / 3);
  }
  for (const auto& s : man["sharded"]["shards"]) CHECK(s["indices"].size() == 6);  // every rank: its rows of every state
  {
    // Rank 2's shard holds its rows of fc2.weight (1 of 7) only: the common part has none of the parameters.
    pt::checkpoint::RawFile raw = pt::checkpoint::read_file(folder / man["sharded"]["shards"][2]["file"].get<std::string>());
    torch::serialize::InputArchive a;
    pt::checkpoint::detail::from_bytes(a, raw.payload());
    const auto rows = pt::checkpoint::detail::read_named(a, "model", folder);
    const auto it = std::find_if(rows.begin(), rows.end(), [](const auto& e) { return e.first == "fc2.weight"; });
    REQUIRE(it != rows.end());
    CHECK(it->second.sizes() == torch::IntArrayRef({1, 12}));
    pt::checkpoint::RawFile common = pt::checkpoint::read_file(folder / man["sharded"]["common"]["file"].get<std::string>());
    torch::serialize::InputArchive c;
    pt::checkpoint::detail::from_bytes(c, common.payload());
    for (const auto& [name, t] : pt::checkpoint::detail::read_named(c, "model", folder)) CHECK(t.numel() == 0);
  }
  run_ours(3, dir, "same", with({{"POLICYTRAIN_FSDP_UNTIL", "8"}, {"POLICYTRAIN_FSDP_SHARDED", "1"}, {"POLICYTRAIN_FSDP_RESUME", "1"}}));
  for (int r = 0; r < 3; ++r) {
    const auto want = load_tensors(dir / "whole" / fmt::format("rank{}", r)), got = load_tensors(dir / "same" / fmt::format("rank{}", r));
    for (const auto& [name, w] : want) {
      INFO(name);
      CHECK(torch::equal(got.at(name), w));
    }
  }
  // policytrain-ckpt consolidates the sharded step 4 into the consolidated save's model and state (a resume from
  // it on 3 ranks ends bit-identical too), and its export is read by Python's torch.load.
  const fs::path tool = POLICYTRAIN_CKPT_TOOL;
  REQUIRE(sh(fmt::format("{} consolidate {} {} {}", tool.string(), folder.string(), (dir / "one.ckpt").string(),
                         (dir / "one.pt").string()), dir / "consolidate.txt") == 0);
  {
    const auto model_of = [](const fs::path& file) {
      pt::checkpoint::RawFile raw = pt::checkpoint::read_file(file);
      torch::serialize::InputArchive a;
      pt::checkpoint::detail::from_bytes(a, raw.payload());
      return pt::checkpoint::detail::read_named(a, "model", file);
    };
    const auto one = model_of(dir / "one.ckpt"), ref = model_of(dir / "cons-run" / pt::checkpoint::Layout::step(4));
    REQUIRE(one.size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO(ref[i].first);
      CHECK(one[i].first == ref[i].first);
      CHECK(torch::equal(one[i].second, ref[i].second));
    }
  }
  run_ours(3, dir, "fromone", with({{"POLICYTRAIN_FSDP_UNTIL", "8"}, {"POLICYTRAIN_FSDP_RESUME_FROM", (dir / "one.ckpt").string()}}));
  for (int r = 0; r < 3; ++r) {
    const auto want = load_tensors(dir / "whole" / fmt::format("rank{}", r)), got = load_tensors(dir / "fromone" / fmt::format("rank{}", r));
    for (const auto& [name, w] : want) {
      INFO(name);
      CHECK(torch::equal(got.at(name), w));
    }
  }
  std::ofstream(dir / "check.py") << fmt::format("import torch\nd = torch.load('{}')\nprint('ok', len(d), sorted(d))\n",
                                                 (dir / "one.pt").string());
  CHECK(sh("python3 " + (dir / "check.py").string(), dir / "python.txt") == 0);
  INFO(read_text(dir / "python.txt"));
  CHECK(read_text(dir / "python.txt").find("ok 6") != std::string::npos);
  // Resharded 3 -> 2 -> 1 -> 3, sharded at every step: within 1e-6 of the uninterrupted 3-rank run (see above).
  sharded_cycle(dir, {}, {"param."});
}

TEST_CASE("stage 3 export mid-fit: rank 0 gathers the weights from the shards parameter by parameter, unit by unit (the most gathered bytes alive at once within the largest unit's padded size, none on rank 1), into a file equal to DataParallel's that torch.load reads") {
  const auto dir = testing::temp_dir("fsdp-export");
  constexpr int64_t kSteps = 4;
  write_seeded_inputs(dir, 61, kSteps * kBatchPerRank * 2);
  for (const std::string stage : {"0", "3"})
    run_ours(2, dir, "stage" + stage, {{"POLICYTRAIN_FSDP_STAGE", stage}, {"POLICYTRAIN_FSDP_EXPORT", "1"},
                                       {"POLICYTRAIN_FSDP_STEPS", std::to_string(kSteps)}});
  // Each group's bytes once padded to whole chunks of 2 ranks, from the model itself: the units conv, fc and emb, and
  // the root's head.
  Net net;
  const auto padded = [](torch::nn::Module& m) {
    int64_t n = 0;
    for (const auto& p : m.parameters()) n += (p.size(0) + 1) / 2 * 2 * (p.numel() / p.size(0)) * 4;
    return n;
  };
  const int64_t largest = std::max({padded(*net->conv), padded(*net->fc), padded(*net->emb), padded(*net->head)});
  int64_t whole = 0;
  for (const auto& p : net->parameters()) whole += p.numel() * 4;
  const auto r0 = load_tensors(dir / "stage3" / "rank0"), r1 = load_tensors(dir / "stage3" / "rank1");
  const int64_t peak0 = r0.at("export_peak").item<int64_t>(), peak1 = r1.at("export_peak").item<int64_t>();
  INFO("rank 0 held at most " << peak0 << " gathered bytes; the largest unit has " << largest << ", the model " << whole);
  CHECK(peak0 > 0);
  CHECK(peak0 <= largest);
  CHECK(peak0 < whole);
  CHECK(peak1 == 0);
  CHECK(load_tensors(dir / "stage0" / "rank0").at("export_peak").item<int64_t>() == 0);
  std::ofstream(dir / "check.py") << fmt::format(
      "import torch\n"
      "a, b = torch.load('{}'), torch.load('{}')\n"
      "assert list(a) == list(b), (list(a), list(b))\n"
      "for k in a:\n"
      "    assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]), k\n"
      "print('equal', len(a))\n",
      (dir / "stage3" / "export.pt").string(), (dir / "stage0" / "export.pt").string());
  REQUIRE(sh("python3 " + (dir / "check.py").string(), dir / "python.txt") == 0);
  INFO(read_text(dir / "python.txt"));
  CHECK(read_text(dir / "python.txt").find("equal 11") != std::string::npos);  // 8 parameters, 3 batch-norm buffers
}

namespace {
/// The bytes of `m`'s largest parameter once padded to whole chunks of `world` ranks (what one gather onto rank 0
/// holds at once), and of all its parameters unpadded.
std::pair<int64_t, int64_t> largest_and_whole(torch::nn::Module& m, int64_t world) {
  int64_t largest = 0, whole = 0;
  for (const auto& p : m.parameters()) {
    const int64_t rows = p.dim() == 0 ? 1 : p.size(0);
    largest = std::max(largest, (rows + world - 1) / world * world * (p.numel() / std::max<int64_t>(rows, 1)) * 4);
    whole += p.numel() * 4;
  }
  return {largest, whole};
}
/// The named tensors of section `section` of checkpoint file `file`'s payload.
std::vector<std::pair<std::string, torch::Tensor>> section_of(const fs::path& file, const std::string& section) {
  pt::checkpoint::RawFile raw = pt::checkpoint::read_file(file);
  torch::serialize::InputArchive a;
  pt::checkpoint::detail::from_bytes(a, raw.payload());
  return pt::checkpoint::detail::read_named(a, section, file);
}
}  // namespace

TEST_CASE("stage 3 with sharded checkpoints and callbacks::Ema: best.pt and final.pt are gathered onto rank 0 parameter by parameter (no rank holds the whole model), equal DataParallel's byte for byte, each rank's shard holds its rows of the average, and a resume mid-epoch ends bit-identical, seeded data") {
  // Before: a best save gathered the whole model on every rank for best.pt, final.pt was written after fit end had
  // gathered it on every rank, and rank 0 wrote the whole average into the common part.
  const auto dir = testing::temp_dir("fsdp-ema-sharded");
  write_seeded_inputs(dir, 84, 4 * kBatchPerRank * 2);
  const std::map<std::string, std::string> sharded{{"POLICYTRAIN_FSDP_SHARDED", "1"}};
  run_ours(2, dir, "stage0", ema_env("1", {{"POLICYTRAIN_FSDP_STAGE", "0"}}));
  run_ours(2, dir, "stage3", ema_env("1", sharded));
  for (int r = 0; r < 2; ++r)
    compare(dir / "stage0" / fmt::format("rank{}", r), dir / "stage3" / fmt::format("rank{}", r), 0.0, {"param.", "ema.", "buffer.", "val."});
  same_exports(dir / "stage0-run", dir / "stage3-run");
  Net net;
  const auto [largest, whole] = largest_and_whole(*net, 2);
  const auto r0 = load_tensors(dir / "stage3" / "rank0"), r1 = load_tensors(dir / "stage3" / "rank1");
  const auto value = [](const Tensors& t, const char* name) { return t.count(name) ? t.at(name).item<int64_t>() : int64_t{-1}; };
  for (const auto* what : {"save_gathered", "final_gathered"}) {
    INFO(what << ": rank 0 held at most " << value(r0, what) << " gathered bytes, rank 1 " << value(r1, what)
              << " (-1: not measured); the largest parameter padded has " << largest << ", the model " << whole);
    CHECK(value(r0, what) > 0);
    CHECK(value(r0, what) <= largest);
    CHECK(value(r1, what) == 0);
  }
  CHECK(value(r0, "final_before_unshard") == 1);  // written from the shards, before fit end gathered them
  // Stopped at step 3 (last.ckpt at fit end), resumed to step 8: each rank's shard holds its rows of the average.
  run_ours(2, dir, "part", ema_env("1", {{"POLICYTRAIN_FSDP_SHARDED", "1"}, {"POLICYTRAIN_FSDP_UNTIL", "3"}}));
  const fs::path folder = dir / "part-run" / pt::checkpoint::Layout::last();
  const auto man = nlohmann::json::parse(read_text(folder / "manifest.json"));
  INFO(man.dump(1));
  REQUIRE(man["sharded"].contains("state"));
  CHECK(man["sharded"]["state"].size() == net->parameters().size());
  for (int r = 0; r < 2; ++r) {
    const auto rows = section_of(folder / man["sharded"]["shards"][r]["file"].get<std::string>(), "state_rows");
    CHECK(rows.size() == net->parameters().size());
    for (const auto& [key, t] : rows) {
      INFO("rank " << r << " " << key);
      const auto param = key.substr(std::string("callbacks::Ema/average/").size());
      const auto full = net->named_parameters()[param];
      CHECK(key.rfind("callbacks::Ema/average/", 0) == 0);
      CHECK(t.sizes() == pt::parallel::dim0_piece(full, r, 2).sizes());
    }
  }
  for (const auto& [key, t] : section_of(folder / man["sharded"]["common"]["file"].get<std::string>(), "state"))
    if (key.rfind("callbacks::Ema/average/", 0) == 0) CHECK(t.numel() == 0);
  run_ours(2, dir, "part", ema_env("1", {{"POLICYTRAIN_FSDP_SHARDED", "1"}, {"POLICYTRAIN_FSDP_RESUME", "1"}}));
  for (int r = 0; r < 2; ++r)
    compare(dir / "stage3" / fmt::format("rank{}", r), dir / "part" / fmt::format("rank{}", r), 0.0, {"param.", "ema.", "buffer."});
  same_exports(dir / "stage3-run", dir / "part-run");
}

TEST_CASE("stage 3 sharded checkpoints with callbacks::Ema: the manifest records the average's rows, policytrain-ckpt verifies them and consolidates them into a consolidated save's state, a resume on 3 ranks ends bit-identical and a cycle 3 -> 2 -> 1 -> 3 within 1e-6 of the uninterrupted run, seeded data" * doctest::test_suite("extended")) {
  const auto dir = testing::temp_dir("fsdp-ema-sharded-reshard");
  write_seeded_inputs(dir, 54, 8 * 12);
  const std::map<std::string, std::string> ema{{"POLICYTRAIN_FSDP_EMA", "1"}};
  const auto with = [&](std::map<std::string, std::string> extra) { return reshard_env(ema, std::move(extra)); };
  const auto [folder, man] = reshard_runs(dir, ema);
  INFO(man.dump(1));
  REQUIRE(man["sharded"].contains("state"));
  REQUIRE(man["sharded"]["state"].size() == 6);  // fc1, fc2 and head: weight and bias
  for (const auto& m : man["sharded"]["state"]) {
    CHECK(m["name"].get<std::string>() == "callbacks::Ema/average/" + m["param"].get<std::string>());
    CHECK(m["rule"] == "dim0");
    CHECK(m["world_size"] == 3);
    CHECK(m["chunk"].get<int64_t>() == (m["shape"][0].get<int64_t>() + 2) / 3);
  }
  // Rank 2 holds 1 of fc2's 7 rows of the average.
  const auto rows = section_of(folder / man["sharded"]["shards"][2]["file"].get<std::string>(), "state_rows");
  const auto fc2 = std::find_if(rows.begin(), rows.end(), [](const auto& e) { return e.first == "callbacks::Ema/average/fc2.weight"; });
  REQUIRE(fc2 != rows.end());
  CHECK(fc2->second.sizes() == torch::IntArrayRef({1, 12}));
  const fs::path tool = POLICYTRAIN_CKPT_TOOL;
  REQUIRE(sh(fmt::format("{} verify {}", tool.string(), folder.string()), dir / "verify.txt") == 0);
  INFO(read_text(dir / "verify.txt"));
  CHECK(read_text(dir / "verify.txt").find("the rows of 6 parameter(s) and 6 state entries make up their shapes") != std::string::npos);
  REQUIRE(sh(fmt::format("{} consolidate {} {}", tool.string(), folder.string(), (dir / "one.ckpt").string()),
             dir / "consolidate.txt") == 0);
  {
    // The consolidated save's state (the average gathered whole) and the consolidated sharded one's, entry by entry.
    const auto one = section_of(dir / "one.ckpt", "state"), ref = section_of(dir / "cons-run" / pt::checkpoint::Layout::step(4), "state");
    REQUIRE(one.size() == ref.size());
    int averages = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO(ref[i].first);
      CHECK(one[i].first == ref[i].first);
      if (ref[i].first.rfind("callbacks::Ema/average/", 0) == 0) ++averages;
      if (ref[i].first.rfind("callbacks::Ema/", 0) == 0) CHECK(torch::equal(one[i].second, ref[i].second));
    }
    CHECK(averages == 6);
  }
  run_ours(3, dir, "same", with({{"POLICYTRAIN_FSDP_UNTIL", "8"}, {"POLICYTRAIN_FSDP_SHARDED", "1"}, {"POLICYTRAIN_FSDP_RESUME", "1"}}));
  for (int r = 0; r < 3; ++r) compare(dir / "whole" / fmt::format("rank{}", r), dir / "same" / fmt::format("rank{}", r), 0.0, {"param.", "ema."});
  sharded_cycle(dir, ema, {"param.", "ema."});
}
