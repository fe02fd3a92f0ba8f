#pragma once
/// \file
/// What the fused optimizers (optim::FusedAdamW, FusedAdam, FusedSgd) share: the loss scaler's `grad_scale` and
/// `found_inf` tensors handed to the kernel, so that unscaling, the inf check and the update are one pass, as
/// PyTorch's `torch.amp.GradScaler` does for an optimizer with `_step_supports_amp_scaling` (it sets
/// `optimizer.grad_scale` and `optimizer.found_inf` before `step()`); and the learning rate as a device tensor.
#include <optional>
#include <vector>

#include <torch/types.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::optim {

/// The gradient-scaling inputs of a fused optimizer step. Both tensors are 0-dim float32 on the parameters'
/// device (moved there per step with a non-blocking copy otherwise). `grad_scale`: the gradients are divided by
/// it inside the kernel (in place). `found_inf`: 1 skips the step (params and state unchanged; the Adam step
/// counters are decremented back, as PyTorch does), 0 steps. The tensors are read on the device: no host sync.
class FusedGradScaling {
 public:
  /// Sets the tensors used by every following step() until cleared; an undefined tensor means "none".
  /// Keep them alive and update them in place (e.g. the scaler's own tensors): the kernel reads them at step().
  void set_grad_scaling(torch::Tensor grad_scale, torch::Tensor found_inf) {
    check(grad_scale, "grad_scale");
    check(found_inf, "found_inf");
    grad_scale_ = std::move(grad_scale);
    found_inf_ = std::move(found_inf);
  }
  /// Steps plainly again (no unscale, no skip).
  void clear_grad_scaling() {
    grad_scale_ = torch::Tensor();
    found_inf_ = torch::Tensor();
  }
  /// The loss scale the gradients carry (undefined: no unscaling in the kernel).
  const torch::Tensor& grad_scale() const { return grad_scale_; }
  /// The flag a non-finite gradient sets (undefined: no skip in the kernel).
  const torch::Tensor& found_inf() const { return found_inf_; }

 protected:
  /// The tensor on `device` (itself when already there), as an optional for the kernel.
  static std::optional<torch::Tensor> on(const torch::Tensor& t, const torch::Device& device) {
    if (!t.defined()) return std::nullopt;
    return t.device() == device ? t : t.to(device, /*non_blocking=*/true);
  }

 private:
  static void check(const torch::Tensor& t, const char* name) {
    TORCH_CHECK(!t.defined() || (t.numel() == 1 && t.is_floating_point()),
                policytrain::detail::error_message(
                    "policytrain::optim::FusedGradScaling",
                    c10::str(name, " must be a one-element floating tensor (the loss scaler's); got ",
                             t.defined() ? t.sizes() : c10::IntArrayRef{}, " of ",
                             t.defined() ? t.dtype() : caffe2::TypeMeta()),
                    {}, "pass an undefined tensor for none"));
  }
  torch::Tensor grad_scale_, found_inf_;
};

/// What a step policy that replays a captured optimizer step (step::CudaGraph) needs of the optimizer: a step
/// whose per-step host state lives on the device. optim::FusedAdamW, FusedAdam and FusedSgd implement it.
class GraphReplayable {
 public:
  virtual ~GraphReplayable() = default;
  /// Before a capture and before each replay: writes each param group's current lr into the device tensor the
  /// kernel reads (an asynchronous fill where it changed), so that a schedule acts on a replayed step.
  virtual void prepare_replay() = 0;
  /// After a replay: the step ran on the device only (its step counters advanced there, not on the host).
  virtual void replayed() = 0;
};

namespace detail {
/// One float32 learning-rate tensor per param group on a CUDA device, refreshed (an asynchronous fill, no sync)
/// when the group's double lr changes, so that a schedule moves it without a host sync and a captured CUDA graph
/// reads the new value. On the CPU the kernels take the double, as PyTorch's `_fused_adam`/`_fused_sgd` do there.
struct LrTensors {
  struct Entry {
    torch::Tensor tensor;
    double value = 0;
  };
  std::vector<Entry> groups;
  /// The tensor for group `g` holding `lr`, on `device`; undefined on the CPU (use the double there).
  const torch::Tensor& get(size_t g, double lr, const torch::Device& device) {
    static const torch::Tensor none;
    if (device.is_cpu()) return none;
    if (groups.size() <= g) groups.resize(g + 1);
    auto& e = groups[g];
    if (!e.tensor.defined() || e.tensor.device() != device) {
      e.tensor = torch::full({}, lr, torch::TensorOptions().dtype(torch::kFloat).device(device));
      e.value = lr;
    } else if (e.value != lr) {
      e.tensor.fill_(lr);
      e.value = lr;
    }
    return e.tensor;
  }
  /// Brings every group's tensor to its group's current lr (GraphReplayable::prepare_replay).
  template <class Groups>
  void refresh(Groups& groups_of_optimizer) {
    size_t g = 0;
    for (auto& group : groups_of_optimizer) {
      const size_t gi = g++;
      if (!group.params().empty()) get(gi, group.options().get_lr(), group.params().front().device());
    }
  }
};
}  // namespace detail

}  // namespace policytrain::optim
