#pragma once
/// \file
/// detail::Zero2Sync — the gradient synchronisation of parallel::ShardedDataParallel at stage 2 (ZeRO-2): each
/// gradient bucket is reduce-scattered into its owners' partitions during the backward, so that after it a rank
/// holds its own partition's gradients only. A piece that knows no Trainer: it is told whether a micro-step ends
/// its window, and the owner of each parameter (parallel::OptimizerPartition).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/process_group.hpp>
#include <policytrain/parallel/replica.hpp>

namespace policytrain::parallel::detail {

/// ZeRO-2's gradient synchronisation, shared with the autograd hooks (so the policy may be moved). The
/// parameters are bucketed in the reverse of their order (roughly the order backward produces gradients), up to
/// DataParallelOptions::bucket_mb each; a bucket is launched once every gradient in it is accumulated and every
/// earlier bucket is launched (the same order on every rank): its gradients, scaled by 1/world size (as the
/// Reducer does), are flattened per owning rank and reduce-scattered (c10d's reduce_scatter, sizes per rank as
/// the partition gives them), and every gradient of the bucket is released at once. At the backward's end each
/// rank waits for its buckets and its own parameters' gradients become views of what it received: after the
/// backward a rank holds only its partition's gradients (plus the buckets in flight while the backward runs).
/// Under the dim-0 partition (`rows` not empty) every gradient is split instead into the ranks' dim-0 chunks (its
/// row-major elements zero-padded to `rows` rows per rank, as FSDP2's reduce-scatter input), and a parameter's
/// .grad after the backward is this rank's rows of the averaged gradient, in the chunk's shape (rows x the other
/// dimensions); the optimizer steps the chunks (parallel::OptimizerPartition).
struct Zero2Sync {
  std::shared_ptr<Replica> rep;
  std::vector<int> owner;  ///< per Replica::params entry: its owning rank (greedy)
  /// Dim-0 partition: per Replica::params entry, its rows per rank (padding included: ceil(rows / world size));
  /// empty under the greedy partition.
  std::vector<int64_t> rows;
  /// per parameter: its gradient travels in the parameter's memory order and comes back with its strides (a
  /// channels_last weight gets a channels_last gradient, as autograd and c10d::Reducer give it; the fused
  /// optimizers walk a parameter, its gradient and its state in memory order). False: contiguous (also for a
  /// parameter that is not dense).
  std::vector<char> keeps_layout;
  struct Bucket {
    std::vector<size_t> members;  ///< indices into rep->params, in launch order
    size_t pending = 0;           ///< members not yet accumulated in this backward
    bool launched = false;
  };
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;  ///< per parameter
  std::vector<char> ready;
  size_t next = 0;  ///< the first bucket not launched
  struct InFlight {
    c10::intrusive_ptr<c10d::Work> work;
    std::vector<std::vector<at::Tensor>> inputs;  ///< kept alive until the work ends
    std::vector<at::Tensor> output;
    size_t bucket;
  };
  std::vector<InFlight> inflight;
  bool in_backward = false;
  int64_t calls = 0, bytes_last_step = 0, grad_bytes = 0, grad_bytes_peak = 0;
  std::mutex mu;

  /// A gradient accumulated in a synchronised backward: launches every bucket that became complete, in order.
  void accumulated(size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    if (!in_backward) return;
    if (ready[i]) rep->throw_ready_twice(i, "ShardedDataParallel", "its bucket was reduce-scattered");
    ready[i] = 1;
    auto& b = buckets[bucket_of[i]];
    --b.pending;
    while (next < buckets.size() && buckets[next].pending == 0) launch(next++, nullptr);
  }

