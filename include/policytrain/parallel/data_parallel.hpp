#pragma once
/// \file
/// parallel::DataParallel — data-parallel training over PyTorch's c10d (Gloo on CPU, NCCL on CUDA), started
/// from the environment its launcher set (parallel::Environment: torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
/// MASTER_ADDR, MASTER_PORT and agent store; Slurm's srun; Open MPI's mpirun).
///
/// Every rank holds the whole model and trains on its own shard of the data (data::TensorLoader with
/// LoaderOptions{rank, world_size}). At the start of fit, rank 0's parameters and buffers are broadcast, and at
/// the first epoch every rank checks that all start from the same state (a resume from different checkpoints
/// is an error, ResumeMismatch). Rank 0's buffers are broadcast before the first forward of every accumulation
/// window and every evaluation (broadcast_buffers, as DDP's).
///
/// The gradients are synchronised by PyTorch's own c10d::Reducer, the engine under Python's
/// DistributedDataParallel, driven as DDP drives it: the same bucket assignment
/// (c10d::compute_bucket_assignment_by_size, one bucket in the first step, then rebuilt in the order the gradients
/// became ready), prepare_for_forward / prepare_for_backward on a window's last micro-step only (DDP's no_sync on
/// the others: no communication at all), each bucket all-reduced from the autograd hooks as soon as its gradients
/// are ready, and the averages written back at the backward's end. find_unused_parameters,
/// gradient_as_bucket_view and static_graph are the Reducer's own. The communication hook averages (divide, then
/// sum: Gloo has no AVG), in fp16 / bf16 with gradient compression, and counts the all-reduces.
///
/// Hooks: on_fit_begin (connect, verify, broadcast, build the Reducer), on_epoch_begin (start check; after a
/// resume each rank's own generator states), around_forward (buffers, bucket rebuild) / around_evaluate (buffers),
/// around_backward (sync or not), before_step (the Reducer finished, or a late average), before_save (every rank's
/// generator states, gathered), state_dict (world size, those states), and the Trainer's is_main / agree_any /
/// reduce_metrics.
/// Requires: every rank runs the same Trainer on equally long shards (TensorLoader pads by wrapping).
/// Each rank normalises batch norm by its own micro-batch (no SyncBatchNorm), as in PyTorch's DDP.
/// What matches DDP and what does not: docs/parallel.md (checked side by side: tests/unit/test_ddp_oracle.cpp).
/// Cost: with WORLD_SIZE unset or 1, or `enabled = false`, nothing (no hooks installed, no process group).
/// Example: examples/fashion_mnist (`--nproc 2`, or torchrun); docs/parallel.md.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#if !__has_include(<gloo/config.h>)
#error "policytrain/parallel/data_parallel.hpp: Gloo's headers are missing (LibTorch's wheel does not ship them, but c10d's ProcessGroupGloo.hpp includes them); install Debian's libgloo-dev (scripts/setup does)"
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#if defined(POLICYTRAIN_WITH_CUDA) && defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define POLICYTRAIN_WITH_NCCL 1
#endif
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/detail/torch_compat.hpp>
#include <policytrain/io/digest.hpp>
#include <policytrain/memory/recompute_use.hpp>
#include <policytrain/parallel/environment.hpp>

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

namespace detail {

struct DataParallelState;

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The Reducer's communication hook: averages one bucket over the ranks (divide, then sum: Gloo has no AVG), in
/// the bucket's dtype or, with gradient compression, in fp16 / bf16 as DDP's fp16_compress_hook /
/// bf16_compress_hook; counts the launches and remembers a failed one for the error message.
class AverageHook : public c10d::CommHookInterface {
 public:
  explicit AverageHook(DataParallelState* s) : s_(s) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override {
    return c10d::detail::parseCppCommHookResult(result);
  }

 private:
  DataParallelState* s_;
};

/// The process group and PyTorch's c10d::Reducer, shared with the autograd hooks (so the policy may be moved).
struct DataParallelState {
  Environment env;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  c10::intrusive_ptr<c10d::ProcessGroup> pg;  ///< `backend` as the Reducer wants it
  torch::Device comm_device{torch::kCPU};  ///< where small control tensors go (NCCL reduces CUDA tensors only)
  std::vector<torch::Tensor> params;
  std::vector<std::string> names;         ///< the parameters' names in the module (for errors)
  std::vector<bool> sparse;               ///< per parameter: its gradient is sparse (an Embedding with sparse = true)
  std::vector<std::vector<int64_t>> strides;  ///< per parameter: its strides when the gradient sync was built
  std::optional<c10::ScalarType> wire_dtype;  ///< gradient compression: all-reduce in this dtype
  std::unique_ptr<c10d::Reducer> reducer;
  torch::Tensor pending_output;           ///< the forward's output, for find_unused_parameters' graph search
  bool synced = false;                    ///< this window's last backward ran through the Reducer
  bool static_first_pending = false;      ///< static graph: the first synchronised backward's all-reduce is not queued
  bool keep_local = false;                ///< static graph's first backward is not its window's last (see below)
  std::vector<torch::Tensor> local_grads; ///< keep_local: each parameter's local gradient before that all-reduce
  bool in_backward = false;
  int64_t step = 0;
  // Counters, exposed by DataParallel.
  std::atomic<int64_t> allreduce_calls{0}, allreduce_calls_in_hooks{0}, allreduce_calls_last_step{0};
  std::atomic<int64_t> bytes_last_step{0};
  std::atomic<int64_t> failed_bucket{-1};
  std::atomic<int64_t> last_launch_ns{0};
  double comm_wait_seconds = 0;

  ~DataParallelState() { release(); }

  /// Removes the autograd hooks of the gradient synchronisation (ours and the Reducer's) and forgets the
  /// parameters, so that it can be built again from the live ones.
  void release() {
    for (auto& p : params) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
    reducer.reset();  // removes the Reducer's hooks from the parameters
    params.clear();
    names.clear();
    sparse.clear();
    strides.clear();
    static_first_pending = false;
    synced = false;
  }

  std::string who() const { return policytrain::detail::format("rank {} of {}", env.rank, env.world_size); }

  std::vector<char> ready;  ///< gradient accumulated for the parameter in this synchronised backward
  std::mutex mu;

  /// The error for parameter `i`'s gradient accumulated twice in one synchronised backward, from `policy`, after
  /// `after` (what the first accumulation led to).
  [[noreturn]] void throw_ready_twice(size_t i, std::string_view policy, std::string_view after) const {
    throw std::runtime_error(policytrain::detail::format(
        "policytrain::parallel::{}: {}: parameter '{}' (index {}) was marked ready twice in one backward (its "
        "gradient was accumulated again after {}): the parameter takes part in a reentrant backward (a reentrant "
        "activation checkpoint, or a backward inside a custom autograd function) or in two backward passes of one "
        "micro-step; use non-reentrant checkpointing, or a single backward per micro-step", policy, who(), names[i],
        i, after));
  }

