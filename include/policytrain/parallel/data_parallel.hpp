#pragma once
/// \file
/// parallel::DataParallel — data-parallel training over PyTorch's c10d (Gloo on CPU, NCCL on CUDA), started the
/// way torchrun starts a job: from RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (and torchrun's agent
/// store when TORCHELASTIC_USE_AGENT_STORE is set).
///
/// Every rank holds the whole model and trains on its own shard of the data (data::TensorLoader with
/// LoaderOptions{rank, world_size}). At the start of fit, rank 0's parameters and buffers are broadcast. During
/// the backward of the last micro-step of each accumulation window, a post-accumulate-grad hook on every
/// parameter marks its gradient ready; a bucket (about 25 MB of gradients, reverse parameter order) is
/// all-reduced as soon as all of its gradients are ready, so communication overlaps the rest of the backward.
/// Gradients are averaged (divided by the world size, then summed: Gloo has no AVG). Non-final micro-steps
/// do no communication at all. before_step waits for every bucket and writes the averages back.
///
/// Hooks: on_fit_begin (connect, broadcast, install gradient hooks), around_backward (sync or not),
/// before_step (wait, write back), and the Trainer's is_main / agree_any / reduce_metrics.
/// Requires: every rank runs the same Trainer on equally long shards (TensorLoader pads by wrapping).
/// Batch-norm statistics stay per rank (no SyncBatchNorm), as in PyTorch's DDP.
/// Cost: with WORLD_SIZE unset or 1, or `enabled = false`, nothing (no hooks installed, no process group).
/// Example: examples/fashion_mnist (`--nproc 2`, or torchrun); docs/parallel.md.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if !__has_include(<gloo/config.h>)
#error "policytrain/parallel/data_parallel.hpp: Gloo's headers are missing (LibTorch's wheel does not ship them, but c10d's ProcessGroupGloo.hpp includes them); install Debian's libgloo-dev (scripts/setup does)"
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(POLICYTRAIN_WITH_CUDA) && defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define POLICYTRAIN_WITH_NCCL 1
#endif
#include <torch/nn/module.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/parameters.hpp>

namespace policytrain::parallel {

/// A collective failed or timed out: a peer died, hung, or the network broke. The message names this rank,
/// the collective, and the ranks that did not answer afterwards.
struct CollectiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Where this process stands in the job, as torchrun describes it in the environment.
struct Environment {
  /// This process's rank, RANK (0 when unset).
  int rank = 0;
  /// Number of processes in the job, WORLD_SIZE (1 when unset).
  int world_size = 1;
  /// Rank on this node, LOCAL_RANK (defaults to the rank).
  int local_rank = 0;
  /// Host of the store, MASTER_ADDR (rank 0's node).
  std::string master_addr = "127.0.0.1";
  /// TCP port of the store, MASTER_PORT.
  int master_port = 29500;
  bool agent_store = false;   ///< TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store
  int restart_count = 0;      ///< TORCHELASTIC_RESTART_COUNT: prefixes the keys of this attempt

