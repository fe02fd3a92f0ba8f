#pragma once
/// \file
/// parallel::FullyShard<M> — marks a unit of fully sharded parameters (stage 3 of parallel::ShardedDataParallel,
/// PyTorch FSDP2's `fully_shard(module)`), and detail::ShardGroup, what one unit (or the root: the parameters no unit
/// claims) does with its parameters.
///
/// A unit wraps a module as memory::Recomputed<M> does: its state dict has the keys of M's, so weights move freely
/// between the two. Under stage 3 with more than one rank, every parameter of the unit is chunked on dim 0 across
/// the ranks (parallel::Dim0Chunk, FSDP2's padded torch.chunk); the optimizer steps the shards only. The wrapper's
/// forward all-gathers the unit's parameters into the module's own tensors, runs M, and frees them again
/// (reshard_after_forward, on by default; off keeps them to the backward). A gradient hook on the output gathers
/// them again before the unit's backward; a gradient hook on the input (or, when the input needs no gradient, the
/// end of the backward) reduce-scatters the unit's gradients into the shards' `.grad`, averaged over the ranks as
/// FSDP2 does on Gloo (ReduceOp::AVG on the same flat layout), and frees the parameters.
///
/// Freeing keeps each tensor's shape and storage object and sets the storage to 0 bytes, as FSDP2's
/// `untyped_storage().resize_(0)`: the views autograd saved in the forward (a weight's transpose) see the gathered
/// values again before backward. While freed, a parameter must not be read outside its unit.
/// Without the policy (one process, or another stage), FullyShard<M> is M: its forward calls M's.
/// Example: tests/unit/test_fsdp.cpp, examples/fashion_mnist (`--zero 3`); docs/parallel.md, "Fully sharded parameters".
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/dim0_shard.hpp>
#include <policytrain/parallel/process_group.hpp>

namespace policytrain::parallel {

namespace detail {

/// One parameter of a unit: the module's (full) tensor and this rank's shard of it.
struct ShardedParam {
  std::string name;    ///< its name in the model (for messages and the oracle)
  torch::Tensor full;  ///< the module's parameter; its storage is freed while the unit is resharded
  torch::Tensor shard; ///< this rank's rows (Dim0Chunk), a leaf of its own: what the optimizer steps
  Dim0Chunk layout;    ///< how `full` is chunked
  int64_t row_numel = 1;  ///< elements per row of dim 0
  size_t nbytes = 0;      ///< bytes of the full storage

  /// Elements of one rank's padded piece.
  int64_t piece_numel() const { return layout.chunk * row_numel; }
};

/// The parameters of one unit (or of the root) and their collectives (see the file comment). Shared by the
/// wrapper module, the autograd hooks and the policy (std::shared_ptr: the hooks may outlive a forward).
class ShardGroup : public std::enable_shared_from_this<ShardGroup> {
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

