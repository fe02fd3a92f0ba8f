#pragma once
/// \file
/// parallel::DataParallel — data-parallel training over PyTorch's c10d (Gloo on CPU, NCCL on CUDA), started the
/// way torchrun starts a job: from RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (and torchrun's agent
/// store when TORCHELASTIC_USE_AGENT_STORE is set).
///
/// Every rank holds the whole model and trains on its own shard of the data (data::TensorLoader with
/// LoaderOptions{rank, world_size}). At the start of fit, rank 0's parameters and buffers are broadcast, and at
/// the first epoch every rank checks that all start from the same state (a resume from different checkpoints
/// is an error, ResumeMismatch). Rank 0's buffers are broadcast before the first forward of every accumulation
/// window and every evaluation (broadcast_buffers, as DDP's). During
/// the backward of the last micro-step of each accumulation window, a post-accumulate-grad hook on every
/// parameter marks its gradient ready; a bucket (about 25 MB of gradients, reverse parameter order) is
/// all-reduced as soon as all of its gradients are ready, so communication overlaps the rest of the backward.
/// Gradients are averaged (divided by the world size, then summed: Gloo has no AVG). Non-final micro-steps
/// do no communication at all. before_step waits for every bucket and writes the averages back.
///
/// A parameter no rank used keeps an undefined gradient with find_unused_parameters (else an error), as DDP.
///
/// Hooks: on_fit_begin (connect, broadcast, install gradient hooks), on_epoch_begin (start check),
/// around_forward / around_evaluate (buffers), around_backward (sync or not), before_step (wait, write back),
/// state_dict (world size), and the Trainer's is_main / agree_any / reduce_metrics.
/// Requires: every rank runs the same Trainer on equally long shards (TensorLoader pads by wrapping).
/// Each rank normalises batch norm by its own micro-batch (no SyncBatchNorm), as in PyTorch's DDP.
/// What matches DDP and what does not: docs/parallel.md (checked side by side: tests/unit/test_ddp_oracle.cpp).
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
#include <optional>
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
#include <policytrain/core/state_dict.hpp>
#include <policytrain/io/digest.hpp>

