#pragma once
/// \file
/// detail::ReducerSync — the gradient synchronisation of parallel::DataParallel (and of ShardedDataParallel at
/// stages 0 and 1): PyTorch's own c10d::Reducer, the engine under Python's DistributedDataParallel, driven as DDP
/// drives it. The same bucket assignment (c10d::compute_bucket_assignment_by_size, one bucket in the first step,
/// then rebuilt in the order the gradients became ready), prepare_for_forward / prepare_for_backward on a
/// window's last micro-step only (DDP's no_sync on the others), each bucket all-reduced from the autograd hooks as
/// soon as its gradients are ready, the averages written back at the backward's end. The communication hook
/// (AverageHook) averages (divide, then sum: Gloo has no AVG), in fp16 / bf16 with gradient compression, and
/// counts the all-reduces. A piece that knows no Trainer: it is told whether a micro-step ends its window.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/detail/torch_compat.hpp>
#include <policytrain/parallel/bucket_order.hpp>
#include <policytrain/parallel/options.hpp>
#include <policytrain/parallel/process_group.hpp>
#include <policytrain/parallel/replica.hpp>

namespace policytrain::parallel::detail {

struct ReducerSync;

/// The Reducer's communication hook: averages one bucket over the ranks (divide, then sum: Gloo has no AVG), in
/// the bucket's dtype or, with gradient compression, in fp16 / bf16 as DDP's fp16_compress_hook /
/// bf16_compress_hook; counts the launches and remembers a failed one for the error message.
class AverageHook : public c10d::CommHookInterface {
 public:
  explicit AverageHook(ReducerSync* s) : s_(s) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override;
  at::Tensor parseHookResult(const c10::IValue& result) override {
    return c10d::detail::parseCppCommHookResult(result);
  }

 private:
  ReducerSync* s_;
};

/// The Reducer and its state, shared with the autograd hooks (so the policy may be moved).
struct ReducerSync : std::enable_shared_from_this<ReducerSync> {
  ReducerSync(std::shared_ptr<Replica> r, const DataParallelOptions& o)
      : rep(std::move(r)), opt(o), wire_dtype(wire_dtype_of(o.compression)) {}

