#pragma once
/// \file
/// The momentum of an optimizer's options (SGD, RMSprop: momentum; Adam, AdamW: beta1), read and set by
/// schedule::Lr to ramp or cycle it. Part of <policytrain/schedule/lr.hpp>.
#include <limits>
#include <tuple>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <policytrain/detail/config.hpp>

namespace policytrain::schedule {

/// The momentum an optimizer's options use (SGD, RMSprop: momentum; Adam, AdamW: beta1); NaN for other types.
POLICYTRAIN_DECL double momentum_of(const torch::optim::OptimizerOptions& o)
#if POLICYTRAIN_DEFINE
{
  if (auto* p = dynamic_cast<const torch::optim::SGDOptions*>(&o)) return p->momentum();
  if (auto* p = dynamic_cast<const torch::optim::AdamWOptions*>(&o)) return std::get<0>(p->betas());
  if (auto* p = dynamic_cast<const torch::optim::AdamOptions*>(&o)) return std::get<0>(p->betas());
  if (auto* p = dynamic_cast<const torch::optim::RMSpropOptions*>(&o)) return p->momentum();
  return std::numeric_limits<double>::quiet_NaN();
}
#else
;
#endif
/// Sets the momentum (SGD, RMSprop) or beta1 (Adam, AdamW) of an optimizer's options; other types are left as they are.
POLICYTRAIN_DECL void set_momentum(torch::optim::OptimizerOptions& o, double m)
#if POLICYTRAIN_DEFINE
{
  if (auto* p = dynamic_cast<torch::optim::SGDOptions*>(&o)) p->momentum(m);
  else if (auto* p = dynamic_cast<torch::optim::AdamWOptions*>(&o)) p->betas({m, std::get<1>(p->betas())});
  else if (auto* p = dynamic_cast<torch::optim::AdamOptions*>(&o)) p->betas({m, std::get<1>(p->betas())});
  else if (auto* p = dynamic_cast<torch::optim::RMSpropOptions*>(&o)) p->momentum(m);
}
#else
;
#endif

}  // namespace policytrain::schedule
