#pragma once
/// \file
/// optim::FusedAdamW — torch::optim::AdamW with the whole update of a param group in one fused kernel
/// (`at::_fused_adamw_`, CPU and CUDA), instead of LibTorch's loop of several ops per parameter.
/// Same options, same state layout (AdamWParamState), hence the same save/load and checkpoints as AdamW:
/// it is a drop-in replacement. Numerically it follows PyTorch's `AdamW(fused=True)`.
/// Cost: a per-parameter step counter tensor (one scalar per parameter).
#include <memory>
#include <unordered_map>
#include <vector>

#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_foreach_add.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>

namespace policytrain::optim {

/// AdamW with each param group's update in one fused kernel; a drop-in replacement for torch::optim::AdamW.
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  /// One AdamW step per param group with `at::_fused_adamw_`; returns the closure's loss (undefined without one).
  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    torch::Tensor loss;
    if (closure) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    for (auto& group : param_groups()) {
      const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
      std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        TORCH_CHECK(!p.grad().is_sparse(), "policytrain::optim::FusedAdamW: sparse gradients are not supported; use torch::optim::AdamW");
        auto& slot = state()[p.unsafeGetTensorImpl()];
        if (!slot) {
          auto s = std::make_unique<torch::optim::AdamWParamState>();
          s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          if (o.amsgrad()) s->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          slot = std::move(s);
        }
        auto& s = static_cast<torch::optim::AdamWParamState&>(*slot);
        // The kernel reads the step as a tensor; keep one per parameter, re-synchronised when the integer step
        // (the serialised one, e.g. after load) differs from what this object last wrote.
        auto& st = steps_[p.unsafeGetTensorImpl()];
        if (!st.tensor.defined() || st.value != s.step()) {
          st.tensor = torch::full({}, static_cast<double>(s.step()), p.options().dtype(torch::kFloat));
          st.value = s.step();
        }
        s.step(s.step() + 1);
        st.value = s.step();
        params.push_back(p);
        grads.push_back(p.grad());
        exp_avgs.push_back(s.exp_avg());
        exp_avg_sqs.push_back(s.exp_avg_sq());
        if (o.amsgrad()) max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
        steps.push_back(st.tensor);
      }
      if (params.empty()) continue;
      at::_foreach_add_(steps, 1);  // PyTorch increments before the kernel, which then uses the new step
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o.lr(), std::get<0>(o.betas()),
                        std::get<1>(o.betas()), o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false);
    }
    return loss;
  }

 private:
  struct StepTensor {
    torch::Tensor tensor;
    int64_t value = 0;
  };
  std::unordered_map<void*, StepTensor> steps_;
};

}  // namespace policytrain::optim
