#pragma once
/// \file
/// optim::same_layout, optim::in_layout_of and optim::match_state_layout — an optimizer's per-parameter state in
/// its parameter's memory layout. A parameter converted to channels-last (callbacks::PerfKnobs) after its state
/// was created, or state restored from a checkpoint written before the switch, leaves moments whose strides differ
/// from the parameter's. LibTorch's element-wise optimizers still compute the right numbers (slower, and their
/// results take mixed layouts), but a fused kernel walks every tensor of a parameter's list as flat memory and then
/// pairs the wrong elements (optim::FusedAdamW, FusedAdam, FusedSgd). The checkpoint's load and PerfKnobs's
/// conversion call match_state_layout(); the fused optimizers also check their tensors at every step.
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

namespace policytrain::optim {

/// Whether an element-wise walk over the memory of `a` and `b` meets the same elements: the same sizes and the
/// same strides on every dimension longer than 1 (a dimension of size 1 has any stride without changing the walk).
/// A sparse tensor (SGD's momentum of a sparse gradient: an embedding with sparse = true) has no strides: it counts
/// as in layout, and is left as it is (random fuzzer seed 187529: channels_last re-laid the state of a second fit and
/// met a sparse momentum, a raw c10 error).
inline bool same_layout(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.layout() != at::kStrided || b.layout() != at::kStrided) return true;
  if (a.sizes() != b.sizes()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

/// `t` itself when its layout is `like`'s (same_layout), else a copy of `t` with `like`'s strides (and `t`'s
/// dtype and device). `like` must be dense (a parameter is).
inline torch::Tensor in_layout_of(const torch::Tensor& t, const torch::Tensor& like) {
  if (!t.defined() || same_layout(t, like)) return t;
  auto out = at::empty_strided(like.sizes(), like.strides(), t.options());
  out.copy_(t);
  return out;
}

namespace detail {
/// Re-lays one state tensor (`get`/`set` of a ParamState) in `p`'s layout; true when it changed.
template <class Get, class Set>
bool relayout(const torch::Tensor& p, Get&& get, Set&& set) {
  const torch::Tensor t = get();
  if (!t.defined() || t.sizes() != p.sizes() || same_layout(t, p)) return false;
  set(in_layout_of(t, p));
  return true;
}
}  // namespace detail

/// Gives every per-parameter state tensor of `opt` whose shape is its parameter's the parameter's memory layout
/// (the state of LibTorch's Adam, AdamW, SGD, RMSprop and Adagrad, which the fused optimizers share). Values are
/// unchanged. Returns how many tensors were re-laid. A state type not listed here is left as it is.
inline int64_t match_state_layout(torch::optim::Optimizer& opt) {
  torch::NoGradGuard no_grad;
  int64_t changed = 0;
  auto fix = [&](const torch::Tensor& p, auto get, auto set) { changed += detail::relayout(p, get, set) ? 1 : 0; };
  for (auto& group : opt.param_groups()) {
    for (auto& p : group.params()) {
      auto it = opt.state().find(p.unsafeGetTensorImpl());
      if (it == opt.state().end() || !it->second) continue;
      auto* s = it->second.get();
      if (auto* a = dynamic_cast<torch::optim::AdamParamState*>(s)) {
        fix(p, [&] { return a->exp_avg(); }, [&](torch::Tensor t) { a->exp_avg(std::move(t)); });
        fix(p, [&] { return a->exp_avg_sq(); }, [&](torch::Tensor t) { a->exp_avg_sq(std::move(t)); });
        fix(p, [&] { return a->max_exp_avg_sq(); }, [&](torch::Tensor t) { a->max_exp_avg_sq(std::move(t)); });
      } else if (auto* w = dynamic_cast<torch::optim::AdamWParamState*>(s)) {
        fix(p, [&] { return w->exp_avg(); }, [&](torch::Tensor t) { w->exp_avg(std::move(t)); });
        fix(p, [&] { return w->exp_avg_sq(); }, [&](torch::Tensor t) { w->exp_avg_sq(std::move(t)); });
        fix(p, [&] { return w->max_exp_avg_sq(); }, [&](torch::Tensor t) { w->max_exp_avg_sq(std::move(t)); });
      } else if (auto* g = dynamic_cast<torch::optim::SGDParamState*>(s)) {
        fix(p, [&] { return g->momentum_buffer(); }, [&](torch::Tensor t) { g->momentum_buffer(std::move(t)); });
      } else if (auto* r = dynamic_cast<torch::optim::RMSpropParamState*>(s)) {
        fix(p, [&] { return r->square_avg(); }, [&](torch::Tensor t) { r->square_avg(std::move(t)); });
        fix(p, [&] { return r->momentum_buffer(); }, [&](torch::Tensor t) { r->momentum_buffer(std::move(t)); });
        fix(p, [&] { return r->grad_avg(); }, [&](torch::Tensor t) { r->grad_avg(std::move(t)); });
      } else if (auto* d = dynamic_cast<torch::optim::AdagradParamState*>(s)) {
        fix(p, [&] { return d->sum(); }, [&](torch::Tensor t) { d->sum(std::move(t)); });
      }
    }
  }
  return changed;
}

}  // namespace policytrain::optim