  void accumulated(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (ready[i]) throw_ready_twice(i, "DataParallel", "it was counted for its bucket");
    ready[i] = 1;
  }

  /// Static graph: backward reached the forward's output (a hook on it, see DataParallel::around_forward). In
  /// the first synchronised backward this queues the Reducer's delay_all_reduce, the all-reduce of everything
  /// once the backward has ended, as DDP's _DDPSink does: the callback belongs to the graph task that runs now,
  /// the backward the Trainer started, and so runs after every gradient exists. Queued from a gradient
  /// accumulated inside a reentrant backward (memory::recompute), it would run when that nested backward ends,
  /// before the gradients outside the segment exist, and all-reduce a part of them: the ranks would diverge.
  void output_reached(const std::weak_ptr<DataParallelState>& self) {
    std::lock_guard<std::mutex> lock(mu);
    if (!in_backward || !static_first_pending) return;
    static_first_pending = false;
    torch::autograd::Engine::get_default_engine().queue_callback([self] {
      if (auto s = self.lock()) {
        if (s->keep_local) s->save_local_grads();
        s->reducer->delay_all_reduce();
      }
    });
  }

  /// Static graph, a first window of several micro-steps: the Reducer must see the window's first backward (it
  /// learns the graph from its hooks, and counts those of any backward before its first synchronised one), so that
  /// backward is all-reduced although it is not the window's last. Its average would then be summed with the
  /// next micro-steps' local gradients: avg(g1) + g2 is the same sum as avg(g1 + g2) in exact arithmetic, not in
  /// floating point, and a run resumed into a fresh Reducer would differ from the uninterrupted one in the last bits
  /// (composition fuzzer seeds 947729, 947734). So the local gradients are kept before that all-reduce and put back
  /// after it (restore_local_grads): the window's last micro-step all-reduces the local sum, as every later window.
  void save_local_grads() {
    local_grads.clear();
    for (const auto& p : params) local_grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  }

  void restore_local_grads() {
    keep_local = false;
    if (local_grads.size() != params.size()) return;
    for (size_t i = 0; i < params.size(); ++i) {
      auto& g = params[i].mutable_grad();
      const auto& l = local_grads[i];
      if (l.defined() && g.defined() && !l.is_sparse() && !g.is_sparse() && g.strides() == l.strides()) g.copy_(l);
      else g = l;
    }
    local_grads.clear();
  }

  /// After a failed collective: every surviving rank checks in on the store; those that do not within a short
  /// grace period are named. Returns a sentence for the error message.
  std::string diagnose() {
    if (!store) return "";
    try {
      store->set(policytrain::detail::format("policytrain/failed/{}", env.rank), std::vector<uint8_t>{1});
      const auto grace = std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(3));
      const auto until = std::chrono::steady_clock::now() + grace;
      std::vector<int> missing;
      do {
        missing.clear();
        for (int r = 0; r < env.world_size; ++r)
          if (!store->check({policytrain::detail::format("policytrain/failed/{}", r)})) missing.push_back(r);
        if (missing.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      } while (std::chrono::steady_clock::now() < until);
      if (missing.empty()) return "every rank is alive and saw the failure too (a network error?)";
      return policytrain::detail::format("rank{} {} did not answer afterwards (dead or hung)", missing.size() > 1 ? "s" : "",
                         fmt::join(missing, ", "));
    } catch (const std::exception&) {
      return policytrain::detail::format("the store at MASTER_ADDR={} MASTER_PORT={} is gone too: {} (it lives in rank 0's "
                         "process unless torchrun's agent hosts it)", env.master_addr, env.master_port,
                         env.agent_store ? "the torchrun agent stopped" : "rank 0 is dead");
    }
  }

  /// The CollectiveError for a failed `what`.
  CollectiveError collective_error(const std::string& what, const std::exception& e) {
    const std::string cause = e.what();
    return CollectiveError(policytrain::detail::format(
        "policytrain::parallel::DataParallel: {}: {} failed or timed out (timeout {} ms): {}; {}", who(), what,
        timeout.count(), cause.substr(0, cause.find('\n')), diagnose()));
  }

  /// Waits for `w`; on failure rethrows as CollectiveError naming this rank, `what` and the silent ranks.
  void wait(const c10::intrusive_ptr<c10d::Work>& w, const std::string& what) {
    try {
      if (!w->wait(timeout))
        throw std::runtime_error("the collective was aborted");
    } catch (const std::exception& e) {
      throw collective_error(what, e);
    }
  }

  /// Runs `fn`, a collective of c10d's that waits by itself; on failure rethrows as CollectiveError.
  template <class F>
  void guarded(const std::string& what, F&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      throw collective_error(what, e);
    }
  }

  /// An empty sparse gradient of an embedding table `p` (indices over its first dimension, rows of the rest), as
  /// the sparse gradients of the ranks that used it are: Gloo's sparse all-reduce wants the same sparse and dense
  /// dimensions on every rank.
  static torch::Tensor zero_sparse_gradient(const torch::Tensor& p) {
    auto rows = p.sizes().vec();
    rows[0] = 0;
    return torch::sparse_coo_tensor(torch::empty({1, 0}, torch::TensorOptions(torch::kLong).device(p.device())),
                                    torch::empty(rows, p.options()), p.sizes());
  }

  /// A window ended without a synchronised backward (a loader of unknown length: its last micro-batch was not
  /// known to be the last until the loader ended): averages the gradients now, one all-reduce per parameter,
  /// with one "used on this rank" flag each so that a parameter no rank used keeps an undefined gradient.
  void average_late() {
    torch::NoGradGuard ng;
    const int ws = env.world_size;
    auto used = torch::zeros({static_cast<int64_t>(params.size())}, torch::TensorOptions(torch::kFloat).device(comm_device));
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].grad().defined()) used[static_cast<int64_t>(i)].fill_(1);
    std::vector<at::Tensor> ut{used};
    wait(backend->allreduce(ut, c10d::AllreduceOptions{}), "all-reduce of gradient use flags (late window)");
    auto used_cpu = used.to(torch::kCPU);
    const auto* u = used_cpu.data_ptr<float>();
    for (size_t i = 0; i < params.size(); ++i) {
      if (u[i] == 0) continue;
      auto& p = params[i];
      if (!p.grad().defined()) p.mutable_grad() = sparse[i] ? zero_sparse_gradient(p) : torch::zeros_like(p);
      std::vector<at::Tensor> g{p.mutable_grad()};
      g[0].mul_(1.0 / ws);
      wait(backend->allreduce(g, c10d::AllreduceOptions{}),
           policytrain::detail::format("all-reduce of gradient bucket (late window, parameter '{}', optimizer step {})", names[i], step));
      ++allreduce_calls;
    }
  }
};