  /// Reads the environment. Throws std::invalid_argument naming the variable, its value and what was expected.
  static Environment from_env() {
    Environment e;
    auto get = [](const char* n) -> const char* { return std::getenv(n); };
    auto to_int = [](const char* name, const char* v, long lo, long hi) {
      char* end = nullptr;
      errno = 0;
      const long x = std::strtol(v, &end, 10);
      if (errno || end == v || *end != '\0' || x < lo || x > hi)
        throw std::invalid_argument(fmt::format(
            "policytrain::parallel::DataParallel: {}='{}' is not an integer in [{}, {}]; set it as torchrun does",
            name, v, lo, hi));
      return static_cast<int>(x);
    };
    if (const char* v = get("WORLD_SIZE")) e.world_size = to_int("WORLD_SIZE", v, 1, 1 << 20);
    if (const char* v = get("RANK")) {
      e.rank = to_int("RANK", v, 0, 1 << 20);
    } else if (e.world_size > 1) {
      throw std::invalid_argument(fmt::format(
          "policytrain::parallel::DataParallel: WORLD_SIZE={} but RANK is not set; set RANK to 0..{} in each "
          "process, or launch with torchrun or `--nproc {}`", e.world_size, e.world_size - 1, e.world_size));
    }
    if (e.rank >= e.world_size)
      throw std::invalid_argument(fmt::format(
          "policytrain::parallel::DataParallel: RANK={} but WORLD_SIZE={}; RANK must be in 0..{}", e.rank,
          e.world_size, e.world_size - 1));
    e.local_rank = e.rank;
    if (const char* v = get("LOCAL_RANK")) e.local_rank = to_int("LOCAL_RANK", v, 0, 1 << 20);
    if (e.world_size > 1) {
      const char* addr = get("MASTER_ADDR");
      const char* port = get("MASTER_PORT");
      if (!addr || !*addr)
        throw std::invalid_argument(fmt::format(
            "policytrain::parallel::DataParallel: WORLD_SIZE={} but MASTER_ADDR is not set; set it to the "
            "address of the node that runs rank 0", e.world_size));
      if (!port)
        throw std::invalid_argument(fmt::format(
            "policytrain::parallel::DataParallel: WORLD_SIZE={} but MASTER_PORT is not set; set it to a free "
            "TCP port on MASTER_ADDR={}", e.world_size, addr));
      e.master_addr = addr;
      e.master_port = to_int("MASTER_PORT", port, 1, 65535);
    }
    if (const char* v = get("TORCHELASTIC_USE_AGENT_STORE")) e.agent_store = std::string(v) == "True";
    if (const char* v = get("TORCHELASTIC_RESTART_COUNT")) e.restart_count = to_int("TORCHELASTIC_RESTART_COUNT", v, 0, 1 << 30);
    return e;
  }
};

namespace detail {

/// The process group and the gradient buckets, shared with the autograd hooks (so the policy may be moved).
struct DataParallelState {
  struct Bucket {
    std::vector<size_t> params;           ///< indices into `params`, in the order they sit in `flat`
    std::vector<int64_t> offsets;
    torch::Tensor flat;
    int64_t pending = 0;                  ///< gradients not yet ready in this backward
    bool launched = false;
    c10::intrusive_ptr<c10d::Work> work;
  };

  Environment env;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  torch::Device comm_device{torch::kCPU};  ///< where small control tensors go (NCCL reduces CUDA tensors only)
  std::vector<torch::Tensor> params;
  std::vector<int64_t> bucket_of;         ///< param index → bucket index
  std::vector<Bucket> buckets;
  size_t next_launch = 0;                 ///< buckets are launched in index order, identical on every rank
  bool sync = false;                      ///< inside the backward of a window's last micro-step
  bool any_launched = false;
  int64_t step = 0;
  // Counters, exposed by DataParallel.
  int64_t allreduce_calls = 0, allreduce_calls_in_hooks = 0, allreduce_calls_last_step = 0;
  double comm_wait_seconds = 0;
  std::mutex mu;

  ~DataParallelState() {
    for (auto& p : params) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
  }

  std::string who() const { return fmt::format("rank {} of {}", env.rank, env.world_size); }

  /// After a failed collective: every surviving rank checks in on the store; those that do not within a short
  /// grace period are named. Returns a sentence for the error message.
  std::string diagnose() {
    if (!store) return "";
    try {
      store->set(fmt::format("policytrain/failed/{}", env.rank), std::vector<uint8_t>{1});
      const auto grace = std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(3));
      const auto until = std::chrono::steady_clock::now() + grace;
      std::vector<int> missing;
      do {
        missing.clear();
        for (int r = 0; r < env.world_size; ++r)
          if (!store->check({fmt::format("policytrain/failed/{}", r)})) missing.push_back(r);
        if (missing.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      } while (std::chrono::steady_clock::now() < until);
      if (missing.empty()) return "every rank is alive and saw the failure too (a network error?)";
      return fmt::format("rank{} {} did not answer afterwards (dead or hung)", missing.size() > 1 ? "s" : "",
                         fmt::join(missing, ", "));
    } catch (const std::exception&) {
      return fmt::format("the store at MASTER_ADDR={} MASTER_PORT={} is gone too: {} (it lives in rank 0's "
                         "process unless torchrun's agent hosts it)", env.master_addr, env.master_port,
                         env.agent_store ? "the torchrun agent stopped" : "rank 0 is dead");
    }
  }