  /// Adds `full` (a parameter of the module, contiguous, owning its storage) and makes this rank's shard of it
  /// from its current values. Throws std::invalid_argument for a 0-d tensor or one that shares its storage.
  void add(const std::string& name, const torch::Tensor& full) {
    const auto what = [&](const char* why) {
      return std::invalid_argument(policytrain::detail::error_message(
          "policytrain::parallel::ShardedDataParallel",
          policytrain::detail::format("stage 3: parameter '{}' {}", name, why), {},
          "give it at least one dimension and a storage of its own, or train with stage 2"));
    };
    if (full.dim() == 0) throw what("is a scalar (0-d); FSDP2 shards on dim 0");
    if (!full.is_contiguous() || full.storage_offset() != 0 ||
        full.storage().nbytes() != static_cast<size_t>(full.numel()) * full.element_size())
      throw what("is a view into a larger storage (not contiguous, or sharing memory with another tensor)");
    if (!params_.empty() && full.scalar_type() != params_.front().full.scalar_type())
      throw what(policytrain::detail::format("has dtype {}, the unit's first parameter {}; every parameter of a unit "
                                             "is gathered in one buffer of one dtype", c10::toString(full.scalar_type()),
                                             c10::toString(params_.front().full.scalar_type())).c_str());
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

  /// All-gathers the shards into the module's tensors (nothing when they are gathered already).
  void unshard() {
    if (unsharded_ || params_.empty()) return;
    torch::NoGradGuard ng;
    const int64_t world = group_->world_size();
    int64_t total = 0;
    for (const auto& p : params_) total += p.piece_numel();
    const auto opts = params_.front().full.options().requires_grad(false);
    auto in = torch::zeros({total}, opts);
    int64_t off = 0;
    for (const auto& p : params_) {
      const int64_t n = p.shard.numel();
      if (n > 0) in.narrow(0, off, n).copy_(p.shard.detach().reshape({-1}));
      off += p.piece_numel();
    }
    auto out = torch::empty({total * world}, opts);
    group_->require_connected("all-gather of a unit's parameters");
    group_->wait(group_->backend()->_allgather_base(out, in, c10d::AllgatherOptions{}),
                 policytrain::detail::format("all-gather of the parameters of {}", who()));
    ++all_gathers_;
    auto table = out.view({world, total});
    off = 0;
    for (auto& p : params_) {
      allocate(p);
      if (p.full.numel() > 0) {
        auto rows = table.narrow(1, off, p.piece_numel()).reshape({-1}).narrow(0, 0, p.full.numel());
        // variable_data(): a tensor on the same storage with a version counter of its own, so that autograd's saved
        // views of the parameter do not see an in-place change (FSDP2: _unsafe_preserve_version_counter).
        p.full.variable_data().view({-1}).copy_(rows);
      }
      off += p.piece_numel();
    }
    unsharded_ = true;
  }

  /// Frees the module's tensors (their storage to 0 bytes, shapes kept).
  void reshard() {
    if (!unsharded_) return;
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
    const auto opts = params_[with.front()].full.options().requires_grad(false);
    auto in = torch::zeros({world, total}, opts);
    int64_t off = 0;
    for (size_t i : with) {
      const auto& p = params_[i];
      const auto& g = p.full.grad();
      if (g.defined() && p.full.numel() > 0)
        in.narrow(1, off, p.piece_numel()).copy_(pad_dim0(g.contiguous(), p.layout.padded_rows()).reshape({world, -1}));
      off += p.piece_numel();
    }
    auto out = torch::empty({total}, opts);
    c10d::ReduceScatterOptions ro;
    ro.reduceOp = c10d::ReduceOp::AVG;
    auto flat = in.view({-1});
    group_->require_connected("reduce-scatter of a unit's gradients");
    group_->wait(group_->backend()->_reduce_scatter_base(out, flat, ro),
                 policytrain::detail::format("reduce-scatter of the gradients of {}", who()));
    ++reduce_scatters_;
    off = 0;
    for (size_t i : with) {
      auto& p = params_[i];
      if (p.full.grad().defined()) {
        auto mine = out.narrow(0, off, p.shard.numel()).view(p.shard.sizes());
        auto& sg = p.shard.mutable_grad();
        if (sg.defined()) sg.add_(mine);
        else sg = mine;
        p.full.mutable_grad() = torch::Tensor();
      }
      off += p.piece_numel();
    }
  }

  /// Before the unit's forward: gathers (and, when training with grad, arms the post-backward).
  void pre_forward(bool training) {
    unshard();
    if (training) pending_ = true;
  }
  /// After the unit's forward: frees the parameters unless they are kept to the backward.
  void post_forward() {
    if (reshard_after_forward_) reshard();
  }
  /// Before the unit's backward (a hook on its output): gathers again.
  void pre_backward() { unshard(); }
  /// After the unit's backward (a hook on its input, or the end of the backward): on a window's last micro-step the
  /// gradients are reduce-scattered; the parameters are freed. `keep`: leave them gathered (the root, which the
  /// next forward gathers anyway).
  void post_backward(bool keep = false) {
    if (!pending_) return;
    pending_ = false;
    if (*sync_) reduce_gradients();
    if (!keep) reshard();
  }
  /// Whether a forward armed a post-backward that has not run.
  bool pending() const { return pending_; }

  /// "unit 'conv'" or "the root".
  std::string who() const {
    return name_.empty() ? std::string("the root (the parameters no unit claims)")
                         : policytrain::detail::format("unit '{}'", name_);
  }

 private:
  static void allocate(ShardedParam& p) {
    auto* s = p.full.storage().unsafeGetStorageImpl();
    if (s->nbytes() == p.nbytes) return;
    s->set_data_ptr_noswap(s->allocator()->allocate(p.nbytes));
    s->set_nbytes(p.nbytes);
  }

  std::string name_;
  ProcessGroup* group_;
  std::shared_ptr<bool> sync_;
  bool reshard_after_forward_ = true;
  std::vector<ShardedParam> params_;
  bool unsharded_ = true;  ///< the module's tensors hold their values (true until the first reshard)
  bool pending_ = false;
  int64_t all_gathers_ = 0, reduce_scatters_ = 0;
};

}  // namespace detail

/// What every FullyShard<M> is, whatever M: the policy finds units through it (dynamic_cast over named_modules).
class FullyShardedUnit {
 public:
  virtual ~FullyShardedUnit() = default;
  /// Whether the unit frees its parameters after its forward (FSDP2's reshard_after_forward).
  bool reshard_after_forward() const { return reshard_after_forward_; }
  /// Set by the policy at fit begin (null: not sharded, the forward calls the inner module).
  void set_shard_group(std::shared_ptr<detail::ShardGroup> g) { group_ = std::move(g); }
  /// The unit's group, null when not sharded.
  const std::shared_ptr<detail::ShardGroup>& shard_group() const { return group_; }

