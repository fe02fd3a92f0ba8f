#pragma once
/// \file
/// detail::ShardGroup — what stage 3 of parallel::ShardedDataParallel does with the parameters of one unit
/// (parallel::FullyShard<M>) or of the root (the parameters no unit claims): this rank's shards (Dim0Chunk, FSDP2's
/// padded torch.chunk on dim 0), the all-gather into the module's own tensors and their release, and the
/// reduce-scatter of the gradients into the shards' `.grad`, averaged over the ranks as FSDP2 does on Gloo
/// (ReduceOp::AVG on FSDP2's flat layout: a [world, total] buffer whose row r holds, parameter after parameter,
/// rank r's padded piece of each). Freeing keeps each tensor's shape and storage object and sets the storage to 0
/// bytes, as FSDP2's `untyped_storage().resize_(0)`: the views autograd saved in the forward (a weight's
/// transpose) see the gathered values again before backward.
/// The all-gather writes in place: each parameter's storage is allocated (its own size, no padding), this rank's
/// rows are copied (cast, with mixed precision) from its shard into it, and every rank's rows are broadcast from
/// that rank into the same rows on the others (one c10d broadcast per rank and parameter, all in flight at once),
/// so the gathered parameters are the only bytes a gather allocates. FSDP2 copies the shards into one flat input,
/// all-gathers a [world, total] buffer and copies each parameter out of it (foreach_all_gather,
/// foreach_all_gather_copy_out: one collective, twice the unit's bytes at the copy); an all-gather into each
/// parameter would not help on Gloo, whose all-gather receives into a flat buffer of its own and copies out of it.
/// Mixed precision (ShardingOptions::mp_policy, FSDP2's MixedPrecisionPolicy): during a fit the module's tensors
/// take param_dtype (set_data, freed), so the shard is cast before the all-gather and the unit computes in it; the
/// gradients are cast to reduce_dtype before the reduce-scatter and the result to the shard's dtype after. For a
/// save and at fit end they take the shards' dtype again (use_compute_dtype).
/// Prefetch (ShardingOptions::prefetch): a PrefetchPlan shared by a model's units records the order in which they ran
/// their forwards and backwards in the last step; a unit's pre-forward then issues the next unit's all-gather
/// (c10d::Work, not waited on) before its own compute, and its pre-backward the next backward's, one unit ahead
/// (FSDP2's forward and backward prefetch). The next unit's pre-hook waits for that work. Every rank runs the same
/// units in the same order (a condition of the collectives anyway), so the plans agree.
/// It knows no Trainer; the unit calls it through detail::UnitHooks.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/detail/torch_compat.hpp>
#include <policytrain/parallel/dim0_shard.hpp>
#include <policytrain/parallel/fully_shard.hpp>
#include <policytrain/parallel/options.hpp>
#include <policytrain/parallel/process_group.hpp>

namespace policytrain::parallel::detail {

/// One parameter of a unit: the module's (full) tensor and this rank's shard of it.
struct ShardedParam {
  std::string name;    ///< its name in the model (for messages and the oracle)
  torch::Tensor full;  ///< the module's parameter; its storage is freed while the unit is resharded
  torch::Tensor shard; ///< this rank's rows (Dim0Chunk), a leaf of its own: what the optimizer steps
  Dim0Chunk layout;    ///< how `full` is chunked
  int64_t row_numel = 1;  ///< elements per row of dim 0
  size_t nbytes = 0;      ///< bytes of the full storage
  /// Mixed precision with a reduce_dtype: the gradients of the micro-steps without reduction, summed in it.
  torch::Tensor accumulated;

  /// Elements of one rank's padded piece.
  int64_t piece_numel() const { return layout.chunk * row_numel; }
};

class ShardGroup;

/// The order the units of one model ran in during the last training step, forwards and backwards (see the file
/// comment); `enabled` false records nothing and prefetches nothing.
struct PrefetchPlan {
  bool enabled = true;
  std::vector<ShardGroup*> forward, backward;  ///< the last step's order
  std::vector<ShardGroup*> forward_seen, backward_seen;  ///< this step's so far
  /// Before a training forward: what the last step recorded becomes the plan (the first step has none).
  void next_step() {
    if (!forward_seen.empty()) forward = std::exchange(forward_seen, {});
    if (!backward_seen.empty()) backward = std::exchange(backward_seen, {});
  }
};

/// Bytes of the gathered parameters alive in this process (an all-gather allocates nothing else: see the file
/// comment), and their peak since the last reset (the memory benchmark's measure of stage 3's transient bytes beyond
/// the shards; a prefetched gather counts from its issue).
struct GatheredBytes {
  static inline std::atomic<int64_t> live{0}, peak{0};
  static void add(int64_t n) {
    const int64_t now = live += n;
    for (int64_t p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
  }
  static void reset_peak() { peak = live.load(); }
};

/// The parameters of one unit (or of the root) and their collectives (see the file comment). Shared by the
/// unit, the gradient hooks and the policy (std::shared_ptr: the hooks may outlive a forward).
class ShardGroup final : public UnitHooks {
 public:
  /// `name`: the unit's path in the model ("" for the root); `sync`: whether a backward reduces the gradients
  /// (false between the micro-steps of an accumulation window), owned by the policy.
  ShardGroup(std::string name, ProcessGroup& group, std::shared_ptr<bool> sync, bool reshard_after_forward)
      : name_(std::move(name)), group_(&group), sync_(std::move(sync)), reshard_after_forward_(reshard_after_forward) {}