  /// Reduce-scatters bucket `k` (every member's gradient, or zeros where `used` says another rank has one).
  /// `used` (per parameter, or null: all) leaves out the parameters no rank has a gradient for.
  void launch(size_t k, const std::vector<char>* used) {
    auto& b = buckets[k];
    const int w = rep->group->world_size();
    const double scale = 1.0 / w;
    std::vector<std::vector<torch::Tensor>> parts(static_cast<size_t>(w));
    torch::Tensor like;
    for (size_t i : b.members) {
      if (used && !(*used)[i]) continue;
      auto& p = rep->params[i];
      torch::Tensor g = p.grad();
      if (!g.defined()) g = torch::zeros_like(p);
      if (!like.defined()) like = g;
      if (!rows.empty()) {
        // Row-major (the chunks are rows of the logical tensor, whatever its layout), padded to rows x world size.
        const int64_t per = rows[i] * row_numel(p);
        auto f = g.reshape({-1});
        if (f.numel() != per * w) f = torch::cat({f, torch::zeros({per * w - f.numel()}, f.options())});
        for (int r = 0; r < w; ++r) parts[static_cast<size_t>(r)].push_back(f.narrow(0, per * r, per));
        continue;
      }
      parts[static_cast<size_t>(owner[i])].push_back(flat(g, p, keeps_layout[i]));
    }
    b.launched = true;
    if (!like.defined()) return;  // nothing of this bucket is used anywhere
    std::vector<at::Tensor> chunks;
    chunks.reserve(static_cast<size_t>(w));
    int64_t n = 0;
    for (auto& ps : parts) {
      chunks.push_back(ps.empty() ? torch::empty({0}, like.options()) : torch::cat(ps).mul_(scale));
      n += chunks.back().numel();
    }
    // Every gradient of the bucket is in the chunks now: release them (the owner's come back reduced).
    for (size_t i : b.members) rep->params[i].mutable_grad() = torch::Tensor();
    InFlight f;
    f.bucket = k;
    f.output = {torch::empty({chunks[static_cast<size_t>(rep->group->rank())].numel()}, like.options())};
    f.inputs = {std::move(chunks)};
    ++calls;
    ++rep->allreduce_calls_last_step;
    if (in_backward) ++rep->allreduce_calls_in_hooks;
    rep->last_launch_ns = now_ns();
    bytes_last_step += n * static_cast<int64_t>(like.element_size());
    try {
      f.work = rep->group->backend()->reduce_scatter(f.output, f.inputs, c10d::ReduceScatterOptions{});
    } catch (const std::exception& e) {
      throw rep->group->collective_error(policytrain::detail::format("reduce-scatter of gradient bucket {} (optimizer step {})", k + 1, rep->step), e);
    }
    inflight.push_back(std::move(f));
  }

  /// Elements per dim-0 row of `p` (a 0-dim parameter is one row of one).
  static int64_t row_numel(const torch::Tensor& p) {
    const int64_t d0 = p.dim() == 0 ? 1 : p.size(0);
    return d0 == 0 ? 0 : p.numel() / d0;
  }

  /// `g` (the gradient of `p`) as one dimension: in `p`'s memory order when `in_layout`, else row-major.
  static torch::Tensor flat(const torch::Tensor& g, const torch::Tensor& p, bool in_layout) {
    if (!in_layout) return g.reshape({-1});
    torch::Tensor h = g.strides() == p.strides() ? g : torch::empty_strided(p.sizes(), p.strides(), g.options()).copy_(g);
    return h.as_strided({h.numel()}, {1}, h.storage_offset());
  }

