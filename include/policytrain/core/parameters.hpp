#pragma once
/// \file
/// unique_parameters / unique_named_parameters / unique_named_buffers — a module's parameters (buffers) once each.
/// LibTorch's `Module::parameters()` and `named_parameters()` list a tensor shared by two submodules (tied
/// weights, e.g. an embedding reused as the output projection) once per submodule, whereas Python's
/// `named_parameters()` drops the repeats (`remove_duplicate=True`). Anything that iterates the parameters and
/// acts on each one (a gradient norm, a scale, a swap, an all-reduce, an optimizer) must see each tensor once.
/// Identity is the TensorImpl, as Python's memo set holds the Parameter objects: two distinct parameters that view
/// one storage (a flat-parameter scheme) have distinct gradients and stay distinct. The first name is kept.
/// Cost: one hash set over the parameters per call.
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/detail/config.hpp>

namespace policytrain {

/// The module's parameters (recursively) with their dotted names, each tensor once (its first name).
POLICYTRAIN_DECL std::vector<std::pair<std::string, torch::Tensor>> unique_named_parameters(const torch::nn::Module& m)
#if POLICYTRAIN_DEFINE
{
  std::vector<std::pair<std::string, torch::Tensor>> out;
  std::unordered_set<const void*> seen;
  for (const auto& p : m.named_parameters(/*recurse=*/true))
    if (seen.insert(p.value().unsafeGetTensorImpl()).second) out.emplace_back(p.key(), p.value());
  return out;
}
#else
;
#endif

/// The module's parameters (recursively), each tensor once; pass these to an optimizer when weights are tied.
POLICYTRAIN_DECL std::vector<torch::Tensor> unique_parameters(const torch::nn::Module& m)
#if POLICYTRAIN_DEFINE
{
  std::vector<torch::Tensor> out;
  for (auto& [name, p] : unique_named_parameters(m)) out.push_back(std::move(p));
  return out;
}
#else
;
#endif

/// The module's buffers (recursively) with their dotted names, each tensor once (its first name).
POLICYTRAIN_DECL std::vector<std::pair<std::string, torch::Tensor>> unique_named_buffers(const torch::nn::Module& m)
#if POLICYTRAIN_DEFINE
{
  std::vector<std::pair<std::string, torch::Tensor>> out;
  std::unordered_set<const void*> seen;
  for (const auto& b : m.named_buffers(/*recurse=*/true))
    if (seen.insert(b.value().unsafeGetTensorImpl()).second) out.emplace_back(b.key(), b.value());
  return out;
}
#else
;
#endif

/// Removes repeated tensors (same TensorImpl) from `ts`, keeping the first of each, in order.
POLICYTRAIN_DECL std::vector<torch::Tensor> unique_tensors(std::vector<torch::Tensor> ts)
#if POLICYTRAIN_DEFINE
{
  std::unordered_set<const void*> seen;
  std::vector<torch::Tensor> out;
  out.reserve(ts.size());
  for (auto& t : ts)
    if (seen.insert(t.unsafeGetTensorImpl()).second) out.push_back(std::move(t));
  return out;
}
#else
;
#endif

namespace detail {

/// Drops every gradient the optimizer holds, as Python's `Optimizer.zero_grad(set_to_none=True)` does
/// (`p.grad = None`). LibTorch's `zero_grad(true)` first calls `detach_()` on each gradient, which throws for a
/// gradient that is a view (a c10d::Reducer bucket with gradient_as_bucket_view); resetting needs no detach.
template <class Optimizer>
void release_grads(Optimizer& opt) {
  for (auto& g : opt.param_groups())
    for (auto& p : g.params())
      if (p.grad().defined()) p.mutable_grad().reset();
}

}  // namespace detail

}  // namespace policytrain