 protected:
  explicit FullyShardedUnit(bool reshard_after_forward) : reshard_after_forward_(reshard_after_forward) {}

  /// Runs `fn(x)` with the unit's parameters gathered, and arms the backward's hooks (see the file comment).
  template <class F>
  at::Tensor run(const at::Tensor& x, bool training, F&& fn) {
    if (!group_) return fn(x);
    const bool grad = training && at::GradMode::is_enabled();
    group_->pre_forward(grad);
    if (grad && x.requires_grad()) {
      std::weak_ptr<detail::ShardGroup> w = group_;
      x.register_hook([w](const at::Tensor&) {
        if (auto g = w.lock()) g->post_backward();
      });
    }
    at::Tensor y = fn(x);
    if (grad && y.requires_grad()) {
      std::weak_ptr<detail::ShardGroup> w = group_;
      y.register_hook([w](const at::Tensor&) {
        if (auto g = w.lock()) g->pre_backward();
      });
    }
    group_->post_forward();
    return y;
  }

 private:
  bool reshard_after_forward_ = true;
  std::shared_ptr<detail::ShardGroup> group_;
};

/// The module FullyShard<M> holds: M's parameters, buffers and children registered under M's own names.
template <class M>
class FullyShardImpl : public torch::nn::Module, public FullyShardedUnit {
 public:
  /// Wraps `inner` (shared, not copied). `reshard_after_forward`: free the gathered parameters after the forward
  /// (FSDP2's default); false keeps them until the unit's backward (less communication, more memory).
  explicit FullyShardImpl(M inner, bool reshard_after_forward = true)
      : FullyShardedUnit(reshard_after_forward), inner_(std::move(inner)) {
    for (auto& p : inner_->named_parameters(/*recurse=*/false)) register_parameter(p.key(), p.value(), p.value().requires_grad());
    for (auto& b : inner_->named_buffers(/*recurse=*/false)) register_buffer(b.key(), b.value());
    for (auto& c : inner_->named_children()) register_module(c.key(), c.value());
  }
  /// The inner module's forward with the unit's parameters gathered. One tensor in, one out (so that the wrapper
  /// fits in a torch::nn::Sequential).
  at::Tensor forward(const at::Tensor& x) {
    return run(x, is_training(), [this](const at::Tensor& in) { return inner_->forward(in); });
  }
  /// Sets training mode here and in the inner module (which is not a registered child).
  void train(bool on = true) override {
    torch::nn::Module::train(on);
    inner_->train(on);
  }
  /// The wrapped module.
  M& inner() { return inner_; }

 private:
  M inner_;
};

/// Module holder of FullyShardImpl<M>: `FullyShard<torch::nn::Linear> fc(torch::nn::Linear(64, 16));`.
template <class M>
class FullyShard : public torch::nn::ModuleHolder<FullyShardImpl<M>> {
 public:
  using torch::nn::ModuleHolder<FullyShardImpl<M>>::ModuleHolder;
  using Impl = FullyShardImpl<M>;  ///< the module class this holder owns
};

}  // namespace policytrain::parallel