  const std::string& name() const { return name_; }
  std::vector<ShardedParam>& params() { return params_; }
  const std::vector<ShardedParam>& params() const { return params_; }
  /// Whether the module's tensors hold the full values now.
  bool unsharded() const { return unsharded_; }
  /// All-gathers and reduce-scatters so far (counters for the tests and the benchmark).
  int64_t all_gathers() const { return all_gathers_; }
  int64_t reduce_scatters() const { return reduce_scatters_; }
  /// All-gathers issued ahead of their unit (prefetch), a subset of all_gathers().
  int64_t prefetches() const { return prefetches_; }

  /// Adds `full` (a parameter of the module, contiguous, owning its storage) and makes this rank's shard of it
  /// from its current values. Throws std::invalid_argument for a 0-d tensor or one that shares its storage.
  void add(const std::string& name, const torch::Tensor& full) {
    if (full.dim() == 0) refuse(name, "is a scalar (0-d); FSDP2 shards on dim 0");
    if (!full.is_contiguous() || full.storage_offset() != 0 ||
        full.storage().nbytes() != static_cast<size_t>(full.numel()) * full.element_size())
      refuse(name, "is a view into a larger storage (not contiguous, or sharing memory with another tensor)");
    if (!params_.empty() && full.scalar_type() != params_.front().full.scalar_type())
      refuse(name, policytrain::detail::format("has dtype {}, the unit's first parameter {}; the gradients of a unit "
                                               "are reduce-scattered in one buffer of one dtype",
                                               c10::toString(full.scalar_type()),
                                               c10::toString(params_.front().full.scalar_type())));
    ShardedParam p;
    p.name = name;
    p.full = full;
    p.layout = Dim0Chunk::of(full.size(0), group_->world_size());
    for (int64_t d = 1; d < full.dim(); ++d) p.row_numel *= full.size(d);
    p.nbytes = full.storage().nbytes();
    p.shard = dim0_piece(full.detach(), group_->rank(), group_->world_size()).clone().requires_grad_(full.requires_grad());
    params_.push_back(std::move(p));
  }

  /// Copies every full parameter's rows into this rank's shard again (a later fit: the user may have changed the
  /// weights in between); the shards stay the same tensors, so the optimizer's state stays theirs.
  void refresh_shards() {
    torch::NoGradGuard ng;
    for (auto& p : params_) p.shard.copy_(dim0_piece(p.full.detach(), group_->rank(), group_->world_size()));
  }

  /// All-gathers the shards into the module's tensors (nothing when they are gathered already); waits for a
  /// prefetched all-gather when there is one.
  void unshard() {
    if (unsharded_ || params_.empty()) return;
    if (!inflight_) issue();
    finish();
  }

  /// Issues the all-gather of the shards without waiting for it (nothing when they are gathered already or their
  /// gather is in flight); the next unshard() waits for it.
  void prefetch() {
    if (unsharded_ || params_.empty() || inflight_) return;
    issue();
    ++prefetches_;
  }
  /// Whether a prefetched all-gather is in flight.
  bool prefetched() const { return inflight_.has_value(); }

  /// The plan this group records its order in and prefetches by (null: neither; the root has none).
  void set_prefetch_plan(std::shared_ptr<PrefetchPlan> plan) { plan_ = std::move(plan); }

  /// Frees the module's tensors (their storage to 0 bytes, shapes kept).
  void reshard() {
    if (inflight_) {
      // A prefetched gather that no hook used (the step ended first): the collectives must still complete on this
      // rank as on the others (they write into the storage freed below); its values are dropped.
      wait_all(*inflight_, policytrain::detail::format("prefetched all-gather of the parameters of {}", who()));
      inflight_.reset();
      unsharded_ = true;
    }
    if (!unsharded_) return;
    GatheredBytes::add(-std::exchange(allocated_bytes_, 0));
    for (auto& p : params_) {
      auto* s = p.full.storage().unsafeGetStorageImpl();
      s->set_data_ptr_noswap(at::DataPtr(nullptr, s->device()));
      s->set_nbytes(0);
    }
    unsharded_ = false;
  }