namespace policytrain::parallel {

/// A collective failed or timed out: a peer died, hung, or the network broke. The message names this rank,
/// the collective, and the ranks that did not answer afterwards.
struct CollectiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The ranks would start training from different states (each resumed from a different checkpoint, or some
/// from none), or a mid-epoch checkpoint is resumed with another world size. The message lists each rank's state.
struct ResumeMismatch : std::runtime_error {
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
    torch::Tensor wire;                   ///< the compressed copy on the wire (fp16 / bf16 compression)
  };

  Environment env;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  torch::Device comm_device{torch::kCPU};  ///< where small control tensors go (NCCL reduces CUDA tensors only)
  std::vector<torch::Tensor> params;
  std::vector<std::string> names;         ///< the parameters' names in the module (for errors)
  std::vector<char> ready;                ///< gradient hook fired for the parameter in this synchronised backward
  bool find_unused = false;               ///< a parameter no rank used keeps an undefined gradient (else an error)
  std::optional<c10::ScalarType> wire_dtype;  ///< gradient compression: all-reduce in this dtype
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

  /// Elements of the last bucket past the gradients: one "used on this rank" flag per parameter, so that the
  /// ranks learn which parameters no rank used without a collective of their own (DDP's local_used_map).
  int64_t used_offset = 0;

  void launch(size_t b, bool from_hook) {
    auto& bk = buckets[b];
    {
      torch::NoGradGuard ng;
      for (size_t j = 0; j < bk.params.size(); ++j) {
        auto& p = params[bk.params[j]];
        auto slice = bk.flat.slice(0, bk.offsets[j], bk.offsets[j] + p.numel());
        if (p.grad().defined()) slice.copy_(p.grad().reshape({-1}));
        else slice.zero_();  // unused here: a zero contribution, so every rank reduces the same buckets
      }
      if (b + 1 == buckets.size()) {
        // The last bucket is launched after every other one, when all gradients of this backward exist.
        std::vector<float> flags(params.size());
        for (size_t i = 0; i < params.size(); ++i) flags[i] = params[i].grad().defined() ? 1.0f : 0.0f;
        bk.flat.slice(0, used_offset, used_offset + static_cast<int64_t>(params.size()))
            .copy_(torch::tensor(flags, torch::kFloat));
      }
      if (wire_dtype) {
        // As DDP's fp16_compress_hook / bf16_compress_hook: cast, divide in the low precision, sum, cast back.
        bk.wire = bk.flat.to(*wire_dtype).div_(env.world_size);
      } else {
        bk.flat.div_(env.world_size);
      }
    }
    std::vector<at::Tensor> ts{wire_dtype ? bk.wire : bk.flat};
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
    if (ready[i])
      throw std::runtime_error(fmt::format(
          "policytrain::parallel::DataParallel: {}: parameter '{}' (index {}) was marked ready twice in one "
          "backward (its gradient hook fired again after its bucket was counted), as DDP reports it: the "
          "parameter takes part in a reentrant backward (a reentrant activation checkpoint, or a backward "
          "inside a custom autograd function) or in two backward passes of one micro-step; use non-reentrant "
          "checkpointing, or a single backward per micro-step", who(), names[i], i));
    ready[i] = 1;
    auto& bk = buckets[static_cast<size_t>(bucket_of[i])];
    if (bk.launched || bk.pending == 0) return;
    --bk.pending;
    launch_ready(/*from_hook=*/true);
  }

  void begin_sync_backward() {
    std::lock_guard<std::mutex> lock(mu);
    sync = true;
    if (!any_launched) allreduce_calls_last_step = 0;
    std::fill(ready.begin(), ready.end(), 0);
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
    if (buckets.empty()) {  // nothing to train (no parameter requires a gradient)
      ++step;
      return;
    }
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
    if (wire_dtype)
      for (auto& bk : buckets) bk.flat.copy_(bk.wire);
    // Which parameters some rank used (the flags were averaged: > 0 means used somewhere).
    auto& last = buckets.back();
    auto used = last.flat.slice(0, used_offset, used_offset + static_cast<int64_t>(params.size()))
                    .to(torch::kDouble).gt(0).to(torch::kCPU);
    const auto* used_p = used.data_ptr<bool>();
    std::vector<size_t> unused;
    for (size_t i = 0; i < params.size(); ++i)
      if (!used_p[i]) unused.push_back(i);
    if (!unused.empty() && !find_unused) {
      std::vector<std::string> ns;
      for (size_t i : unused) ns.push_back(fmt::format("'{}' (index {})", names[i], i));
      for (auto& bk : buckets) bk.work.reset();
      any_launched = false;
      throw std::runtime_error(fmt::format(
          "policytrain::parallel::DataParallel: {}: no rank computed a gradient for parameter{} {} in optimizer "
          "step {} (DDP stops on such parameters too); set DataParallelOptions::find_unused_parameters = true "
          "to leave them untouched, or freeze them (requires_grad false)", who(), ns.size() > 1 ? "s" : "",
          fmt::join(ns, ", "), step));
    }
    for (auto& bk : buckets) {
      for (size_t j = 0; j < bk.params.size(); ++j) {
        const size_t i = bk.params[j];
        auto& p = params[i];
        // A parameter no rank used keeps an undefined gradient, so the optimizer leaves it (and its moments)
        // alone, as in one process and in DDP with find_unused_parameters.
        if (!used_p[i]) continue;
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
  /// Broadcast rank 0's buffers (batch-norm statistics) before the first forward of every accumulation window
  /// and before every evaluation, as DDP's broadcast_buffers=True (DDP: before the forward that follows a
  /// synchronised one). false: every rank keeps its own buffers.
  bool broadcast_buffers = true;
  /// A parameter that no rank used in a step keeps an undefined gradient (the optimizer leaves it alone), as
  /// DDP's find_unused_parameters=True; false: such a parameter is an error naming it (DDP also stops).
  bool find_unused_parameters = false;
  /// Gradient compression on the wire, as DDP's built-in communication hooks: "none", "fp16"
  /// (fp16_compress_hook) or "bf16" (bf16_compress_hook).
  std::string compression = "none";
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
    s_->find_unused = o_.find_unused_parameters;
    if (o_.compression == "fp16") s_->wire_dtype = c10::ScalarType::Half;
    else if (o_.compression == "bf16") s_->wire_dtype = c10::ScalarType::BFloat16;
    else if (o_.compression != "none")
      throw std::invalid_argument(fmt::format("policytrain::parallel::DataParallel: compression '{}' is unknown; "
                                              "use none, fp16 or bf16", o_.compression));
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
  /// Bytes all-reduced per optimizer step: every bucket as it goes on the wire (compressed or not), the
  /// per-parameter "used" flags of the last bucket included.
  int64_t bucket_bytes() const {
    int64_t n = 0;
    const auto elt = s_->wire_dtype ? static_cast<int64_t>(c10::elementSize(*s_->wire_dtype)) : int64_t{0};
    for (const auto& b : s_->buckets) n += b.flat.numel() * (elt ? elt : static_cast<int64_t>(b.flat.element_size()));
    return n;
  }

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
    verified_ = false;
    if (!active()) return;
    connect(ctx.device());
    torch::NoGradGuard ng;
    std::vector<torch::Tensor> state;
    for (auto& p : unique_parameters(ctx.module())) state.push_back(p.detach());
    for (auto& [name, b] : unique_named_buffers(ctx.module())) state.push_back(b.detach());
    broadcast(state, "rank 0's parameters and buffers");
    if (s_->params.empty()) build_buckets(ctx.module());
  }

  /// At the first epoch of a fit, after every policy's on_fit_begin (a checkpoint policy has resumed by then):
  /// checks that every rank starts from the same state (verify_start).
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    if (!verified_) verify_start(ctx);
  }

  /// A fit that had no epoch left to run still takes part in the start check (the other ranks may have).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    if (!verified_) verify_start(ctx);
  }

  /// Before the first forward of every accumulation window in training, broadcasts rank 0's buffers
  /// (batch-norm statistics) when `broadcast_buffers` is set, as DDP does before the forward that follows a
  /// synchronised one.
  template <class Ctx, class F>
  decltype(auto) around_forward(Ctx& ctx, F&& fn) {
    if (active() && o_.broadcast_buffers && ctx.module().is_training() && ctx.state().micro_step == 1)
      sync_buffers(ctx.module());
    return fn();
  }

  /// Broadcasts rank 0's buffers before an evaluation (when `broadcast_buffers` is set), so that every rank
  /// evaluates the same model.
  template <class Ctx, class F>
  Metrics around_evaluate(Ctx& ctx, F&& evaluate) {
    if (active() && o_.broadcast_buffers) sync_buffers(ctx.module());
    return evaluate();
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

  /// The world size, saved in checkpoints so that a resume with another one is recognised.
  StateDict state_dict() const { return {{"world_size", scalar_tensor(static_cast<int64_t>(world_size()))}}; }
  /// Restores what state_dict() saved (the world size of the run that wrote the checkpoint).
  void load_state_dict(const StateDict& d) { saved_world_size_ = state_int(d, "world_size"); }

  /// Buffer broadcasts so far (broadcast_buffers).
  int64_t buffer_broadcasts() const { return buffer_broadcasts_; }

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
  void sync_buffers(torch::nn::Module& m) {
    std::vector<torch::Tensor> bufs;
    for (auto& b : m.buffers()) bufs.push_back(b.detach());
    if (bufs.empty()) return;
    torch::NoGradGuard ng;
    // One broadcast of all buffers flattened per dtype (DDP coalesces them too).
    std::vector<std::vector<size_t>> groups;
    for (size_t i = 0; i < bufs.size(); ++i) {
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& v) {
        return bufs[v.front()].scalar_type() == bufs[i].scalar_type() && bufs[v.front()].device() == bufs[i].device();
      });
      if (g == groups.end()) groups.push_back({i});
      else g->push_back(i);
    }
    for (const auto& g : groups) {
      std::vector<torch::Tensor> parts;
      for (size_t i : g) parts.push_back(bufs[i].reshape({-1}));
      auto flat = torch::cat(parts);
      std::vector<at::Tensor> ts{flat};
      s_->wait(s_->backend->broadcast(ts, c10d::BroadcastOptions{}), "broadcast of rank 0's buffers");
      int64_t off = 0;
      for (size_t i : g) {
        bufs[i].copy_(flat.slice(0, off, off + bufs[i].numel()).view(bufs[i].sizes()));
        off += bufs[i].numel();
      }
    }
    ++buffer_broadcasts_;
  }

