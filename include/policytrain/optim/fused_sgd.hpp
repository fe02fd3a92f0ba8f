#pragma once
/// \file
/// optim::FusedSgd — torch::optim::SGD (momentum, dampening, Nesterov, weight decay) with the whole update of a
/// param group in one fused kernel (`at::_fused_sgd_`, CPU and CUDA) instead of LibTorch's loop of several ops per
/// parameter. Same options, same state layout (SGDParamState's momentum_buffer), hence the same save/load and
/// checkpoints as SGD: a drop-in replacement. Numerically it follows PyTorch's `torch.optim.SGD(fused=True)` step for
/// step (tests/unit/test_fused_optim.cpp runs both), and takes the loss scaler's grad_scale/found_inf.
///
/// One deliberate difference: PyTorch creates the momentum buffers of a first step with `torch.empty_like` and lets
/// the kernel fill them, so a first step skipped by found_inf leaves them uninitialised memory. Here they start as
/// zeros, so a skipped first step leaves them zero and the next step computes buf = (1 - dampening) * grad, which is
/// PyTorch's first-step buf = grad whenever dampening is 0 (the usual, and required by Nesterov).
#include <memory>
#include <vector>

#include <ATen/ops/_fused_sgd.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/optim/fused_common.hpp>
#include <policytrain/optim/state_layout.hpp>

namespace policytrain::optim {

/// SGD with each param group's update in one fused kernel; a drop-in replacement for torch::optim::SGD.
class FusedSgd : public torch::optim::SGD, public FusedGradScaling, public GraphReplayable {
 public:
  using torch::optim::SGD::SGD;

  /// One SGD step per param group with `at::_fused_sgd_`; returns the closure's loss (undefined without one).
  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    torch::Tensor loss;
    if (closure) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    size_t g = 0;
    for (auto& group : param_groups()) {
      const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
      const size_t gi = g++;
      // Parameters whose momentum buffer exists take the usual update; those without one (a first step) take
      // the kernel's first-step form, buf = grad: a separate call, so a group mixing both is right too.
      std::vector<torch::Tensor> params[2], grads[2], bufs[2];
      std::vector<std::pair<torch::Tensor, torch::Tensor>> relaid;  // (the gradient, its copy in the param's layout)
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        TORCH_CHECK(!p.grad().is_sparse(), policytrain::detail::error_message("policytrain::optim::FusedSgd",
                                                                              "sparse gradients are not supported", {},
                                                                              "use torch::optim::SGD"));
        int first = 0;
        if (o.momentum() != 0) {
          auto& slot = state()[p.unsafeGetTensorImpl()];
          if (!slot) {
            auto s = std::make_unique<torch::optim::SGDParamState>();
            s->momentum_buffer(torch::zeros_like(p, torch::MemoryFormat::Preserve));
            slot = std::move(s);
            first = 1;
          }
          // The kernel walks each tensor as flat memory: the buffer takes the parameter's layout for good (a
          // parameter converted to channels-last after it was created, or state restored from before the switch).
          auto& s = static_cast<torch::optim::SGDParamState&>(*slot);
          s.momentum_buffer(in_layout_of(s.momentum_buffer(), p));
          bufs[first].push_back(s.momentum_buffer());
        }
        params[first].push_back(p);
        if (same_layout(p.grad(), p)) {  // the gradient, for this step: a copy written back after the kernel
          grads[first].push_back(p.grad());
        } else {
          grads[first].push_back(in_layout_of(p.grad(), p));
          relaid.emplace_back(p.grad(), grads[first].back());
        }
      }
      for (int first : {0, 1}) {
        if (params[first].empty()) continue;
        const auto device = params[first].front().device();
        const auto scale = on(grad_scale(), device), inf = on(found_inf(), device);
        const auto& lr = lr_.get(gi, o.lr(), device);
        if (lr.defined())
          at::_fused_sgd_(params[first], grads[first], bufs[first], o.weight_decay(), o.momentum(), lr,
                          o.dampening(), o.nesterov(), /*maximize=*/false, /*is_first_step=*/first == 1, scale, inf);
        else
          at::_fused_sgd_(params[first], grads[first], bufs[first], o.weight_decay(), o.momentum(), o.lr(),
                          o.dampening(), o.nesterov(), /*maximize=*/false, /*is_first_step=*/first == 1, scale, inf);
      }
      for (auto& [grad, copy] : relaid) grad.copy_(copy);  // the kernel unscales the gradients in place
    }
    return loss;
  }

  /// GraphReplayable: the lr tensors follow the groups' lr (SGD keeps no host counter).
  ///@{
  void prepare_replay() override { lr_.refresh(param_groups()); }
  void replayed() override {}
  ///@}

 private:
  detail::LrTensors lr_;
};

}  // namespace policytrain::optim