  /// Reduce-scatters the full gradients into the shards' `.grad` (accumulated into a gradient the shard has),
  /// averaged over the ranks, and drops the full gradients. FSDP2's layout: a [world, total] buffer whose row r
  /// holds, parameter after parameter, rank r's padded piece of each gradient; a parameter without a gradient
  /// takes part with zeros and its shard gets none.
  void reduce_gradients() {
    std::vector<size_t> with;
    for (size_t i = 0; i < params_.size(); ++i)
      if (params_[i].full.requires_grad()) with.push_back(i);
    if (with.empty()) return;
    torch::NoGradGuard ng;
    const int64_t world = group_->world_size();
    int64_t total = 0;
    for (size_t i : with) total += params_[i].piece_numel();
    accumulate_in_reduce_dtype();
    const auto opts = params_[with.front()].full.options().requires_grad(false).dtype(
        reduce_dtype_.value_or(params_[with.front()].full.scalar_type()));
    auto in = torch::zeros({world, total}, opts);
    int64_t off = 0;
    for (size_t i : with) {
      const auto& p = params_[i];
      const auto& g = p.accumulated.defined() ? p.accumulated : p.full.grad();
      if (g.defined() && p.full.numel() > 0)
        in.narrow(1, off, p.piece_numel()).copy_(pad_dim0(g.contiguous(), p.layout.padded_rows()).reshape({world, -1}));
      off += p.piece_numel();
    }
    auto out = torch::empty({total}, opts);
    c10d::ReduceScatterOptions ro;
    ro.reduceOp = c10d::ReduceOp::AVG;
    const auto [pre, post] = divide_factors(opts.dtype().toScalarType());
    if (pre > 0) {
      ro.reduceOp = c10d::ReduceOp::SUM;
      if (pre != 1) in.div_(pre);
    }
    auto flat = in.view({-1});
    group_->require_connected("reduce-scatter of a unit's gradients");
    group_->wait(group_->backend()->_reduce_scatter_base(out, flat, ro),
                 policytrain::detail::format("reduce-scatter of the gradients of {}", who()));
    ++reduce_scatters_;
    if (pre > 0 && post != 1) out.div_(post);
    if (out.scalar_type() != params_[with.front()].shard.scalar_type()) out = out.to(params_[with.front()].shard.scalar_type());
    off = 0;
    for (size_t i : with) {
      auto& p = params_[i];
      if (p.full.grad().defined() || p.accumulated.defined()) {
        auto mine = out.narrow(0, off, p.shard.numel()).view(p.shard.sizes());
        auto& sg = p.shard.mutable_grad();
        if (sg.defined()) sg.add_(mine);
        else sg = mine;
        p.full.mutable_grad() = torch::Tensor();
        p.accumulated = torch::Tensor();
      }
      off += p.piece_numel();
    }
  }

  /// All-gathers `t`, this rank's rows of `p` (an optimizer state tensor of the shard's shape), into `p`'s whole
  /// shape (a checkpoint's consolidation).
  torch::Tensor gather_rows(const ShardedParam& p, const torch::Tensor& t) {
    torch::NoGradGuard ng;
    auto whole = torch::empty(p.full.sizes(), t.options());
    Gather g;
    broadcast_rows(whole, t, g);
    wait_all(g, policytrain::detail::format("all-gather of the optimizer state of '{}' for a checkpoint", p.name));
    return whole;
  }

  /// Mixed precision: `mp`, clamped as FSDP2's FSDPParam.init_dtype_attrs (no param_dtype when it is the
  /// parameters' own or they are not floating point; no reduce_dtype when it is the compute dtype). Call before the
  /// first forward; the module's tensors take the dtype at use_compute_dtype(true).
  void set_mixed_precision(const MixedPrecisionPolicy& mp) {
    if (params_.empty()) return;
    const auto orig = params_.front().shard.scalar_type();
    param_dtype_ = mp.param_dtype && *mp.param_dtype != orig && c10::isFloatingType(orig) ? mp.param_dtype : std::nullopt;
    reduce_dtype_ = mp.reduce_dtype && *mp.reduce_dtype != param_dtype_.value_or(orig) ? mp.reduce_dtype : std::nullopt;
  }
  /// Mixed precision: the dtype the unit computes in (unset: the parameters' own).
  std::optional<c10::ScalarType> param_dtype() const { return param_dtype_; }
  std::optional<c10::ScalarType> input_dtype() const override { return param_dtype_; }

