#pragma once
/// \file
/// parallel::FullyShard<M> — marks a unit of fully sharded parameters (stage 3 of parallel::ShardedDataParallel,
/// PyTorch FSDP2's `fully_shard(module)`). What the unit's parameters go through is detail::ShardGroup's
/// (shard_group.hpp), which the policy attaches at fit begin; this header needs no process group.
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
/// While freed (between fit begin and fit end), a parameter must not be read outside its unit.
/// Without the policy (one process, or another stage), FullyShard<M> is M: its forward calls M's.
/// Example: tests/unit/test_fsdp.cpp, examples/fashion_mnist (`--zero 3`); docs/parallel.md, "Fully sharded parameters".
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace policytrain::parallel {

namespace detail {

/// What a unit asks of its group around its compute (detail::ShardGroup implements it). Virtual so that this
/// header needs no process group: one call per unit and forward or backward, beside a collective.
class UnitHooks {
 public:
  virtual ~UnitHooks() = default;
  /// Before the forward: gather (and, when `training`, arm the post-backward).
  virtual void pre_forward(bool training) = 0;
  /// After the forward: free, unless kept to the backward.
  virtual void post_forward() = 0;
  /// Before the unit's backward (a hook on its output): gather again.
  virtual void pre_backward() = 0;
  /// After the unit's backward (a hook on its input): reduce-scatter the gradients, free.
  virtual void post_backward() = 0;
  /// The dtype the unit casts a floating-point input to (mixed precision's param_dtype); unset: none.
  virtual std::optional<c10::ScalarType> input_dtype() const { return std::nullopt; }
};

}  // namespace detail

/// What every FullyShard<M> is, whatever M: the policy finds units through it (dynamic_cast over named_modules).
class FullyShardedUnit {
 public:
  virtual ~FullyShardedUnit() = default;
  /// Whether the unit frees its parameters after its forward (FSDP2's reshard_after_forward).
  bool reshard_after_forward() const { return reshard_after_forward_; }
  /// Set by the policy at fit begin (null: not sharded, the forward calls the inner module).
  void set_shard_group(std::shared_ptr<detail::UnitHooks> g) { group_ = std::move(g); }
  /// The unit's group, null when not sharded.
  const std::shared_ptr<detail::UnitHooks>& shard_group() const { return group_; }

  /// Runs `fn(x)` with the unit's parameters gathered, and arms the backward's hooks (see the file comment): the
  /// unit's forward, and a computation that reads the unit's parameters outside it (the main job's recomputed batch
  /// norm, through the functional API).
  template <class F>
  at::Tensor run(const at::Tensor& input, bool training, F&& fn) {
    if (!group_) return fn(input);
    at::Tensor x = cast_input(input);
    const bool grad = training && at::GradMode::is_enabled();
    group_->pre_forward(grad);
    // A leaf input (memory::recompute's detached copy, in its recomputed forward) would get the hook below on its
    // AccumulateGrad, which autograd may run before those of the unit's parameters: a non-leaf alias makes it run
    // after them, as for any other input.
    if (grad && x.requires_grad() && x.is_leaf()) x = x.view_as(x);
    if (grad && x.requires_grad()) {
      std::weak_ptr<detail::UnitHooks> w = group_;
      x.register_hook([w](const at::Tensor&) {
        if (auto g = w.lock()) g->post_backward();
      });
    }
    at::Tensor y = fn(x);
    if (grad && y.requires_grad()) {
      std::weak_ptr<detail::UnitHooks> w = group_;
      y.register_hook([w](const at::Tensor&) {
        if (auto g = w.lock()) g->pre_backward();
      });
    }
    group_->post_forward();
    return y;
  }

 protected:
  /// `reshard_after_forward`: see reshard_after_forward().
  explicit FullyShardedUnit(bool reshard_after_forward) : reshard_after_forward_(reshard_after_forward) {}

 private:
  /// `x` in the group's input dtype when it is floating point (FSDP2's cast_forward_inputs), else `x`.
  at::Tensor cast_input(const at::Tensor& x) const {
    const auto dt = group_->input_dtype();
    return dt && x.is_floating_point() && x.scalar_type() != *dt ? x.to(*dt) : x;
  }

  bool reshard_after_forward_ = true;
  std::shared_ptr<detail::UnitHooks> group_;
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