  /// Waits for every bucket launched, and makes this rank's parameters' gradients views of what it received.
  void finish() {
    for (auto& f : inflight) {
      rep->group->wait(f.work, policytrain::detail::format("reduce-scatter of gradient bucket {} (optimizer step {})", f.bucket + 1, rep->step));
      int64_t off = 0;
      const auto& out = f.output[0];
      for (size_t i : buckets[f.bucket].members) {
        auto& p = rep->params[i];
        if (!rows.empty()) {
          if (!used_now.empty() && !used_now[i]) continue;
          const int64_t d0 = p.dim() == 0 ? 1 : p.size(0), n = row_numel(p);
          const int64_t start = std::min(d0, rows[i] * rep->group->rank()), length = std::min(d0, start + rows[i]) - start;
          std::vector<int64_t> shape{length};
          for (int64_t d = 1; d < p.dim(); ++d) shape.push_back(p.size(d));
          p.mutable_grad() = out.narrow(0, off, length * n).view(shape);
          off += rows[i] * n;
          continue;
        }
        if (owner[i] != rep->group->rank()) continue;
        if (!used_now.empty() && !used_now[i]) continue;
        auto chunk = out.narrow(0, off, p.numel());
        p.mutable_grad() = keeps_layout[i] ? chunk.as_strided(p.sizes(), p.strides(), chunk.storage_offset())
                                           : chunk.view(p.sizes());
        off += p.numel();
      }
    }
    inflight.clear();
    used_now.clear();
    grad_bytes = 0;
    for (auto& p : rep->params)
      if (p.grad().defined()) grad_bytes += p.grad().numel() * static_cast<int64_t>(p.grad().element_size());
    grad_bytes_peak = std::max(grad_bytes_peak, grad_bytes);
  }

  /// A window without a synchronised backward (its last micro-batch was not known to be the last): every
  /// bucket now, leaving out the parameters no rank has a gradient for.
  void reduce_late() {
    torch::NoGradGuard ng;
    const auto n = static_cast<int64_t>(rep->params.size());
    auto flags = torch::zeros({n}, torch::TensorOptions(torch::kFloat).device(rep->group->comm_device()));
    for (int64_t i = 0; i < n; ++i)
      if (rep->params[static_cast<size_t>(i)].grad().defined()) flags[i].fill_(1);
    std::vector<at::Tensor> ft{flags};
    rep->group->wait(rep->group->backend()->allreduce(ft, c10d::AllreduceOptions{}), "all-reduce of gradient use flags (late window)");
    auto f = flags.to(torch::kCPU);
    used_now.assign(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) used_now[static_cast<size_t>(i)] = f[i].item<float>() > 0;
    bytes_last_step = 0;
    rep->allreduce_calls_last_step = 0;
    for (size_t k = 0; k < buckets.size(); ++k) launch(k, &used_now);
    finish();
  }

  /// Runs `fn` (the backward). On a window's last micro-step (`last`) the gradients are reduce-scattered as their
  /// buckets complete, during the backward; at its end this rank waits for its buckets and holds its own
  /// partition's gradients only. Other micro-steps only accumulate, every gradient in full (DDP's no_sync).
  template <class F>
  void backward(bool last, F&& fn) {
    if (!last) return fn();
    {
      std::lock_guard<std::mutex> lock(mu);
      std::fill(ready.begin(), ready.end(), 0);
      for (auto& b : buckets) b.pending = b.members.size(), b.launched = false;
      next = 0;
      bytes_last_step = 0;
      rep->allreduce_calls_last_step = 0;
      rep->last_launch_ns = 0;
      in_backward = true;
    }
    try {
      fn();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      in_backward = false;
      // No buffer freed under a running collective. A bucket that failed too throws here: the backward's own
      // error (already a CollectiveError naming the collective, or the cause of this failure) is the one rethrown.
      for (auto& f : inflight) try {
          f.work->wait(rep->group->timeout());
        } catch (const std::exception&) {
        }
      inflight.clear();
      throw;
    }
    std::lock_guard<std::mutex> lock(mu);
    in_backward = false;
    if (next < buckets.size()) {
      std::vector<std::string> missing;
      for (size_t i = 0; i < rep->params.size(); ++i)
        if (!ready[i]) missing.push_back(policytrain::detail::format("'{}' (index {})", rep->names[i], i));
      for (auto& f : inflight) f.work->wait(rep->group->timeout());
      inflight.clear();
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::parallel::ShardedDataParallel",
          policytrain::detail::format(
              "{}: this rank computed no gradient for parameter{} {} in "
              "optimizer step {}, so its gradient bucket could not be reduce-scattered; at stage 2 every trainable "
              "parameter must get a gradient in every step: freeze it (requires_grad false), or use stage 1 with "
              "DataParallelOptions::find_unused_parameters = true",
              rep->who(), missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), rep->step)));
    }
    finish();
    rep->synced = true;
    rep->count_wait();
  }

  /// Before the optimizer step: reduces a window that had no synchronised backward; counts the step.
  void before_step() {
    if (!std::exchange(rep->synced, false)) {
      std::lock_guard<std::mutex> lock(mu);
      reduce_late();
    }
    ++rep->step;
  }

  /// The buckets (the parameters in reverse order, up to `bucket_mb` each, one dtype and device per bucket) of the
  /// Replica's parameters with their `owners` (or, under the dim-0 partition, their `rows` per rank; `owners` is
  /// then unused), and a post-accumulate hook on every parameter. Throws std::invalid_argument for a parameter
  /// with sparse gradients.
  static std::shared_ptr<Zero2Sync> make(std::shared_ptr<Replica> rep, std::vector<int> owners, double bucket_mb,
                                         std::vector<int64_t> rows = {});

  std::vector<char> used_now;  ///< the late window's "some rank has a gradient" flags (empty otherwise)
};