inline c10::intrusive_ptr<c10::ivalue::Future> AverageHook::runHook(c10d::GradBucket& bucket) {
  auto& s = *s_;
  ++s.allreduce_calls;
  ++s.allreduce_calls_last_step;
  if (s.in_backward) ++s.allreduce_calls_in_hooks;
  s.last_launch_ns = now_ns();
  const int ws = s.pg->getSize();
  auto buffer = bucket.getBufferRef();
  const auto index = static_cast<int64_t>(bucket.getIndex());
  auto note_failure = [state = s_, index](c10::ivalue::Future& f) {
    if (f.hasError()) {
      int64_t none = -1;
      state->failed_bucket.compare_exchange_strong(none, index);
    }
  };
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  if (!s.wire_dtype) {
    // As the Reducer without a hook: multiply by 1/world size (it does so while copying into the bucket), sum.
    buffer.mul_(1.0 / ws);
    s.bytes_last_step += buffer.numel() * static_cast<int64_t>(buffer.element_size());
    std::vector<at::Tensor> ts{buffer};
    fut = s.pg->allreduce(ts)->getFuture();
  } else {
    // As fp16_compress_hook / bf16_compress_hook: cast, divide in the low precision, sum, cast back in place.
    auto compressed = buffer.to(*s.wire_dtype).div_(ws);
    s.bytes_last_step += compressed.numel() * static_cast<int64_t>(compressed.element_size());
    std::vector<at::Tensor> ts{compressed};
    auto reduced = s.pg->allreduce(ts)->getFuture();
    fut = reduced->then(
        [buffer](c10::ivalue::Future& f) {
          buffer.copy_(f.value().toTensorVector()[0]);
          return c10::IValue(buffer);
        },
        c10::TensorType::get());
  }
  fut->addCallback(note_failure);
  return fut;
}

/// Called when autograd has accumulated a parameter's gradient, in a synchronised backward: a second call for
/// one parameter is an error (c10d::Reducer does not notice a gradient accumulated twice when one of the two
/// happens in a reentrant backward, and then all-reduces the first half only: measured, see test_parallel).
struct GradAccumulated : torch::autograd::PostAccumulateGradHook {
  GradAccumulated(std::weak_ptr<DataParallelState> s, size_t i) : state(std::move(s)), index(i) {}
  void operator()(const torch::autograd::Variable&) override {
    if (auto s = state.lock(); s && s->in_backward) s->accumulated(index);
  }
  std::weak_ptr<DataParallelState> state;
  size_t index;
};

}  // namespace detail

/// Run-time options of parallel::DataParallel.
struct DataParallelOptions {
  bool enabled = true;                ///< false: train alone even when launched with WORLD_SIZE > 1
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  ///< start-up and every collective
  /// Gradient bytes per all-reduce (MiB), as DDP's bucket_cap_mb. As in DDP, the first backward all-reduces one
  /// bucket of everything (the order in which gradients become ready is not known yet), and the Reducer then
  /// rebuilds the buckets in that order.
  double bucket_mb = 25;
  /// The first bucket's cap (MiB) after the rebuild; unset: 1 MiB when bucket_mb is the default 25, else
  /// bucket_mb (DDP's rule).
  std::optional<double> first_bucket_mb{};
  std::string backend = "auto";       ///< auto (NCCL on CUDA, Gloo on CPU), gloo, nccl
  int gloo_threads = 2;               ///< Gloo's worker threads (collectives in flight at once)
  /// Broadcast rank 0's buffers (batch-norm statistics) before the first forward of every accumulation window
  /// and before every evaluation, as DDP's broadcast_buffers=True (DDP: before the forward that follows a
  /// synchronised one). false: every rank keeps its own buffers.
  bool broadcast_buffers = true;
  /// A parameter that no rank used in a step keeps an undefined gradient (the optimizer leaves it alone), as
  /// DDP's find_unused_parameters=True; false: such a parameter is an error naming it (DDP also stops).
  /// Without static_graph the used parameters are found by a search of the graph from the forward's output,
  /// which cannot see those a memory::recompute segment uses: that combination is refused (at fit begin for a
  /// memory::Recomputed module, after the first forward for a recompute() call), naming static_graph as the fix.
  bool find_unused_parameters = false;
  /// Gradient compression on the wire, as DDP's built-in communication hooks: "none", "fp16"
  /// (fp16_compress_hook) or "bf16" (bf16_compress_hook).
  std::string compression = "none";
  /// Gradients become views into the Reducer's buckets (DDP's gradient_as_bucket_view): one copy less per step
  /// and no second copy of the gradients in memory.
  bool gradient_as_bucket_view = false;
  /// The set of parameters that get gradients never changes (DDP's static_graph=True): the Reducer learns it in
  /// the first step (whose all-reduce waits for the end of that backward) and then skips the graph search of
  /// find_unused_parameters. Composes with memory::recompute, with find_unused_parameters or not.
  bool static_graph = false;
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
    if (o_.compression == "fp16") s_->wire_dtype = c10::ScalarType::Half;
    else if (o_.compression == "bf16") s_->wire_dtype = c10::ScalarType::BFloat16;
    else if (o_.compression != "none")
      throw std::invalid_argument(policytrain::detail::format("policytrain::parallel::DataParallel: compression '{}' is unknown; "
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
  size_t bucket_count() const { return s_->reducer ? s_->reducer->get_grad_buckets(true).size() : 0; }
  /// All-reduce calls so far.
  int64_t allreduce_calls() const { return s_->allreduce_calls; }
  /// All-reduce calls launched from autograd hooks, while backward still ran.
  int64_t allreduce_calls_in_hooks() const { return s_->allreduce_calls_in_hooks; }
  /// All-reduce calls of the last optimizer step.
  int64_t allreduce_calls_last_step() const { return s_->allreduce_calls_last_step; }
  /// Seconds spent waiting for all-reduces to finish.
  double comm_wait_seconds() const { return s_->comm_wait_seconds; }
  /// Bytes all-reduced in the last optimizer step: every bucket as it went on the wire (compressed or not).
  int64_t bucket_bytes() const { return s_->bytes_last_step; }
  /// PyTorch's c10d::Reducer that synchronises the gradients (null before on_fit_begin, or alone).
  c10d::Reducer* reducer() const { return s_->reducer.get(); }


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
      throw std::runtime_error(policytrain::detail::format(
          "policytrain::parallel::DataParallel: rank {} could not {} the store at MASTER_ADDR={} MASTER_PORT={} "
          "within {} ms: {}; {}", e.rank, so.isServer ? "open" : "reach", e.master_addr, e.master_port,
          o_.timeout.count(), cause.substr(0, cause.find('\n')),
          so.isServer ? "is the port in use? choose another MASTER_PORT"
                      : "is rank 0 running, and MASTER_ADDR reachable from this node?"));
    }
    // A torchrun agent's store outlives restarts: keys of each attempt live under their own prefix.
    s.store = e.agent_store
        ? c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::PrefixStore>(
              policytrain::detail::format("/worker/attempt_{}", e.restart_count), tcp))
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
        s.pg = c10::make_intrusive<c10d::ProcessGroup>(pg_store, e.rank, e.world_size);
        s.pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, s.backend);
        if (cuda) s.pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, s.backend);
        s.pg->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
      } else if (kind == "nccl") {
#ifdef POLICYTRAIN_WITH_NCCL
        auto no = c10d::ProcessGroupNCCL::Options::create();
        no->timeout = o_.timeout;
        s.backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(pg_store, e.rank, e.world_size, no);
        s.pg = c10::make_intrusive<c10d::ProcessGroup>(pg_store, e.rank, e.world_size);
        s.pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, s.backend);
        s.pg->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
        s.comm_device = device;