  /// The dtype gradient compression all-reduces in (none: the gradients' own). Throws std::invalid_argument for
  /// an unknown compression.
  static std::optional<c10::ScalarType> wire_dtype_of(const std::string& compression) {
    if (compression == "fp16") return c10::ScalarType::Half;
    if (compression == "bf16") return c10::ScalarType::BFloat16;
    if (compression != "none")
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::parallel::DataParallel", policytrain::detail::format("compression '{}' is unknown; "
                                                                             "use none, fp16 or bf16",
                                                                             compression)));
    return std::nullopt;
  }
  ~ReducerSync() { reducer.reset(); }

  std::shared_ptr<Replica> rep;
  DataParallelOptions opt;
  std::optional<c10::ScalarType> wire_dtype;  ///< gradient compression: all-reduce in this dtype
  std::unique_ptr<c10d::Reducer> reducer;
  torch::Tensor pending_output;           ///< the forward's output, for find_unused_parameters' graph search
  bool static_first_pending = false;      ///< static graph: the first synchronised backward's all-reduce is not queued
  bool keep_local = false;                ///< static graph's first backward is not its window's last (see below)
  std::vector<torch::Tensor> local_grads; ///< keep_local: each parameter's local gradient before that all-reduce
  bool in_backward = false;
  std::atomic<int64_t> failed_bucket{-1};
  std::vector<char> ready;  ///< gradient accumulated for the parameter in this synchronised backward
  std::vector<size_t> ready_order;  ///< the parameters in the order their gradients came, in that backward
  int64_t synced_backwards = 0;     ///< synchronised backwards of this Reducer
  bool built_with_order = false;    ///< built with a given bucket order (apply_order, learn_static_order)
  bool learn_order = false;         ///< resumed after a static graph's first backward (learn_static_order)
  std::mutex mu;

  /// find_unused_parameters' graph search from the forward's output runs each step (no static graph).
  bool searches_unused() const { return opt.find_unused_parameters && !opt.static_graph; }
  /// Gradient buckets (0 before build).
  size_t bucket_count() const { return reducer ? reducer->get_grad_buckets(true).size() : 0; }

  /// Drops the Reducer (its hooks on the parameters go with it); the parameter list is the Replica's to release.
  void reset() {
    reducer.reset();
    static_first_pending = false;
  }

  void accumulated(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (ready[i]) rep->throw_ready_twice(i, "DataParallel", "it was counted for its bucket");
    ready[i] = 1;
    ready_order.push_back(i);
  }

  /// Static graph: backward reached the forward's output (a hook on it, see forward_output). In the first
  /// synchronised backward this queues the Reducer's delay_all_reduce, the all-reduce of everything once the
  /// backward has ended, as DDP's _DDPSink does: the callback belongs to the graph task that runs now, the
  /// backward the Trainer started, and so runs after every gradient exists. Queued from a gradient accumulated
  /// inside a reentrant backward (memory::recompute), it would run when that nested backward ends, before the
  /// gradients outside the segment exist, and all-reduce a part of them: the ranks would diverge.
  void output_reached(const std::weak_ptr<ReducerSync>& self) {
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

  /// The forward's output `out` in training: kept for find_unused_parameters' graph search, and under a static
  /// graph hooked so that the first synchronised backward queues its all-reduce when it reaches it.
  void forward_output(const torch::Tensor& out) {
    if (searches_unused()) pending_output = out;
    if (static_first_pending && out.requires_grad())
      torch::Tensor(out).register_hook([self = weak_from_this()](const torch::Tensor&) {
        if (auto s = self.lock()) s->output_reached(self);
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
    for (const auto& p : rep->params) local_grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  }

  void restore_local_grads() {
    keep_local = false;
    auto& params = rep->params;
    if (local_grads.size() != params.size()) return;
    for (size_t i = 0; i < params.size(); ++i) {
      auto& g = params[i].mutable_grad();
      const auto& l = local_grads[i];
      if (l.defined() && g.defined() && !l.is_sparse() && !g.is_sparse() && g.strides() == l.strides()) g.copy_(l);
      else g = l;
    }
    local_grads.clear();
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
    auto& g0 = *rep->group;
    auto& params = rep->params;
    const int ws = g0.world_size();
    auto used = torch::zeros({static_cast<int64_t>(params.size())}, torch::TensorOptions(torch::kFloat).device(g0.comm_device()));
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].grad().defined()) used[static_cast<int64_t>(i)].fill_(1);
    std::vector<at::Tensor> ut{used};
    g0.wait(g0.backend()->allreduce(ut, c10d::AllreduceOptions{}), "all-reduce of gradient use flags (late window)");
    auto used_cpu = used.to(torch::kCPU);
    const auto* u = used_cpu.data_ptr<float>();
    for (size_t i = 0; i < params.size(); ++i) {
      if (u[i] == 0) continue;
      auto& p = params[i];
      if (!p.grad().defined()) p.mutable_grad() = rep->sparse[i] ? zero_sparse_gradient(p) : torch::zeros_like(p);
      std::vector<at::Tensor> g{p.mutable_grad()};
      g[0].mul_(1.0 / ws);
      g0.wait(g0.backend()->allreduce(g, c10d::AllreduceOptions{}),
              policytrain::detail::format("all-reduce of gradient bucket (late window, parameter '{}', optimizer step {})",
                                          rep->names[i], rep->step));
      ++rep->allreduce_calls;
    }
  }

  /// Checks the Replica's new parameter list against the Reducer's limits (compression cannot cast a sparse
  /// gradient).
  void check_parameters() const {
    for (size_t i = 0; i < rep->params.size(); ++i)
      if (rep->sparse[i] && wire_dtype)
        throw std::invalid_argument(policytrain::detail::error_message(
            "policytrain::parallel::DataParallel",
            policytrain::detail::format(
                "parameter '{}' gets sparse gradients (an embedding with sparse = "
                "true), which gradient compression ('{}') cannot cast; set compression = \"none\", or sparse = false",
                rep->names[i], opt.compression)));
  }

  /// DDP's _ddp_init_helper: the first bucket assignment (one bucket of everything unless
  /// find_unused_parameters without a static graph), the Reducer, its communication hook, static graph; or the
  /// bucket order `given` (a resumed run's, apply_order).
  void build(std::optional<std::vector<std::vector<size_t>>> given = std::nullopt);

  /// The Reducer's bucket order once it has rebuilt its buckets after the first backward ([2, n]: each parameter's
  /// index and its bucket, in the order the buckets hold them), for checkpoints; undefined before the rebuild.
  /// Why: on 3 or more ranks Gloo's ring all-reduce adds a bucket element's terms in an order that depends on the
  /// element's place in the bucket, so a resumed run whose first step used the initial buckets (one bucket in
  /// parameter order) would differ from the uninterrupted one in the last bits. A resume builds its Reducer with
  /// the saved order (apply_order), and the rebuild after its first backward gives that order again.
  /// A Reducer built with a given order (apply_order, learn_static_order) has that order until its own rebuild
  /// gives it again: a checkpoint before that rebuild keeps it too.
  torch::Tensor rebuilt_bucket_order() const {
    if (!reducer || (reducer->should_rebuild_buckets() && !built_with_order)) return {};
    if (searches_unused()) return {};  // never rebuilt: the initial order stands
    return encode_bucket_order(*reducer, rep->params);
  }

  /// The buckets c10d's Reducer will rebuild at the next forward from its first synchronised backward's order, while
  /// that rebuild is pending (no static graph, no unused-parameter search: those rebuild otherwise or never), in
  /// encode_bucket_order's form; undefined otherwise. For a save that cannot make the Reducer rebuild now (sparse
  /// gradients: their buckets have no flat view until a backward fills them), so that the resumed run builds the
  /// buckets the uninterrupted one goes on with (composition fuzzer seed 119525: a stop at step 1 on 3 ranks with
  /// a sparse embedding, 1 ulp off before). c10d takes rank 0's order (sync_bucket_indices); a resume builds every
  /// rank's Reducer with the order the checkpoint holds, rank 0's.
  torch::Tensor pending_rebuild_order() const {
    if (!reducer || opt.static_graph || searches_unused() || built_with_order || synced_backwards < 1 ||
        !reducer->should_rebuild_buckets())
      return {};
    return encode_bucket_indices(buckets_in_ready_order(rep->params, ready_order, rep->sparse,
                                                        static_cast<size_t>(first_bucket_bytes()),
                                                        static_cast<size_t>(bucket_bytes())));
  }

  /// Rebuilds the Reducer with a saved bucket order, when it is a complete order of this run's parameters;
  /// otherwise keeps the initial order, as a fresh start.
  void apply_order(const torch::Tensor& order) {
    if (!reducer) return;
    if (auto indices = decode_bucket_order(order, rep->params.size())) rebuild_with(std::move(*indices));
  }

  /// Static graph: whether this Reducer has done exactly one synchronised backward from its initial order and not
  /// rebuilt. c10d's Reducer learns the order from its second backward (the first only counts the hooks) and
  /// rebuilds before the third, so a checkpoint now has no order to keep: it records that one is pending, and the
  /// resumed run learns it (learn_order, learn_static_order). Not with sparse gradients (no rebuild in before_save).
  bool static_order_pending() const {
    return reducer && opt.static_graph && !built_with_order && synced_backwards == 1 &&
           reducer->should_rebuild_buckets() && std::find(rep->sparse.begin(), rep->sparse.end(), true) == rep->sparse.end();
  }

  /// A run resumed from a checkpoint with static_order_pending (learn_order): its first synchronised backward ran
  /// on the initial buckets, as the uninterrupted run's second; the uninterrupted run's third all-reduced the
  /// buckets c10d rebuilt from its second backward's order, which this Reducer would rebuild only before its third
  /// (one step late: on 3 or more ranks Gloo's ring sums those steps in another order, 1 ulp off; composition
  /// fuzzer seed 169497). So after that first backward, before the next window, this rebuilds the Reducer with the
  /// buckets c10d's rebuild_buckets computes from a backward's order: the parameters in the order their gradients
  /// came, then those that got none in index order (its finalize appends the unused ones), assigned by
  /// compute_bucket_assignment_by_size with the first bucket's and the other buckets' caps (reversed around it
  /// under DDP_SET_LAST_BUCKET_CAP=1, as there). A static graph has the same order in every backward and on every
  /// rank (c10d broadcasts rank 0's; here each rank computes the same). Returns whether it rebuilt.
  bool learn_static_order() {
    if (!learn_order || !reducer || synced_backwards < 1) return false;
    learn_order = false;
    auto buckets = buckets_in_ready_order(rep->params, ready_order, rep->sparse, static_cast<size_t>(first_bucket_bytes()),
                                          static_cast<size_t>(bucket_bytes()));
    rebuild_with(std::move(buckets));
    return true;
  }

  /// The first bucket's cap and the others' in bytes, as the Reducer is given them (build).
  int64_t bucket_bytes() const { return static_cast<int64_t>(opt.bucket_mb * 1024 * 1024); }
  int64_t first_bucket_bytes() const {
    return opt.first_bucket_mb ? static_cast<int64_t>(*opt.first_bucket_mb * 1024 * 1024)
                               : opt.bucket_mb == 25 ? int64_t{1024 * 1024} : bucket_bytes();
  }

  /// Drops the Reducer and builds it again with the bucket order `indices`.
  void rebuild_with(std::vector<std::vector<size_t>> indices) {
    for (auto& p : rep->params) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
    reducer.reset();  // removes the Reducer's hooks; build sets both again, with the given order
    build(std::move(indices));
  }

  /// Runs `fn` (the backward). On a window's last micro-step (`last`) the Reducer expects its hooks
  /// (prepare_for_forward, prepare_for_backward) and all-reduces each bucket as soon as its gradients are ready,
  /// during the backward; at the backward's end it waits and writes the averages into the gradients. Other
  /// micro-steps only accumulate (DDP's no_sync).
  template <class F>
  void backward(bool last, F&& fn) {
    // Static graph: the first micro-step of the first window is synchronised. The Reducer learns the graph from
    // the autograd hooks of its first backward, and counts those of a no-sync backward too (it starts a backward
    // count that only the end of a synchronised one resets), after which no bucket is ever ready and the ranks
    // diverge (DDP stops on an internal assert there). That all-reduce's result is dropped: the local gradients are
    // put back (restore_local_grads), so the window's sum is the same, bit for bit, as any other window's; the
    // cost is one extra all-reduce, in the first window only.
    if (!reducer || !(last || static_first_pending)) {
      pending_output = torch::Tensor();
      fn();
      return;
    }
    std::vector<at::Tensor> outputs;
    if (pending_output.defined()) outputs.push_back(std::exchange(pending_output, torch::Tensor()));
    rep->allreduce_calls_last_step = 0;
    rep->bytes_last_step = 0;
    failed_bucket = -1;
    rep->last_launch_ns = 0;
    std::fill(ready.begin(), ready.end(), 0);
    ready_order.clear();
    reducer->prepare_for_forward();
    reducer->prepare_for_backward(outputs);
    outputs.clear();
    in_backward = true;
    keep_local = static_first_pending && !last;
    try {
      fn();
    } catch (const std::exception& e) {
      in_backward = false;
      keep_local = false;
      rethrow_backward_error(e);
    }
    in_backward = false;
    ++synced_backwards;
    if (keep_local) restore_local_grads();
    else rep->synced = true;
    if (static_first_pending)
      throw std::logic_error(policytrain::detail::error_message(
          "policytrain::parallel::DataParallel",
          policytrain::detail::format(
              "{}: static_graph: the first synchronised backward did not reach the "
              "output of the forward, so the Reducer's delayed all-reduce was never queued; the loss must be computed "
              "from the training step's forward",
              rep->who())));
    // After the Reducer waited for every bucket and wrote the averages back.
    rep->count_wait();
  }

  /// Before the optimizer step: checks that the Reducer finished this window's reduction (every parameter got a
  /// gradient, or find_unused_parameters), or averages a window that had no synchronised backward.
  void before_step() {
    if (!reducer) return;
    if (!std::exchange(rep->synced, false)) {
      average_late();
    } else {
      try {
        reducer->check_finalized();
      } catch (const std::exception& e) {
        std::vector<std::string> ns;
        for (size_t i = 0; i < rep->params.size(); ++i)
          if (!rep->params[i].grad().defined()) ns.push_back(policytrain::detail::format("'{}' (index {})", rep->names[i], i));
        const std::string cause = e.what();
        throw std::runtime_error(policytrain::detail::error_message(
            "policytrain::parallel::DataParallel",
            policytrain::detail::format(
                "{}: this rank computed no gradient for parameter{} {} in "
                "optimizer step {}, so the Reducer could not finish the all-reduce (DDP stops here too); set "
                "DataParallelOptions::find_unused_parameters = true to leave such parameters untouched, or freeze them "
                "(requires_grad false). c10d: {}",
                rep->who(), ns.size() == 1 ? "" : "s", fmt::join(ns, ", "), rep->step,
                cause.substr(0, cause.find('\n')))));
      }
    }
    ++rep->step;
  }

  /// A failed backward of a synchronised micro-step: a failed all-reduce becomes a CollectiveError naming the
  /// bucket and the silent ranks; the Reducer's "marked ready twice" names the parameter.
  [[noreturn]] void rethrow_backward_error(const std::exception& e) {
    const std::string cause = e.what();
    if (cause.rfind("policytrain::", 0) == 0) throw;  // ours (marked ready twice)
    // A bucket's all-reduce failed if its future says so (its callback may run just after the Reducer's wait
    // returned the error), or if the error is a transport's.
    bool comm = false;
    if (rep->allreduce_calls_last_step > 0) {
      for (int i = 0; i < 20 && failed_bucket < 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      comm = failed_bucket >= 0;
      for (const char* w : {"Gloo", "gloo", "NCCL", "imeout", "imed out", "closure", "onnection", "peer"})
        comm = comm || cause.find(w) != std::string::npos;
    }
    if (comm)
      throw rep->group->collective_error(
          policytrain::detail::format("all-reduce of gradient bucket {} (optimizer step {})",
                                      failed_bucket >= 0 ? std::to_string(failed_bucket + 1) : "?", rep->step),
          e);
    throw;
  }
};

/// Called when autograd has accumulated a parameter's gradient, in a synchronised backward: a second call for
/// one parameter is an error (c10d::Reducer does not notice a gradient accumulated twice when one of the two
/// happens in a reentrant backward, and then all-reduces the first half only: measured, see test_parallel).
struct GradAccumulated : torch::autograd::PostAccumulateGradHook {
  GradAccumulated(std::weak_ptr<ReducerSync> s, size_t i) : state(std::move(s)), index(i) {}
  void operator()(const torch::autograd::Variable&) override {
    if (auto s = state.lock(); s && s->in_backward) s->accumulated(index);
  }
  std::weak_ptr<ReducerSync> state;
  size_t index;
};

inline void ReducerSync::build(std::optional<std::vector<std::vector<size_t>>> given) {
  const int64_t cap = bucket_bytes();
  const int64_t first = first_bucket_bytes();
  std::vector<size_t> limits;
  if (opt.static_graph || !opt.find_unused_parameters) limits = {std::numeric_limits<size_t>::max()};
  else if (first < cap) limits = {static_cast<size_t>(first), static_cast<size_t>(cap)};
  else limits = {static_cast<size_t>(cap)};
  const std::vector<bool>& sparse = rep->sparse;  // each sparse gradient in a bucket of its own, as DDP's
  auto [indices, per_bucket] = c10d::compute_bucket_assignment_by_size(rep->params, limits, sparse);
  std::reverse(indices.begin(), indices.end());  // as DDP: roughly the order backward produces gradients
  built_with_order = given.has_value();
  synced_backwards = 0;
  if (given) indices = std::move(*given);        // a resumed run's saved order (apply_order), or a learned one
  std::unordered_map<size_t, std::string> names;
  for (size_t i = 0; i < rep->names.size(); ++i) names[i] = rep->names[i];
  rep->group->guarded("construction of c10d::Reducer", [&] {
    reducer = policytrain::detail::make_reducer<c10d::Reducer>(
        rep->params, std::move(indices), rep->group->group(), sparse, cap, opt.find_unused_parameters,
        opt.gradient_as_bucket_view, std::move(names), first, /*skip_all_reduce_unused_params=*/false,
        /*use_python_reducer=*/false);
  });
  reducer->register_comm_hook(std::make_unique<AverageHook>(this));
  if (opt.static_graph) {
    reducer->set_static_graph();
    static_first_pending = true;  // forward_output's hook on the output queues delay_all_reduce
  }
  ready.assign(rep->params.size(), 0);
  for (size_t i = 0; i < rep->params.size(); ++i)
    torch::autograd::impl::set_post_acc_grad_hooks(rep->params[i], std::make_unique<GradAccumulated>(weak_from_this(), i));
}

inline c10::intrusive_ptr<c10::ivalue::Future> AverageHook::runHook(c10d::GradBucket& bucket) {
  auto& s = *s_;
  auto& rep = *s.rep;
  ++rep.allreduce_calls;
  ++rep.allreduce_calls_last_step;
  if (s.in_backward) ++rep.allreduce_calls_in_hooks;
  rep.last_launch_ns = now_ns();
  const auto& pg = rep.group->group();
  const int ws = pg->getSize();
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
    rep.bytes_last_step += buffer.numel() * static_cast<int64_t>(buffer.element_size());
    std::vector<at::Tensor> ts{buffer};
    fut = pg->allreduce(ts)->getFuture();
  } else {
    // As fp16_compress_hook / bf16_compress_hook: cast, divide in the low precision, sum, cast back in place.
    auto compressed = buffer.to(*s.wire_dtype).div_(ws);
    rep.bytes_last_step += compressed.numel() * static_cast<int64_t>(compressed.element_size());
    std::vector<at::Tensor> ts{compressed};
    auto reduced = pg->allreduce(ts)->getFuture();
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

}  // namespace policytrain::parallel::detail