  /// Waits for `w`; on failure rethrows as CollectiveError naming this rank, `what` and the silent ranks.
  void wait(const c10::intrusive_ptr<c10d::Work>& w, const std::string& what) {
    try {
      if (!w->wait(timeout))
        throw std::runtime_error("the collective was aborted");
    } catch (const std::exception& e) {
      const std::string cause = e.what();
      throw CollectiveError(fmt::format(
          "policytrain::parallel::DataParallel: {}: {} failed or timed out (timeout {} ms): {}; {}", who(), what,
          timeout.count(), cause.substr(0, cause.find('\n')), diagnose()));
    }
  }

  void launch(size_t b, bool from_hook) {
    auto& bk = buckets[b];
    {
      torch::NoGradGuard ng;
      for (size_t j = 0; j < bk.params.size(); ++j) {
        auto& p = params[bk.params[j]];
        auto slice = bk.flat.slice(0, bk.offsets[j], bk.offsets[j] + p.numel());
        if (p.grad().defined()) slice.copy_(p.grad().reshape({-1}));
        else slice.zero_();  // an unused parameter still takes part, so every rank reduces the same buckets
      }
      bk.flat.div_(env.world_size);
    }
    std::vector<at::Tensor> ts{bk.flat};
    bk.work = backend->allreduce(ts, c10d::AllreduceOptions{});
    bk.launched = true;
    any_launched = true;
    ++allreduce_calls;
    ++allreduce_calls_last_step;
    if (from_hook) ++allreduce_calls_in_hooks;
  }

  void launch_ready(bool from_hook) {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) launch(next_launch++, from_hook);
  }

  void grad_ready(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (!sync) return;
    auto& bk = buckets[static_cast<size_t>(bucket_of[i])];
    if (bk.launched || bk.pending == 0) return;
    --bk.pending;
    launch_ready(/*from_hook=*/true);
  }

  void begin_sync_backward() {
    std::lock_guard<std::mutex> lock(mu);
    sync = true;
    if (!any_launched) allreduce_calls_last_step = 0;
    for (auto& b : buckets) {
      b.pending = static_cast<int64_t>(b.params.size());
      b.launched = false;
      b.work.reset();
    }
    next_launch = 0;
  }

  /// Launches what the hooks did not (parameters that got no gradient), in order.
  void flush() {
    std::lock_guard<std::mutex> lock(mu);
    sync = false;
    while (next_launch < buckets.size()) launch(next_launch++, /*from_hook=*/false);
  }

  /// Waits for every bucket and writes the averaged gradients back.
  void finish_step() {
    if (!any_launched) {  // a window stepped without a synchronised backward (a loader of unknown length)
      begin_sync_backward();
      flush();
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t b = 0; b < buckets.size(); ++b)
      wait(buckets[b].work, fmt::format("all-reduce of gradient bucket {}/{} (optimizer step {})", b + 1,
                                        buckets.size(), step));
    comm_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    torch::NoGradGuard ng;
    for (auto& bk : buckets) {
      for (size_t j = 0; j < bk.params.size(); ++j) {
        auto& p = params[bk.params[j]];
        auto slice = bk.flat.slice(0, bk.offsets[j], bk.offsets[j] + p.numel()).view(p.sizes());
        if (p.grad().defined()) p.mutable_grad().copy_(slice);
        else p.mutable_grad() = slice.clone();
      }
      bk.work.reset();
    }
    any_launched = false;
    ++step;
  }
};

/// Calls back into the shared state when autograd has accumulated a parameter's gradient.
struct GradReadyHook : torch::autograd::PostAccumulateGradHook {
  GradReadyHook(std::weak_ptr<DataParallelState> s, size_t i) : state(std::move(s)), index(i) {}
  void operator()(const torch::autograd::Variable&) override {
    if (auto s = state.lock()) s->grad_ready(index);
  }
  std::weak_ptr<DataParallelState> state;
  size_t index;
};

}  // namespace detail