  /// Mixed precision: the module's tensors in param_dtype (`compute`) or in the shards' dtype (a save, fit end),
  /// freed, so that the next unshard() gathers in that dtype (the shard cast before the all-gather, as FSDP2's
  /// copy-in). set_data keeps each tensor the module's parameter (its handle, name and autograd identity).
  /// Nothing when they have that dtype already.
  void use_compute_dtype(bool compute) {
    if (!param_dtype_) return;
    const auto want = compute ? *param_dtype_ : params_.front().shard.scalar_type();
    if (params_.front().full.scalar_type() == want) return;
    reshard();
    for (auto& p : params_) {
      p.full.set_data(torch::empty(p.full.sizes(), p.full.options().dtype(want)));
      p.nbytes = p.full.storage().nbytes();
      auto* st = p.full.storage().unsafeGetStorageImpl();
      st->set_data_ptr_noswap(at::DataPtr(nullptr, st->device()));
      st->set_nbytes(0);
    }
  }

  /// Before the unit's forward: gathers (and, when training with grad, arms the post-backward).
  void pre_forward(bool training) override {
    if (param_dtype_) refuse_other_autocast();
    unshard();
    if (training) {
      pending_ = true;
      if (plan_) prefetch_after(plan_->forward, plan_->forward_seen);
    }
  }
  /// After the unit's forward: frees the parameters unless they are kept to the backward.
  void post_forward() override {
    if (reshard_after_forward_) reshard();
  }
  /// Before the unit's backward (a hook on its output): gathers again.
  void pre_backward() override {
    unshard();
    if (plan_) prefetch_after(plan_->backward, plan_->backward_seen);
  }
  /// After the unit's backward (a hook on its input, or the end of the backward): on a window's last micro-step the
  /// gradients are reduce-scattered; the parameters are freed. `keep`: leave them gathered (the root, which the
  /// next forward gathers anyway).
  void post_backward(bool keep) {
    if (!pending_) return;
    pending_ = false;
    if (*sync_) reduce_gradients();
    else accumulate_in_reduce_dtype();
    if (!keep) reshard();
  }
  void post_backward() override { post_backward(false); }
  /// Whether a forward armed a post-backward that has not run.
  bool pending() const { return pending_; }

  /// "unit 'conv'" or "the root".
  std::string who() const {
    return name_.empty() ? std::string("the root (the parameters no unit claims)")
                         : policytrain::detail::format("unit '{}'", name_);
  }

 private:
  /// A parameter `add` cannot shard.
  [[noreturn]] static void refuse(const std::string& name, const std::string& why) {
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::ShardedDataParallel", policytrain::detail::format("stage 3: parameter '{}' {}", name, why),
        {}, "give it at least one dimension and a storage of its own, or train with stage 2"));
  }