#else
        throw std::invalid_argument("backend 'nccl' needs a LibTorch built with CUDA and NCCL (USE_C10D_NCCL); use 'gloo'");
#endif
      } else {
        throw std::invalid_argument(policytrain::detail::format("backend '{}' is unknown; use auto, gloo or nccl", kind));
      }
    } catch (const std::exception& ex) {
      const std::string cause = ex.what();
      throw std::runtime_error(policytrain::detail::format(
          "policytrain::parallel::DataParallel: rank {} of {} could not form the {} process group (MASTER_ADDR={} "
          "MASTER_PORT={}, timeout {} ms): {}", e.rank, e.world_size, kind, e.master_addr, e.master_port,
          o_.timeout.count(), cause.substr(0, cause.find('\n'))));
    }
  }

  /// Broadcasts `tensors` from rank 0, in place.
  void broadcast(std::vector<torch::Tensor> tensors, const std::string& what) {
    if (!active()) return;
    require_connected(what);
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::vector<at::Tensor> ts{tensors[i]};
      s_->wait(s_->backend->broadcast(ts, c10d::BroadcastOptions{}),
               policytrain::detail::format("broadcast of {} ({} of {})", what, i + 1, tensors.size()));
    }
  }

  /// Reduces `t` over the ranks with `op`, in place; `what` names the collective in errors.
  void all_reduce(torch::Tensor& t, c10d::ReduceOp op, const std::string& what) {
    if (!active()) return;
    require_connected(what);
    std::vector<at::Tensor> ts{t.device() == s_->comm_device ? t : t.to(s_->comm_device)};
    c10d::AllreduceOptions ao;
    ao.reduceOp = op;
    s_->wait(s_->backend->allreduce(ts, ao), what);
    if (!ts[0].is_same(t)) t.copy_(ts[0]);
  }

  // --- hooks ---

  /// Connects, checks that every rank has the same parameters (c10d::verify_params_across_processes, as DDP),
  /// broadcasts rank 0's parameters and buffers (c10d::broadcast_coalesced), and builds the c10d::Reducer.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    verified_ = false;
    if (!active()) return;
    if (searches_unused())
      for (const auto& m : ctx.module().named_modules())
        if (dynamic_cast<const memory::RecomputedModule*>(m.value().get()))
          refuse_recompute(m.key().empty() ? std::string("the model is a memory::Recomputed module")
                                           : policytrain::detail::format("the model holds a memory::Recomputed module '{}'", m.key()));
    connect(ctx.device());
    // From the live parameters at every fit (DESIGN §7): a part unfrozen since the last fit takes part, and one
    // frozen since does not. on_epoch_begin looks again, after the other policies' on_fit_begin (a layout change).
    sync_parameters(ctx.module());
    if (!s_->params.empty())
      s_->guarded("check that every rank has the same parameters (count, shapes, dtypes)",
                  [&] { c10d::verify_params_across_processes(s_->pg, s_->params, std::nullopt); });
    broadcast_states(ctx.module());
  }

  /// At the first epoch of a fit, after every policy's on_fit_begin (a checkpoint policy has resumed by then):
  /// checks that every rank starts from the same state (verify_start).
  /// Before that, once per fit, rebuilds the gradient synchronisation if the parameters changed since on_fit_begin
  /// built it (a policy after this one converted the layout: callbacks::PerfKnobs' channels_last; sync_parameters).
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    if (!verified_) {
      if (active()) {
        sync_parameters(ctx.module());
        apply_loaded_buckets();
      }
      verify_start(ctx);
      restore_rank_rng(ctx.device());
    }
  }

  /// On every rank before a checkpoint is written (a collective): every rank's random generator states (the CPU
  /// one, and the CUDA one of this rank's device) for state_dict(). The checkpoint's own generator state is the
  /// writing rank's (rank 0's); a resume on the same world size gives each rank back its own (on_epoch_begin), so
  /// that the dropout masks and augmentations of every rank continue as in an uninterrupted run.
  template <class Ctx>
  void before_save(Ctx& ctx) {
    if (!active()) return;
    std::vector<torch::Tensor> mine{generator_state(torch::kCPU)};
    if (ctx.device().is_cuda()) mine.push_back(generator_state(ctx.device()));
    rng_cpu_bytes_ = mine[0].numel();
    auto flat = torch::cat(mine).to(torch::kInt);
    auto table = torch::zeros({world_size(), flat.numel()}, torch::kInt);
    table[rank()].copy_(flat);
    all_reduce(table, c10d::ReduceOp::SUM, "gather of the ranks' random generator states (checkpoint)");
    rank_rng_ = table;
    // A save right after the first synchronised step (a stop at step 1) comes before the Reducer's rebuild, which
    // waits for the next forward: rebuild now (the same collective, in the same state), so that the checkpoint has
    // the order the uninterrupted run goes on with; a resume that started from one bucket would sum 3 or more
    // ranks' gradients in another order (found by the Preemption harness: a stop at step 1 on 3 ranks).
    // (Not with sparse gradients: their buckets have no flat view until a backward fills them.)
    if (s_->reducer && ctx.module().is_training() &&
        std::find(s_->sparse.begin(), s_->sparse.end(), true) == s_->sparse.end())
      s_->guarded("rebuild of the gradient buckets (a broadcast of rank 0's bucket order)",
                  [&] { s_->reducer->rebuild_buckets(); });
    // Saved like rank_rng_ (from the first checkpoint on): the order a resume builds its Reducer with.
    if (auto order = rebuilt_bucket_order(); order.defined()) bucket_order_ = order;
  }

  /// A fit that had no epoch left to run still takes part in the start check (the other ranks may have).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    if (!verified_) verify_start(ctx);
  }

  /// In training: before the first forward of every accumulation window broadcasts rank 0's buffers (batch-norm
  /// statistics) when `broadcast_buffers` is set, as DDP does before the forward that follows a synchronised one;
  /// lets the Reducer rebuild its buckets once it has seen the order of a backward (a collective, on every rank
  /// at the same forward, as DDP's _pre_forward); keeps the output for find_unused_parameters' graph search.
  template <class Ctx, class F>
  decltype(auto) around_forward(Ctx& ctx, F&& fn) {
    if (!active() || !ctx.module().is_training() || !torch::GradMode::is_enabled()) return fn();
    if (o_.broadcast_buffers && ctx.state().micro_step == 1) sync_buffers(ctx.module());
    if (s_->reducer)
      s_->guarded("rebuild of the gradient buckets (a broadcast of rank 0's bucket order)",
                  [&] { s_->reducer->rebuild_buckets(); });
    const uint64_t segments = memory::recompute_segments();
    decltype(auto) out = fn();
    if (searches_unused() && memory::recompute_segments() != segments)
      refuse_recompute("the forward called memory::recompute");
    if constexpr (std::is_convertible_v<decltype(out), torch::Tensor>) {
      if (searches_unused()) s_->pending_output = out;
      // Static graph: the first synchronised backward queues its all-reduce when it reaches the output.
      if (s_->static_first_pending && torch::Tensor(out).requires_grad())
        torch::Tensor(out).register_hook([self = std::weak_ptr<detail::DataParallelState>(s_)](const torch::Tensor&) {
          if (auto s = self.lock()) s->output_reached(self);
        });
    }
    return out;
  }

  /// Broadcasts rank 0's buffers before an evaluation (when `broadcast_buffers` is set), so that every rank
  /// evaluates the same model.
  /// An evaluation before the first fit joins the job first (connect) and broadcasts rank 0's parameters and
  /// buffers, as fit begin does (and as DDP's constructor does): every rank evaluates rank 0's model.
  template <class Ctx, class F>
  Metrics around_evaluate(Ctx& ctx, F&& evaluate) {
    if (active() && !states_broadcast_) {
      connect(ctx.device());
      broadcast_states(ctx.module());
    } else if (active() && o_.broadcast_buffers) {
      sync_buffers(ctx.module());
    }
    return evaluate();
  }

  /// Runs `fn` (the backward). On a window's last micro-step the Reducer expects its hooks
  /// (prepare_for_forward, prepare_for_backward) and all-reduces each bucket as soon as its gradients are ready,
  /// during the backward; at the backward's end it waits and writes the averages into the gradients. Other
  /// micro-steps only accumulate (DDP's no_sync).
  template <class Ctx, class F>
  void around_backward(Ctx& ctx, F&& fn) {
    auto& s = *s_;
    // Static graph: the first micro-step of the first window is synchronised. The Reducer learns the graph from
    // the autograd hooks of its first backward, and counts those of a no-sync backward too (it starts a backward
    // count that only the end of a synchronised one resets), after which no bucket is ever ready and the ranks
    // diverge (DDP stops on an internal assert there). That all-reduce's result is dropped: the local gradients are
    // put back (DataParallelState::restore_local_grads), so the window's sum is the same, bit for bit, as any
    // other window's; the cost is one extra all-reduce, in the first window only.
    if (!active() || !s.reducer || !(ctx.is_last_micro_step() || s.static_first_pending)) {
      s.pending_output = torch::Tensor();
      fn();
      return;
    }
    std::vector<at::Tensor> outputs;
    if (s.pending_output.defined()) outputs.push_back(std::exchange(s.pending_output, torch::Tensor()));
    s.allreduce_calls_last_step = 0;
    s.bytes_last_step = 0;
    s.failed_bucket = -1;
    s.last_launch_ns = 0;
    std::fill(s.ready.begin(), s.ready.end(), 0);
    s.reducer->prepare_for_forward();
    s.reducer->prepare_for_backward(outputs);
    outputs.clear();
    s.in_backward = true;
    s.keep_local = s.static_first_pending && !ctx.is_last_micro_step();
    try {
      fn();
    } catch (const std::exception& e) {
      s.in_backward = false;
      s.keep_local = false;
      rethrow_backward_error(e);
    }
    s.in_backward = false;
    if (s.keep_local) s.restore_local_grads();
    else s.synced = true;
    if (s.static_first_pending)
      throw std::logic_error(policytrain::detail::format(
          "policytrain::parallel::DataParallel: {}: static_graph: the first synchronised backward did not reach the "
          "output of the forward, so the Reducer's delayed all-reduce was never queued; the loss must be computed "
          "from the training step's forward", s.who()));
    // The wait the backward could not hide: from the last bucket's launch (its gradients were the last computed)
    // to the backward's end, after the Reducer waited for every bucket and wrote the averages back.
    const int64_t launched = s.last_launch_ns;
    if (launched > 0)
      s.comm_wait_seconds += std::max<double>(0.0, 1e-9 * static_cast<double>(detail::now_ns() - launched));
  }

  /// Checks that the Reducer finished this window's reduction (every parameter got a gradient, or
  /// find_unused_parameters), or averages a window that had no synchronised backward.
  template <class Ctx>
  void before_step(Ctx&) {
    if (!active() || !s_->reducer) return;
    auto& s = *s_;
    if (!std::exchange(s.synced, false)) {
      s.average_late();
    } else {
      try {
        s.reducer->check_finalized();
      } catch (const std::exception& e) {
        std::vector<std::string> ns;
        for (size_t i = 0; i < s.params.size(); ++i)
          if (!s.params[i].grad().defined()) ns.push_back(policytrain::detail::format("'{}' (index {})", s.names[i], i));
        const std::string cause = e.what();
        throw std::runtime_error(policytrain::detail::format(
            "policytrain::parallel::DataParallel: {}: this rank computed no gradient for parameter{} {} in "
            "optimizer step {}, so the Reducer could not finish the all-reduce (DDP stops here too); set "
            "DataParallelOptions::find_unused_parameters = true to leave such parameters untouched, or freeze them "
            "(requires_grad false). c10d: {}", s.who(), ns.size() == 1 ? "" : "s", fmt::join(ns, ", "), s.step,
            cause.substr(0, cause.find('\n'))));
      }
    }
    ++s.step;
  }

  /// The world size, saved in checkpoints so that a resume with another one is recognised.
  /// With the ranks' generator states when a checkpoint gathered them (before_save).
  StateDict state_dict() const {
    StateDict d{{"world_size", scalar_tensor(static_cast<int64_t>(world_size()))}};
    if (rank_rng_.defined()) {
      d["rank_rng"] = rank_rng_;
      d["rank_rng_cpu_bytes"] = scalar_tensor(rng_cpu_bytes_);
    }
    if (bucket_order_.defined()) d["bucket_order"] = bucket_order_;
    return d;
  }
  /// Restores what state_dict() saved (the world size of the run that wrote the checkpoint, the ranks' generator
  /// states, which on_epoch_begin hands back to each rank).
  void load_state_dict(const StateDict& d) {
    saved_world_size_ = state_int(d, "world_size");
    loaded_rng_ = d.count("rank_rng") ? d.at("rank_rng") : torch::Tensor();
    loaded_rng_cpu_bytes_ = d.count("rank_rng_cpu_bytes") ? state_int(d, "rank_rng_cpu_bytes") : 0;
    loaded_buckets_ = d.count("bucket_order") ? d.at("bucket_order") : torch::Tensor();
  }

  /// Buffer broadcasts so far (broadcast_buffers).
  int64_t buffer_broadcasts() const { return buffer_broadcasts_; }

  /// Whether this is rank 0 (the Trainer's is_main hook).
  bool is_main() { return s_->env.rank == 0; }

  /// True on every rank when `b` is true on any rank.
  template <class Ctx>
  bool agree_any(Ctx& ctx, bool b) {
    if (!active()) return b;
    connect(ctx.device());
    auto t = torch::tensor({b ? 1 : 0}, torch::kInt);
    all_reduce(t, c10d::ReduceOp::SUM, "agreement on a stop / save / rollback decision");
    return t.item<int>() > 0;
  }

  /// The smallest `v` over the ranks (identity on one process; a collective). fit_auto_batch agrees on the
  /// micro-batch with it.
  int64_t agree_min(int64_t v) {
    if (!active()) return v;
    auto t = torch::tensor({v}, torch::kLong);
    all_reduce(t, c10d::ReduceOp::MIN, "agreement on the micro-batch (auto batch size)");
    return t.item<int64_t>();
  }

  /// Sums the loss, sample count, confusion matrix and the task's own metrics (Prediction::metrics) of an
  /// evaluation over the ranks. Every rank must report the same metric names (std::runtime_error otherwise).
  template <class Ctx>
  void reduce_metrics(Ctx& ctx, MetricsAccumulator& acc) {
    if (!active()) return;
    connect(ctx.device());
    auto sums = acc.sums();
    // A rank without a classification batch has no confusion matrix: take the largest class count.
    const int64_t ne = static_cast<int64_t>(sums.extra.size());
    auto kt = torch::tensor({sums.confusion.defined() ? sums.confusion.size(0) : int64_t{0}, ne, -ne}, torch::kLong);
    all_reduce(kt, c10d::ReduceOp::MAX, "reduction of validation metrics (class count)");
    const int64_t k = kt[0].item<int64_t>();
    if (kt[1].item<int64_t>() != -kt[2].item<int64_t>())
      throw std::runtime_error(policytrain::detail::format(
          "policytrain::parallel::DataParallel: {}: the ranks' validations report different numbers of the task's "
          "metrics (this rank {}, between {} and {} over the ranks); every rank must evaluate at least one batch and "
          "report the same Prediction::metrics", s_->who(), ne, -kt[2].item<int64_t>(), kt[1].item<int64_t>()));
    auto packed = torch::zeros({2 + 2 * ne + k * k}, torch::kDouble);
    packed[0] = sums.loss_sum;
    packed[1] = static_cast<double>(sums.samples);
    int64_t i = 2;
    for (const auto& [name, sc] : sums.extra) {  // by name: a std::map's order, the same on every rank
      packed[i] = sc.first;
      packed[i + ne] = static_cast<double>(sc.second);
      ++i;
    }
    if (sums.confusion.defined() && sums.confusion.size(0) == k)
      packed.slice(0, 2 + 2 * ne).copy_(sums.confusion.reshape({-1}).to(torch::kDouble));
    all_reduce(packed, c10d::ReduceOp::SUM, "reduction of validation metrics");
    sums.loss_sum = packed[0].item<double>();
    sums.samples = static_cast<int64_t>(std::llround(packed[1].item<double>()));
    i = 2;
    for (auto& [name, sc] : sums.extra) {
      sc.first = packed[i].item<double>();
      sc.second = static_cast<int64_t>(std::llround(packed[i + ne].item<double>()));
      ++i;
    }
    if (k > 0) sums.confusion = packed.slice(0, 2 + 2 * ne).round().to(torch::kLong).view({k, k});
    acc.set_sums(std::move(sums));
  }

  /// Reduces the states of the task's epoch-level metrics (MetricState::reduce: sum, max, min, or concatenation in
  /// rank order) over the ranks, with policytrain::reduce_metric_states. Every rank declares the same metrics.
  template <class Ctx>
  void reduce_metric_states(Ctx&, const std::vector<MetricState*>& states) {
    if (!active()) return;
    policytrain::reduce_metric_states(states, s_->pg->getRank(), s_->pg->getSize(), [&](torch::Tensor& t, Reduce op) {
      all_reduce(t, op == Reduce::max ? c10d::ReduceOp::MAX : op == Reduce::min ? c10d::ReduceOp::MIN : c10d::ReduceOp::SUM,
                 "reduction of the task's epoch-level metrics");
    });
  }

 protected:
  /// find_unused_parameters' graph search from the forward's output runs each step (no static graph).
  bool searches_unused() const { return o_.find_unused_parameters && !o_.static_graph; }

  /// The graph search cannot see the parameters a recomputed segment uses (their gradients come from a nested
  /// backward): c10d's Reducer would count them unused, then ready again ("Expected to mark a variable ready
  /// only once"), as PyTorch's DDP does with reentrant checkpointing.
  [[noreturn]] void refuse_recompute(const std::string& where) const {
    throw std::invalid_argument(policytrain::detail::format(
        "policytrain::parallel::DataParallel: {}: find_unused_parameters = true (without static_graph) cannot "
        "compose with memory::recompute, and {}: the search for unused parameters follows the graph from the "
        "forward's output and cannot see the parameters a recomputed segment uses (their gradients come from a "
        "nested backward), so the Reducer would count them unused and then ready again (PyTorch's DDP fails the "
        "same way with reentrant checkpointing; its non-reentrant checkpoint needs saved-tensor hooks that "
        "LibTorch offers to Python only). Set static_graph = true in DataParallelOptions (the used parameters "
        "are then learnt in the first step, without a search; the same parameters must get gradients every "
        "step), or find_unused_parameters = false if every parameter gets a gradient every step, or do not "
        "recompute", s_->who(), where));
  }

  /// Broadcasts `tensors` from rank 0 in buckets of up to 250 MiB, as DDP's _sync_module_states and
  /// _sync_buffers (c10d::broadcast_coalesced).
  void broadcast_from_0(const std::vector<torch::Tensor>& tensors, const std::string& what) {
    if (tensors.empty()) return;
    s_->guarded(what, [&] { c10d::broadcast_coalesced(s_->pg, tensors, size_t{250} * 1024 * 1024, 0); });
  }

  /// Broadcasts rank 0's buffers (BatchNorm statistics) to every rank, as DDP's buffer synchronisation.
  void sync_buffers(torch::nn::Module& m) {
    std::vector<torch::Tensor> bufs;
    for (auto& b : m.buffers()) bufs.push_back(b.detach());
    if (bufs.empty()) return;
    torch::NoGradGuard ng;
    broadcast_from_0(bufs, "broadcast of rank 0's buffers");
    ++buffer_broadcasts_;
  }

  /// A collective before connect(): a named error instead of a null process group.
  void require_connected(const std::string& what) const {
    if (!s_->backend)
      throw std::logic_error(policytrain::detail::format(
          "policytrain::parallel::DataParallel: {}: {} before this rank joined the job; call connect() first (fit "
          "and evaluate join by themselves)", s_->who(), what));
  }

  /// Broadcasts rank 0's parameters and buffers to every rank (c10d::broadcast_coalesced, as DDP's
  /// _sync_module_states).
  void broadcast_states(torch::nn::Module& m) {
    torch::NoGradGuard ng;
    std::vector<torch::Tensor> state;
    for (auto& p : unique_parameters(m)) state.push_back(p.detach());
    for (auto& [name, b] : unique_named_buffers(m)) state.push_back(b.detach());
    broadcast_from_0(state, "broadcast of rank 0's parameters and buffers");
    states_broadcast_ = true;
  }

  /// The trainable parameters as they are now (each tensor once: a tied weight has one gradient, one hook and
  /// one slot in a bucket), their names, and whether each gets sparse gradients (the weight of an Embedding or
  /// EmbeddingBag with sparse = true, as DDP's expect_sparse_gradient).
  struct Trainable {
    std::vector<torch::Tensor> params;  ///< the trainable parameters, each tensor once
    std::vector<std::string> names;     ///< their names, in the same order
    std::vector<bool> sparse;           ///< whether each gets sparse gradients
  };
  /// The trainable parameters of `m` as they are now (see Trainable).
  static Trainable trainable(torch::nn::Module& m) {
    std::unordered_set<const void*> sparse_tables;
    for (const auto& item : m.named_modules()) {
      auto* mod = item.value().get();
      if (auto* e = dynamic_cast<torch::nn::EmbeddingImpl*>(mod); e && e->options.sparse())
        sparse_tables.insert(e->weight.unsafeGetTensorImpl());
      if (auto* b = dynamic_cast<torch::nn::EmbeddingBagImpl*>(mod); b && b->options.sparse())
        sparse_tables.insert(b->weight.unsafeGetTensorImpl());
    }
    Trainable t;
    for (auto& [name, p] : unique_named_parameters(m))
      if (p.requires_grad()) {
        t.sparse.push_back(sparse_tables.count(p.unsafeGetTensorImpl()) > 0);
        t.params.push_back(p);
        t.names.push_back(name);
      }
    return t;
  }

  /// Builds the gradient synchronisation (c10d::Reducer, or a derived policy's) from the live trainable
  /// parameters, or rebuilds it when they changed since it was built (DESIGN §7: state that a later fit can
  /// change is re-read): the set of trainable tensors (a part frozen or unfrozen between two fits) and their
  /// strides (the Reducer's bucket views copy each gradient with its parameter's layout at construction, so a
  /// layout converted afterwards, as callbacks::PerfKnobs' channels_last does at fit begin, would scramble the
  /// averaged gradients). Local, no collective: every rank changes its model alike. Returns whether it (re)built.
  bool sync_parameters(torch::nn::Module& m) {
    auto t = trainable(m);
    auto& s = *s_;
    bool same = t.params.size() == s.params.size();
    for (size_t i = 0; same && i < t.params.size(); ++i)
      same = t.params[i].unsafeGetTensorImpl() == s.params[i].unsafeGetTensorImpl() &&
             t.params[i].strides().vec() == s.strides[i];
    if (same) return false;
    s.release();
    s.params = std::move(t.params);
    s.names = std::move(t.names);
    s.sparse = std::move(t.sparse);
    for (size_t i = 0; i < s.params.size(); ++i) {
      s.strides.push_back(s.params[i].strides().vec());
      if (s.sparse[i] && s.wire_dtype)
        throw std::invalid_argument(policytrain::detail::format(
            "policytrain::parallel::DataParallel: parameter '{}' gets sparse gradients (an embedding with sparse = "
            "true), which gradient compression ('{}') cannot cast; set compression = \"none\", or sparse = false",
            s.names[i], o_.compression));
    }
    if (use_reducer_ && !s.params.empty()) build_reducer();
    ++sync_generation_;
    return true;
  }

  /// The Reducer's bucket order once it has rebuilt its buckets after the first backward ([2, n]: each parameter's
  /// index and its bucket, in the order the buckets hold them), for checkpoints (before_save, state_dict);
  /// undefined before the rebuild.
  /// Why: on 3 or more ranks Gloo's ring all-reduce adds a bucket element's terms in an order that depends on the
  /// element's place in the bucket, so a resumed run whose first step used the initial buckets (one bucket in
  /// parameter order) would differ from the uninterrupted one in the last bits. A resume builds its Reducer with
  /// the saved order (apply_loaded_buckets), and the rebuild after its first backward gives that order again.
  torch::Tensor rebuilt_bucket_order() const {
    if (!s_ || !s_->reducer || s_->reducer->should_rebuild_buckets()) return {};
    if (o_.find_unused_parameters && !o_.static_graph) return {};  // never rebuilt: the initial order stands
    std::unordered_map<const c10::TensorImpl*, int64_t> index;
    for (size_t i = 0; i < s_->params.size(); ++i) index[s_->params[i].unsafeGetTensorImpl()] = static_cast<int64_t>(i);
    std::vector<int64_t> param, bucket;
    int64_t b = 0;
    for (const auto& gb : s_->reducer->get_grad_buckets(/*return_zero_tensors=*/true)) {
      for (const auto& p : gb.getParameters()) {
        auto it = index.find(p.unsafeGetTensorImpl());
        if (it == index.end()) return {};
        param.push_back(it->second);
        bucket.push_back(b);
      }
      ++b;
    }
    if (param.size() != s_->params.size()) return {};
    return torch::stack({torch::tensor(param, torch::kLong), torch::tensor(bucket, torch::kLong)});
  }

  /// At a resume's first epoch: rebuilds the Reducer with the bucket order the checkpoint saved, when it is a
  /// complete order of this run's parameters (same world size and parameters; otherwise the initial order, as a
  /// fresh start, since a run on another world size is not bit-identical to the saved one anyway).
  void apply_loaded_buckets() {
    torch::Tensor order = std::exchange(loaded_buckets_, torch::Tensor());
    if (!order.defined() || !use_reducer_ || !s_->reducer || saved_world_size_ != world_size()) return;
    const auto n = static_cast<int64_t>(s_->params.size());
    if (order.dim() != 2 || order.size(0) != 2 || order.size(1) != n) return;
    auto param = order[0].contiguous(), bucket = order[1].contiguous();
    const int64_t* pi = param.data_ptr<int64_t>();
    const int64_t* bi = bucket.data_ptr<int64_t>();
    std::vector<bool> seen(static_cast<size_t>(n), false);
    std::vector<std::vector<size_t>> indices;
    for (int64_t k = 0; k < n; ++k) {
      if (pi[k] < 0 || pi[k] >= n || seen[static_cast<size_t>(pi[k])] || bi[k] < 0) return;
      seen[static_cast<size_t>(pi[k])] = true;
      if (bi[k] >= static_cast<int64_t>(indices.size())) indices.resize(static_cast<size_t>(bi[k]) + 1);
      indices[static_cast<size_t>(bi[k])].push_back(static_cast<size_t>(pi[k]));
    }
    for (const auto& b : indices)
      if (b.empty()) return;
    for (auto& p : s_->params) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
    s_->reducer.reset();  // removes the Reducer's hooks; build_reducer sets both again, with the saved order
    build_reducer(std::move(indices));
  }

  /// DDP's _ddp_init_helper: the first bucket assignment (one bucket of everything unless
  /// find_unused_parameters without a static graph), the Reducer, its communication hook, static graph.
  void build_reducer(std::optional<std::vector<std::vector<size_t>>> given = std::nullopt) {
    auto& s = *s_;
    const auto mib = [](double mb) { return static_cast<int64_t>(mb * 1024 * 1024); };
    const int64_t cap = mib(o_.bucket_mb);
    const int64_t first = o_.first_bucket_mb ? mib(*o_.first_bucket_mb) : o_.bucket_mb == 25 ? mib(1) : cap;
    std::vector<size_t> limits;
    if (o_.static_graph || !o_.find_unused_parameters) limits = {std::numeric_limits<size_t>::max()};
    else if (first < cap) limits = {static_cast<size_t>(first), static_cast<size_t>(cap)};
    else limits = {static_cast<size_t>(cap)};
    const std::vector<bool>& sparse = s.sparse;  // each sparse gradient in a bucket of its own, as DDP's
    auto [indices, per_bucket] = c10d::compute_bucket_assignment_by_size(s.params, limits, sparse);
    std::reverse(indices.begin(), indices.end());  // as DDP: roughly the order backward produces gradients
    if (given) indices = std::move(*given);        // a resumed run's saved order (apply_loaded_buckets)
    std::unordered_map<size_t, std::string> names;
    for (size_t i = 0; i < s.names.size(); ++i) names[i] = s.names[i];
    s.guarded("construction of c10d::Reducer", [&] {
      s.reducer = policytrain::detail::make_reducer<c10d::Reducer>(
          s.params, std::move(indices), s.pg, sparse, cap, o_.find_unused_parameters, o_.gradient_as_bucket_view,
          std::move(names), first, /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false);
    });
    s.reducer->register_comm_hook(std::make_unique<detail::AverageHook>(s_.get()));
    if (o_.static_graph) {
      s.reducer->set_static_graph();
      s.static_first_pending = true;  // around_forward's hook on the output queues delay_all_reduce
    }
    s.ready.assign(s.params.size(), 0);
    for (size_t i = 0; i < s.params.size(); ++i)
      torch::autograd::impl::set_post_acc_grad_hooks(s.params[i], std::make_unique<detail::GradAccumulated>(s_, i));
  }

  /// A failed backward of a synchronised micro-step: a failed all-reduce becomes a CollectiveError naming the
  /// bucket and the silent ranks; the Reducer's "marked ready twice" names the parameter.
  [[noreturn]] void rethrow_backward_error(const std::exception& e) {
    auto& s = *s_;
    const std::string cause = e.what();
    if (cause.rfind("policytrain::", 0) == 0) throw;  // ours (marked ready twice)
    // A bucket's all-reduce failed if its future says so (its callback may run just after the Reducer's wait
    // returned the error), or if the error is a transport's.
    bool comm = false;
    if (s.allreduce_calls_last_step > 0) {
      for (int i = 0; i < 20 && s.failed_bucket < 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      comm = s.failed_bucket >= 0;
      for (const char* w : {"Gloo", "gloo", "NCCL", "imeout", "imed out", "closure", "onnection", "peer"})
        comm = comm || cause.find(w) != std::string::npos;
    }
    if (comm)
      throw s.collective_error(policytrain::detail::format("all-reduce of gradient bucket {} (optimizer step {})",
                                           s.failed_bucket >= 0 ? std::to_string(s.failed_bucket + 1) : "?", s.step),
                               e);
    throw;
  }

  /// The state of the default generator of `device` (CPU, or a CUDA device).
  static torch::Tensor generator_state(torch::Device device) {
    auto gen = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.get_state();
  }

  /// After a resume on the world size that wrote the checkpoint: this rank's own generator states (see
  /// before_save). A checkpoint of another world size, or of an older version, leaves rank 0's (the file's).
  void restore_rank_rng(torch::Device device) {
    auto t = std::exchange(loaded_rng_, torch::Tensor());
    if (!active() || !t.defined() || t.dim() != 2 || t.size(0) != world_size()) return;
    auto row = t[rank()].to(torch::kUInt8);
    const int64_t ncpu = loaded_rng_cpu_bytes_;
    auto set = [](torch::Device d, const torch::Tensor& st) {
      auto gen = at::globalContext().defaultGenerator(d);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(st);
    };
    if (ncpu <= 0 || ncpu > row.numel()) return;
    set(torch::kCPU, row.slice(0, 0, ncpu).contiguous());
    if (device.is_cuda() && row.numel() > ncpu) set(device, row.slice(0, ncpu).contiguous());
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
        rows.push_back(policytrain::detail::format("rank {}: epoch {}, step {}, micro-batch {} of the epoch, weights {:015x}", r,
                                   t[r][0], t[r][1], t[r][2], t[r][5]));
      throw ResumeMismatch(policytrain::detail::format(
          "policytrain::parallel::DataParallel: {}: the ranks would start training from different states ({}); "
          "each rank resumed on its own (rank-local run directories?): give every rank the same checkpoint (a "
          "run directory all ranks read, or a copy of rank 0's file), or start all of them fresh",
          s_->who(), fmt::join(rows, "; ")));
    }
    const int64_t saved = t[0][4];
    if (saved > 0 && saved != w && st.batch_in_epoch > 0)
      throw ResumeMismatch(policytrain::detail::format(
          "policytrain::parallel::DataParallel: {}: the checkpoint was written mid-epoch (micro-batch {} of epoch "
          "{}) by a run of world size {}, but this run has world size {}: the rest of that epoch cannot be "
          "re-sharded; resume with WORLD_SIZE={}, or from a checkpoint taken at an epoch end (those re-shard)",
          s_->who(), st.batch_in_epoch, st.epoch, saved, w, saved));
  }

  Options o_;                                     ///< the settings
  std::shared_ptr<detail::DataParallelState> s_;  ///< the process group, the Reducer and the counters
  bool verified_ = false;                         ///< parameters checked across ranks
  int64_t sync_generation_ = 0;    ///< parameter lists sync_parameters has built
  bool states_broadcast_ = false;  ///< rank 0's parameters and buffers broadcast (fit begin, or an evaluation before)
  bool use_reducer_ = true;  ///< false: a derived policy synchronises the gradients itself (ZeRO-2)
  int64_t saved_world_size_ = 0;   ///< world size of the run whose checkpoint was loaded (0: none loaded)
  torch::Tensor rank_rng_;         ///< [world size, bytes]: every rank's generator states at the last checkpoint
  int64_t rng_cpu_bytes_ = 0;      ///< of which the CPU generator's
  torch::Tensor loaded_rng_;       ///< rank_rng_ of the checkpoint loaded, until on_epoch_begin applies it
  torch::Tensor loaded_buckets_;   ///< bucket_order of the checkpoint loaded, until on_epoch_begin applies it
  torch::Tensor bucket_order_;     ///< the Reducer's rebuilt bucket order at the latest checkpoint (before_save)
  int64_t loaded_rng_cpu_bytes_ = 0;  ///< of which the CPU generator's
  int64_t buffer_broadcasts_ = 0;  ///< broadcasts of rank 0's buffers so far
};

}  // namespace policytrain::parallel