/// Run-time options of parallel::DataParallel.
struct DataParallelOptions {
  bool enabled = true;                ///< false: train alone even when launched with WORLD_SIZE > 1
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  ///< start-up and every collective
  double bucket_mb = 25;              ///< gradient bytes per all-reduce (MiB), as DDP's bucket_cap_mb
  std::string backend = "auto";       ///< auto (NCCL on CUDA, Gloo on CPU), gloo, nccl
  int gloo_threads = 2;               ///< Gloo's worker threads (collectives in flight at once)
};

/// Data-parallel training on c10d: one process per device, gradients averaged in buckets during backward.
class DataParallel {
 public:
  /// Category: parallel (at most one per Trainer).
  static constexpr Category category = Category::parallel;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "parallel::DataParallel";

  /// Run-time options (DataParallelOptions).
  using Options = DataParallelOptions;

  /// Reads the environment now (throws on a bad one); connects at on_fit_begin, or at connect().
  explicit DataParallel(Options o = {}) : o_(std::move(o)), s_(std::make_shared<detail::DataParallelState>()) {
    s_->env = o_.enabled ? Environment::from_env() : Environment{};
    s_->timeout = o_.timeout;
  }

  /// The options.
  const Options& options() const { return o_; }
  /// This process's rank.
  int rank() const { return s_->env.rank; }
  /// Number of processes in the job.
  int world_size() const { return s_->env.world_size; }
  /// Rank on this node (selects the device).
  int local_rank() const { return s_->env.local_rank; }
  /// The environment read at construction.
  const Environment& environment() const { return s_->env; }
  /// Whether more than one process takes part (WORLD_SIZE > 1).
  bool active() const { return s_->env.world_size > 1; }
  /// Whether this is rank 0, the one that logs and writes files.
  bool is_main() const { return s_->env.rank == 0; }

  /// Gradient buckets (known after on_fit_begin), all-reduce calls so far, those launched from autograd
  /// hooks (while backward still ran), those of the last optimizer step, and seconds spent waiting on them.
  size_t bucket_count() const { return s_->buckets.size(); }
  /// All-reduce calls so far.
  int64_t allreduce_calls() const { return s_->allreduce_calls; }
  /// All-reduce calls launched from autograd hooks, while backward still ran.
  int64_t allreduce_calls_in_hooks() const { return s_->allreduce_calls_in_hooks; }
  /// All-reduce calls of the last optimizer step.
  int64_t allreduce_calls_last_step() const { return s_->allreduce_calls_last_step; }
  /// Seconds spent waiting for all-reduces to finish.
  double comm_wait_seconds() const { return s_->comm_wait_seconds; }