  /// Under an autocast of another dtype than param_dtype, the weights gathered in param_dtype would be cast again
  /// for each op: the two policies contradict each other.
  void refuse_other_autocast() const {
    const auto device = params_.front().full.device().type();
    if (!policytrain::detail::autocast_enabled(device) || policytrain::detail::autocast_dtype(device) == *param_dtype_) return;
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::ShardedDataParallel",
        policytrain::detail::format("stage 3: {} computes in ShardingOptions::mp_policy.param_dtype {} under an autocast "
                                    "to {}: autocast would cast the gathered weights again, op by op",
                                    who(), c10::toString(*param_dtype_),
                                    c10::toString(policytrain::detail::autocast_dtype(device))),
        {}, policytrain::detail::format("give precision::Autocast the dtype {} (or fp32: off), or leave param_dtype unset",
                                        c10::toString(*param_dtype_))));
  }

  /// Mixed precision with a reduce_dtype: each gradient summed into its `accumulated` in that dtype (FSDP2:
  /// to_accumulated_grad_if_needed, accumulate_unsharded_grad_if_needed), the module's gradient dropped.
  void accumulate_in_reduce_dtype() {
    if (!reduce_dtype_) return;
    torch::NoGradGuard ng;
    for (auto& p : params_) {
      const auto& g = p.full.grad();
      if (!g.defined() || g.scalar_type() == *reduce_dtype_) continue;
      if (p.accumulated.defined()) p.accumulated.add_(g);
      else p.accumulated = g.to(*reduce_dtype_);
      p.full.mutable_grad() = torch::Tensor();
    }
  }

  /// FSDP2's _get_gradient_divide_factors on one process group: fp32 and bf16 reduce with ReduceOp::AVG ({0, 0});
  /// another dtype (fp16: overflow risk) divides by `pre` before a SUM and by `post` after, pre the power of two
  /// near sqrt(world) that FSDP2 picks.
  std::pair<double, double> divide_factors(c10::ScalarType dtype) const {
    if (dtype == c10::ScalarType::Float || dtype == c10::ScalarType::BFloat16) return {0.0, 0.0};
    const double factor = static_cast<double>(group_->world_size());
    double pre = 1;
    while (std::fmod(factor, pre) == 0 && factor / pre > pre) pre *= 2;
    return {pre, factor / pre};
  }

  /// An all-gather in flight: the broadcasts that write into the module's tensors.
  struct Gather {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
  };

  /// Records this group as the next in `seen` and, where the last step ran the same group at this position, issues
  /// the gather of the group that followed it there (one unit ahead).
  void prefetch_after(const std::vector<ShardGroup*>& order, std::vector<ShardGroup*>& seen) {
    const size_t k = seen.size();
    seen.push_back(this);
    if (plan_->enabled && k + 1 < order.size() && order[k] == this) order[k + 1]->prefetch();
  }

  /// Starts the all-gather of the shards into the module's tensors (see the file comment): their storage allocated,
  /// this rank's rows copied from its shard, every rank's rows broadcast from it.
  void issue() {
    torch::NoGradGuard ng;
    group_->require_connected("all-gather of a unit's parameters");
    Gather g;
    for (auto& p : params_) {
      allocate(p);
      // variable_data(): a tensor on the same storage with a version counter of its own, so that autograd's saved
      // views of the parameter do not see an in-place change (FSDP2: _unsafe_preserve_version_counter).
      if (p.full.numel() > 0) broadcast_rows(p.full.variable_data(), p.shard.detach(), g);
    }
    ++all_gathers_;
    inflight_ = std::move(g);
  }

  /// Copies `mine` (this rank's rows) into its rows of `whole` and issues, rank by rank, the broadcast of that
  /// rank's rows of `whole` from it (none for a rank whose piece is empty: every rank knows the layout), adding the
  /// works to `g`. In place: c10d's broadcast on Gloo receives into the tensor itself.
  void broadcast_rows(const torch::Tensor& whole, const torch::Tensor& mine, Gather& g) {
    const int64_t world = group_->world_size();
    if (mine.numel() > 0) dim0_piece(whole, group_->rank(), world).copy_(mine);
    for (int64_t r = 0; r < world; ++r) {
      std::vector<torch::Tensor> rows{dim0_piece(whole, r, world)};
      if (rows.front().numel() == 0) continue;
      c10d::BroadcastOptions o;
      o.rootRank = r;
      g.works.push_back(group_->backend()->broadcast(rows, o));
    }
  }

  /// Waits for every broadcast of `g`.
  void wait_all(Gather& g, const std::string& what) {
    for (auto& w : g.works) group_->wait(w, what);
    g.works.clear();
  }

  /// Waits for the gather in flight: the module's tensors hold the full values.
  void finish() {
    Gather g = std::move(*inflight_);
    inflight_.reset();
    wait_all(g, policytrain::detail::format("all-gather of the parameters of {}", who()));
    unsharded_ = true;
  }

  void allocate(ShardedParam& p) {
    auto* s = p.full.storage().unsafeGetStorageImpl();
    if (s->nbytes() == p.nbytes) return;
    allocated_bytes_ += static_cast<int64_t>(p.nbytes);
    GatheredBytes::add(static_cast<int64_t>(p.nbytes));
    s->set_data_ptr_noswap(s->allocator()->allocate(p.nbytes));
    s->set_nbytes(p.nbytes);
  }

  std::string name_;
  ProcessGroup* group_;
  std::shared_ptr<bool> sync_;
  bool reshard_after_forward_ = true;
  std::optional<c10::ScalarType> param_dtype_, reduce_dtype_;  ///< mixed precision (set_mixed_precision)
  std::vector<ShardedParam> params_;
  bool unsharded_ = true;  ///< the module's tensors hold their values (true until the first reshard)
  bool pending_ = false;
  int64_t all_gathers_ = 0, reduce_scatters_ = 0, prefetches_ = 0;
  std::shared_ptr<PrefetchPlan> plan_;
  std::optional<Gather> inflight_;  ///< a prefetched (or issued) all-gather not yet waited for
  int64_t allocated_bytes_ = 0;     ///< bytes allocate() gave the module's tensors since the last reshard
};

}  // namespace policytrain::parallel::detail
