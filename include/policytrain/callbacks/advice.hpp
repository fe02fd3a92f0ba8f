#pragma once
/// \file
/// callbacks::RunFeatures and the advice MetricsLog and Profiler print after a fit: what to try first, named by the
/// library's own options (`data::PrefetchOptions::workers`, `precision::Autocast`, ...), never by a program's
/// command-line flags, and never suggesting what the run already uses (read from the Trainer at fit begin and end:
/// the precision policy's dtype, the layout of the model's 4-d parameters, the optimizer's type).
/// Not a callback: the helpers of those that advise. Cost: nothing per step.
#include <string>
#include <vector>

#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <policytrain/core/category.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/optim/fused_common.hpp>

namespace policytrain::callbacks {

/// What a run already uses, so that advice does not suggest it.
struct RunFeatures {
  bool mixed_precision = false;  ///< the precision policy runs autocast in bf16 or fp16
  bool channels_last = false;    ///< the model's 4-d parameters are channels-last
  bool fused_optimizer = false;  ///< the optimizer is one of optim::FusedAdamW, FusedAdam, FusedSgd
  bool convolutions = false;     ///< the model has 4-d parameters (convolutions), so channels-last applies
};

/// Reads RunFeatures from a Trainer's context (the precision policy's dtype() when it has one).
template <class Ctx>
RunFeatures run_features(Ctx& ctx) {
  RunFeatures f;
  if constexpr (requires { ctx.template policy<Category::precision>().dtype(); }) {
    const auto dt = ctx.template policy<Category::precision>().dtype();
    f.mixed_precision = dt == c10::ScalarType::BFloat16 || dt == c10::ScalarType::Half;
  }
  for (const auto& p : ctx.module().parameters()) {
    if (p.dim() != 4) continue;
    f.convolutions = true;
    if (!p.is_contiguous() && p.is_contiguous(c10::MemoryFormat::ChannelsLast)) f.channels_last = true;
  }
  f.fused_optimizer = dynamic_cast<const optim::FusedGradScaling*>(&ctx.optimizer()) != nullptr;
  return f;
}

namespace advice {

/// "a, b or c".
POLICYTRAIN_DECL std::string either(const std::vector<std::string>& xs)
#if POLICYTRAIN_DEFINE
{
  std::string s;
  for (size_t i = 0; i < xs.size(); ++i) s += (i == 0 ? "" : i + 1 == xs.size() ? " or " : ", ") + xs[i];
  return s;
}
#else
;
#endif
/// For a step that waits for its data.
inline std::string data_wait() {
  return "The step waits for data: add loader workers (data::PrefetchOptions::workers) and batches in flight "
         "(data::PrefetchOptions::prefetch), or do less per sample.";
}
/// What to try for compute-bound steps, less what `f` already uses; `convolutions`: channels-last applies.
POLICYTRAIN_DECL std::string compute(const RunFeatures& f, bool convolutions)
#if POLICYTRAIN_DEFINE
{
  std::vector<std::string> t;
  if (!f.mixed_precision) t.emplace_back("mixed precision (precision::Autocast)");
  if (convolutions && !f.channels_last)
    t.emplace_back("channels-last (callbacks::PerfKnobs::Options::channels_last with "
                   "data::PrefetchOptions::channels_last)");
  t.emplace_back("a larger batch");
  return "try " + either(t);
}
#else
;
#endif
/// For an optimizer step that takes a large share of the time.
POLICYTRAIN_DECL std::string optimizer(const RunFeatures& f)
#if POLICYTRAIN_DEFINE
{
  if (f.fused_optimizer)
    return "The optimizer step is a large share, with a fused optimizer already: fewer, larger parameter tensors "
           "would help.";
  return "The optimizer step is a large share: use a fused optimizer (optim::FusedAdamW, optim::FusedAdam, "
         "optim::FusedSgd) or fewer parameter tensors.";
}
#else
;
#endif

}  // namespace advice
}  // namespace policytrain::callbacks
