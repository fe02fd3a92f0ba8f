#pragma once
/// \file
/// optim::FusedAdamW — torch::optim::AdamW with the whole update of a param group in one fused kernel
/// (`at::_fused_adamw_`, CPU and CUDA), instead of LibTorch's loop of several ops per parameter.
/// Same options, same state layout (AdamWParamState), hence the same save/load and checkpoints as AdamW:
/// it is a drop-in replacement. Numerically it follows PyTorch's `AdamW(fused=True)`.
/// Cost: a per-parameter step counter tensor (one scalar per parameter). The implementation is shared with
/// optim::FusedAdam (fused_adam.hpp); tests/unit/test_fused_optim.cpp checks it against Python's AdamW(fused=True).
#include <policytrain/optim/fused_adam.hpp>

namespace policytrain::optim {

/// AdamW with each param group's update in one fused kernel; a drop-in replacement for torch::optim::AdamW that
/// also takes the loss scaler's grad_scale/found_inf (set_grad_scaling) so unscale, inf check and update are one pass.
class FusedAdamW : public detail::FusedAdamImpl<torch::optim::AdamW, torch::optim::AdamWOptions,
                                                torch::optim::AdamWParamState, true> {
 public:
  using FusedAdamImpl::FusedAdamImpl;
};

}  // namespace policytrain::optim