/// Autograd's post-accumulate hook of a parameter under ZeRO-2.
struct Zero2Accumulated : torch::autograd::PostAccumulateGradHook {
  Zero2Accumulated(std::weak_ptr<Zero2Sync> s, size_t i) : state(std::move(s)), index(i) {}
  void operator()(const torch::autograd::Variable&) override {
    if (auto s = state.lock()) s->accumulated(index);
  }
  std::weak_ptr<Zero2Sync> state;
  size_t index;
};


inline std::shared_ptr<Zero2Sync> Zero2Sync::make(std::shared_ptr<Replica> r, std::vector<int> owners, double bucket_mb,
                                                  std::vector<int64_t> rows) {
  auto z = std::make_shared<Zero2Sync>();
  z->rep = std::move(r);
  const auto& rep = *z->rep;
  const size_t n = rep.params.size();
  z->owner = std::move(owners);
  z->rows = std::move(rows);
  z->keeps_layout.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const auto& p = rep.params[i];
    z->keeps_layout[i] = !p.is_contiguous() && p.is_non_overlapping_and_dense();
    if (rep.sparse[i])
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::parallel::ShardedDataParallel",
          policytrain::detail::format(
              "{}: parameter '{}' gets sparse gradients (an embedding with "
              "sparse = true), which stage 2 cannot reduce-scatter into its owner's partition; use stage 1 (its "
              "c10d::Reducer all-reduces sparse gradients, as DataParallel's), or sparse = false",
              rep.who(), rep.names[i])));
  }
  const auto cap = static_cast<int64_t>(bucket_mb * 1024 * 1024);
  z->bucket_of.assign(n, 0);
  int64_t bytes = 0;
  for (size_t j = n; j-- > 0;) {
    const auto& p = rep.params[j];
    const int64_t pb = p.numel() * static_cast<int64_t>(p.element_size());
    bool fresh = z->buckets.empty();
    if (!fresh) {
      const auto& first = rep.params[z->buckets.back().members.front()];
      fresh = bytes + pb > cap || first.scalar_type() != p.scalar_type() || first.device() != p.device();
    }
    if (fresh) {
      z->buckets.emplace_back();
      bytes = 0;
    }
    z->buckets.back().members.push_back(j);
    z->bucket_of[j] = z->buckets.size() - 1;
    bytes += pb;
  }
  z->ready.assign(n, 0);
  for (size_t i = 0; i < n; ++i)
    torch::autograd::impl::set_post_acc_grad_hooks(rep.params[i], std::make_unique<Zero2Accumulated>(z, i));
  return z;
}

}  // namespace policytrain::parallel::detail