  /// Joins the job: the store (rank 0 hosts it, or torchrun's agent does), then the process group.
  /// Idempotent. Throws std::runtime_error naming MASTER_ADDR / MASTER_PORT when that fails.
  void connect(torch::Device device = torch::kCPU) {
    auto& s = *s_;
    if (!active() || s.backend) return;
    const auto& e = s.env;
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(e.master_port);
    so.isServer = e.rank == 0 && !e.agent_store;
    so.numWorkers = e.agent_store ? std::nullopt : std::optional<size_t>(e.world_size);
    so.waitWorkers = false;
    so.timeout = o_.timeout;
    so.multiTenant = true;
    c10::intrusive_ptr<c10d::Store> tcp;
    try {
      tcp = c10::make_intrusive<c10d::TCPStore>(e.master_addr, so);
    } catch (const std::exception& ex) {
      const std::string cause = ex.what();
      throw std::runtime_error(fmt::format(
          "policytrain::parallel::DataParallel: rank {} could not {} the store at MASTER_ADDR={} MASTER_PORT={} "
          "within {} ms: {}; {}", e.rank, so.isServer ? "open" : "reach", e.master_addr, e.master_port,
          o_.timeout.count(), cause.substr(0, cause.find('\n')),
          so.isServer ? "is the port in use? choose another MASTER_PORT"
                      : "is rank 0 running, and MASTER_ADDR reachable from this node?"));
    }
    // A torchrun agent's store outlives restarts: keys of each attempt live under their own prefix.
    s.store = e.agent_store
        ? c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::PrefixStore>(
              fmt::format("/worker/attempt_{}", e.restart_count), tcp))
        : tcp;
    auto pg_store = c10::make_intrusive<c10d::PrefixStore>("policytrain/pg", s.store);
    const bool cuda = device.is_cuda();
    const std::string kind = o_.backend == "auto" ? (cuda ? "nccl" : "gloo") : o_.backend;
    try {
      if (kind == "gloo") {
        auto go = c10d::ProcessGroupGloo::Options::create(o_.timeout);
        go->threads = o_.gloo_threads;
        go->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
        s.backend = c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, e.rank, e.world_size, go);
      } else if (kind == "nccl") {
#ifdef POLICYTRAIN_WITH_NCCL
        auto no = c10d::ProcessGroupNCCL::Options::create();
        no->timeout = o_.timeout;
        s.backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(pg_store, e.rank, e.world_size, no);
        s.comm_device = device;
#else
        throw std::invalid_argument("backend 'nccl' needs a LibTorch built with CUDA and NCCL (USE_C10D_NCCL); use 'gloo'");
#endif
      } else {
        throw std::invalid_argument(fmt::format("backend '{}' is unknown; use auto, gloo or nccl", kind));
      }
    } catch (const std::exception& ex) {
      const std::string cause = ex.what();
      throw std::runtime_error(fmt::format(
          "policytrain::parallel::DataParallel: rank {} of {} could not form the {} process group (MASTER_ADDR={} "
          "MASTER_PORT={}, timeout {} ms): {}", e.rank, e.world_size, kind, e.master_addr, e.master_port,
          o_.timeout.count(), cause.substr(0, cause.find('\n'))));
    }
  }

  /// Broadcasts `tensors` from rank 0, in place.
  void broadcast(std::vector<torch::Tensor> tensors, const std::string& what) {
    if (!active()) return;
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::vector<at::Tensor> ts{tensors[i]};
      s_->wait(s_->backend->broadcast(ts, c10d::BroadcastOptions{}),
               fmt::format("broadcast of {} ({} of {})", what, i + 1, tensors.size()));
    }
  }

  /// Reduces `t` over the ranks with `op`, in place; `what` names the collective in errors.
  void all_reduce(torch::Tensor& t, c10d::ReduceOp op, const std::string& what) {
    if (!active()) return;
    std::vector<at::Tensor> ts{t.device() == s_->comm_device ? t : t.to(s_->comm_device)};
    c10d::AllreduceOptions ao;
    ao.reduceOp = op;
    s_->wait(s_->backend->allreduce(ts, ao), what);
    if (!ts[0].is_same(t)) t.copy_(ts[0]);
  }

  // --- hooks ---

  /// Connects, broadcasts rank 0's parameters and buffers, and installs the gradient hooks.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    if (!active()) return;
    connect(ctx.device());
    torch::NoGradGuard ng;
    std::vector<torch::Tensor> state;
    for (auto& p : unique_parameters(ctx.module())) state.push_back(p.detach());
    for (auto& [name, b] : unique_named_buffers(ctx.module())) state.push_back(b.detach());
    broadcast(state, "rank 0's parameters and buffers");
    if (s_->params.empty()) build_buckets(ctx.module());
  }

  /// Runs `fn` (the backward); on a window's last micro-step, all-reduces gradient buckets as they become ready.
  template <class Ctx, class F>
  void around_backward(Ctx& ctx, F&& fn) {
    if (!active() || !ctx.is_last_micro_step()) {
      fn();
      return;
    }
    s_->begin_sync_backward();
    fn();
    s_->flush();
  }

  /// Waits for every bucket and writes the averaged gradients back.
  template <class Ctx>
  void before_step(Ctx&) {
    if (active()) s_->finish_step();
  }

  /// Whether this is rank 0 (the Trainer's is_main hook).
  bool is_main() { return s_->env.rank == 0; }

  /// True on every rank when `b` is true on any rank.
  template <class Ctx>
  bool agree_any(Ctx&, bool b) {
    if (!active()) return b;
    auto t = torch::tensor({b ? 1 : 0}, torch::kInt);
    all_reduce(t, c10d::ReduceOp::SUM, "agreement on a stop / save / rollback decision");
    return t.item<int>() > 0;
  }

  /// Sums the loss, sample count and confusion matrix of an evaluation over the ranks.
  template <class Ctx>
  void reduce_metrics(Ctx&, MetricsAccumulator& acc) {
    if (!active()) return;
    auto sums = acc.sums();
    // A rank without a classification batch has no confusion matrix: take the largest class count.
    auto kt = torch::tensor({sums.confusion.defined() ? sums.confusion.size(0) : int64_t{0}}, torch::kLong);
    all_reduce(kt, c10d::ReduceOp::MAX, "reduction of validation metrics (class count)");
    const int64_t k = kt.item<int64_t>();
    auto packed = torch::zeros({2 + k * k}, torch::kDouble);
    packed[0] = sums.loss_sum;
    packed[1] = static_cast<double>(sums.samples);
    if (sums.confusion.defined() && sums.confusion.size(0) == k)
      packed.slice(0, 2).copy_(sums.confusion.reshape({-1}).to(torch::kDouble));
    all_reduce(packed, c10d::ReduceOp::SUM, "reduction of validation metrics");
    sums.loss_sum = packed[0].item<double>();
    sums.samples = static_cast<int64_t>(std::llround(packed[1].item<double>()));
    if (k > 0) sums.confusion = packed.slice(0, 2).round().to(torch::kLong).view({k, k});
    acc.set_sums(std::move(sums));
  }

 private:
  void build_buckets(torch::nn::Module& m) {
    auto& s = *s_;
    // Each tensor once: a tied weight has one gradient, one hook and one slot in a bucket.
    for (auto& p : unique_parameters(m))
      if (p.requires_grad()) s.params.push_back(p);
    const auto cap = static_cast<int64_t>(o_.bucket_mb * 1024 * 1024);
    s.bucket_of.assign(s.params.size(), -1);
    int64_t bytes = 0;
    // Reverse registration order: roughly the order in which backward produces the gradients.
    for (size_t k = s.params.size(); k-- > 0;) {
      const auto& p = s.params[k];
      const int64_t pb = p.numel() * static_cast<int64_t>(p.element_size());
      const bool fresh = s.buckets.empty() || bytes + pb > cap ||
                         s.buckets.back().flat.scalar_type() != p.scalar_type();
      if (fresh) {
        s.buckets.emplace_back();
        s.buckets.back().flat = torch::empty({0}, p.options());
        bytes = 0;
      }
      auto& b = s.buckets.back();
      b.offsets.push_back(bytes / static_cast<int64_t>(p.element_size()));
      b.params.push_back(k);
      bytes += pb;
      s.bucket_of[k] = static_cast<int64_t>(s.buckets.size() - 1);
    }
    for (auto& b : s.buckets) {
      int64_t n = 0;
      for (size_t j = 0; j < b.params.size(); ++j) n += s.params[b.params[j]].numel();
      b.flat = torch::zeros({n}, s.params[b.params.front()].options().requires_grad(false));
    }
    for (size_t i = 0; i < s.params.size(); ++i)
      torch::autograd::impl::set_post_acc_grad_hooks(
          s.params[i], std::make_unique<detail::GradReadyHook>(s_, i));
  }

  Options o_;
  std::shared_ptr<detail::DataParallelState> s_;
};

}  // namespace policytrain::parallel