  /// Every rank must start training from the same state: the same counters (epoch, optimizer step, micro-batch
  /// in the epoch, skipped steps) and the same parameters and buffers (SHA-256). A fresh start always agrees
  /// (rank 0's weights were broadcast at on_fit_begin); a resume agrees when every rank loaded the same
  /// checkpoint. Otherwise every rank stops with an error listing each rank's state: never a silent divergence.
  /// Also stops a mid-epoch resume with another world size than the checkpoint's (the rest of that epoch
  /// cannot be re-sharded); at an epoch boundary the loaders re-shard by themselves.
  template <class Ctx>
  void verify_start(Ctx& ctx) {
    verified_ = true;
    if (!active()) return;
    const auto& st = ctx.state();
    const std::string sha = io::params_sha256(ctx.module());
    const auto digest = static_cast<int64_t>(std::stoull(sha.substr(0, 15), nullptr, 16));
    constexpr int64_t k = 6;
    const int64_t w = world_size();
    auto table = torch::zeros({w, k}, torch::kLong);
    auto row = table[rank()];
    const int64_t mine[k] = {st.epoch, st.global_step, st.batch_in_epoch, st.skipped_steps, saved_world_size_, digest};
    for (int64_t j = 0; j < k; ++j) row[j].fill_(mine[j]);
    all_reduce(table, c10d::ReduceOp::SUM, "agreement on the starting state (resume)");
    auto t = table.accessor<int64_t, 2>();
    bool same = true;
    for (int64_t r = 1; r < w; ++r)
      for (int64_t j = 0; j < k; ++j) same = same && t[r][j] == t[0][j];
    if (!same) {
      std::vector<std::string> rows;
      for (int64_t r = 0; r < w; ++r)
        rows.push_back(fmt::format("rank {}: epoch {}, step {}, micro-batch {} of the epoch, weights {:015x}", r,
                                   t[r][0], t[r][1], t[r][2], t[r][5]));
      throw ResumeMismatch(fmt::format(
          "policytrain::parallel::DataParallel: {}: the ranks would start training from different states ({}); "
          "each rank resumed on its own (rank-local run directories?): give every rank the same checkpoint (a "
          "run directory all ranks read, or a copy of rank 0's file), or start all of them fresh",
          s_->who(), fmt::join(rows, "; ")));
    }
    const int64_t saved = t[0][4];
    if (saved > 0 && saved != w && st.batch_in_epoch > 0)
      throw ResumeMismatch(fmt::format(
          "policytrain::parallel::DataParallel: {}: the checkpoint was written mid-epoch (micro-batch {} of epoch "
          "{}) by a run of world size {}, but this run has world size {}: the rest of that epoch cannot be "
          "re-sharded; resume with WORLD_SIZE={}, or from a checkpoint taken at an epoch end (those re-shard)",
          s_->who(), st.batch_in_epoch, st.epoch, saved, w, saved));
  }

  void build_buckets(torch::nn::Module& m) {
    auto& s = *s_;
    // Each tensor once: a tied weight has one gradient, one hook and one slot in a bucket.
    for (auto& [name, p] : unique_named_parameters(m))
      if (p.requires_grad()) {
        s.params.push_back(p);
        s.names.push_back(name);
      }
    s.ready.assign(s.params.size(), 0);
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
      // The last bucket also carries one "used on this rank" flag per parameter (see used_offset).
      if (&b == &s.buckets.back()) {
        s.used_offset = n;
        n += static_cast<int64_t>(s.params.size());
      }
      b.flat = torch::zeros({n}, s.params[b.params.front()].options().requires_grad(false));
    }
    for (size_t i = 0; i < s.params.size(); ++i)
      torch::autograd::impl::set_post_acc_grad_hooks(
          s.params[i], std::make_unique<detail::GradReadyHook>(s_, i));
  }

  Options o_;
  std::shared_ptr<detail::DataParallelState> s_;
  bool verified_ = false;
  int64_t saved_world_size_ = 0;   ///< world size of the run whose checkpoint was loaded (0: none loaded)
  int64_t buffer_broadcasts_ = 0;
};

}  // namespace policytrain::parallel
