#pragma once
/// \file
/// optim::FusedAdam — torch::optim::Adam with the whole update of a param group in one fused kernel
/// (`at::_fused_adam_`, CPU and CUDA), instead of LibTorch's loop of several ops per parameter.
/// Same options, same state layout (AdamParamState), hence the same save/load and checkpoints as Adam:
/// a drop-in replacement. Numerically it follows PyTorch's `torch.optim.Adam(fused=True)` step for step
/// (tests/unit/test_fused_optim.cpp runs both). Also the shared implementation of optim::FusedAdamW.
/// Cost: a per-parameter step counter tensor (one scalar per parameter), as in PyTorch.
#include <memory>
#include <unordered_map>
#include <vector>

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_sub.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/optim/fused_common.hpp>
#include <policytrain/optim/state_layout.hpp>

namespace policytrain::optim {
namespace detail {

/// The fused Adam step over a LibTorch Adam-family optimizer `Base` (its `Options` and `ParamState`);
/// `Decoupled`: AdamW's decoupled weight decay (`_fused_adamw_`) rather than Adam's L2 (`_fused_adam_`).
template <class Base, class Options, class ParamState, bool Decoupled>
class FusedAdamImpl : public Base, public FusedGradScaling, public GraphReplayable {
 public:
  using Base::Base;

  /// One step per param group with the fused kernel; returns the closure's loss (undefined without one).
  /// With set_grad_scaling(): the gradients are unscaled in the kernel and a set found_inf skips the step.
  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    torch::Tensor loss;
    if (closure) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    const auto& found_inf = this->found_inf();
    if (found_inf.defined()) counts_may_lag_ = true;
    size_t g = 0;
    for (auto& group : this->param_groups()) {
      const auto& o = static_cast<const Options&>(group.options());
      std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
      std::vector<std::pair<torch::Tensor, torch::Tensor>> relaid;  // (the gradient, its copy in the param's layout)
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        TORCH_CHECK(!p.grad().is_sparse(),
                    policytrain::detail::error_message(
                        Decoupled ? "policytrain::optim::FusedAdamW" : "policytrain::optim::FusedAdam",
                        "sparse gradients are not supported", {},
                        Decoupled ? "use torch::optim::AdamW" : "use torch::optim::Adam"));
        auto& slot = this->state()[p.unsafeGetTensorImpl()];
        if (!slot) {
          auto s = std::make_unique<ParamState>();
          s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          if (o.amsgrad()) s->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
          slot = std::move(s);
        }
        auto& s = static_cast<ParamState&>(*slot);
        // The kernel walks each tensor as flat memory: the moments take the parameter's layout for good (a
        // parameter converted to channels-last after they were created, or state restored from before the switch),
        // the gradient for this step (a copy, written back after the kernel, which unscales it in place).
        s.exp_avg(in_layout_of(s.exp_avg(), p));
        s.exp_avg_sq(in_layout_of(s.exp_avg_sq(), p));
        if (o.amsgrad()) s.max_exp_avg_sq(in_layout_of(s.max_exp_avg_sq(), p));
        // The kernel reads the step as a float tensor (PyTorch's dtype for fused). It is the truth; the integer
        // step of the state (the serialised one) is rebuilt from it by sync_step_counts() (save() calls it).
        // A state object this optimizer did not write (load(), a checkpoint) re-seeds the tensor from its integer.
        auto& st = steps_[p.unsafeGetTensorImpl()];
        if (!st.tensor.defined() || st.owner != &s || st.value != s.step()) {
          st.tensor = torch::full({}, static_cast<double>(s.step()), p.options().dtype(torch::kFloat));
          st.owner = &s;
        }
        s.step(s.step() + 1);  // exact without found_inf; with it, an upper bound until sync_step_counts()
        st.value = s.step();
        params.push_back(p);
        if (same_layout(p.grad(), p)) {
          grads.push_back(p.grad());
        } else {
          grads.push_back(in_layout_of(p.grad(), p));
          relaid.emplace_back(p.grad(), grads.back());
        }
        exp_avgs.push_back(s.exp_avg());
        exp_avg_sqs.push_back(s.exp_avg_sq());
        if (o.amsgrad()) max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
        steps.push_back(st.tensor);
      }
      const size_t gi = g++;
      if (params.empty()) continue;
      const auto device = params.front().device();
      const auto scale = on(this->grad_scale(), device), inf = on(found_inf, device);
      const auto& lr = lr_.get(gi, o.lr(), device);
      at::_foreach_add_(steps, 1);  // PyTorch increments before the kernel, which then uses the new step
      const auto [b1, b2] = o.betas();
      if constexpr (Decoupled) {
        if (lr.defined())
          at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, b1, b2,
                            o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, scale, inf);
        else
          at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o.lr(), b1, b2,
                            o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, scale, inf);
      } else {
        if (lr.defined())
          at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, b1, b2,
                           o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, scale, inf);
        else
          at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o.lr(), b1, b2,
                           o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false, scale, inf);
      }
      // A skipped step (found_inf = 1) takes its increment back, as torch.optim's _fused_adam does.
      if (inf) at::_foreach_sub_(steps, std::vector<torch::Tensor>(steps.size(), *inf));
      for (auto& [grad, copy] : relaid) grad.copy_(copy);
    }
    return loss;
  }

  /// Writes the true step counts (the device counters) into the states' integer `step`: one host read per
  /// parameter, and only when a found_inf was used since the last sync (otherwise they are exact already).
  void sync_step_counts() {
    if (!counts_may_lag_) return;
    for (auto& [key, st] : steps_) {
      auto it = this->state().find(key);
      if (it == this->state().end() || it->second.get() != st.owner || !st.tensor.defined()) continue;
      auto& s = static_cast<ParamState&>(*it->second);
      s.step(static_cast<int64_t>(st.tensor.template item<float>()));
      st.value = s.step();
    }
    counts_may_lag_ = false;
  }

  /// GraphReplayable: the lr tensors follow the groups' lr; after a replay the integer step counts lag the
  /// device counters until sync_step_counts() (save() calls it).
  ///@{
  void prepare_replay() override { lr_.refresh(this->param_groups()); }
  void replayed() override { counts_may_lag_ = true; }
  ///@}

  /// Optimizer::save with exact step counts (see sync_step_counts()).
  void save(torch::serialize::OutputArchive& archive) const override {
    const_cast<FusedAdamImpl*>(this)->sync_step_counts();
    Base::save(archive);
  }

 private:
  struct StepTensor {
    torch::Tensor tensor;
    const void* owner = nullptr;  // the state object the tensor belongs to
    int64_t value = 0;            // that state's integer step when this object last wrote it
  };
  std::unordered_map<void*, StepTensor> steps_;
  detail::LrTensors lr_;
  bool counts_may_lag_ = false;
};

}  // namespace detail

/// Adam with each param group's update in one fused kernel; a drop-in replacement for torch::optim::Adam that
/// also takes the loss scaler's grad_scale/found_inf (set_grad_scaling) so unscale, inf check and update are one pass.
class FusedAdam
    : public detail::FusedAdamImpl<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState, false> {
 public:
  using FusedAdamImpl::FusedAdamImpl;
};

}  // namespace policytrain::optim
