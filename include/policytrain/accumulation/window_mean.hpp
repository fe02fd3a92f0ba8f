#pragma once
/// \file
/// The exact window mean behind accumulate::Steps and accumulate::NominalBatch (see accumulation/steps.hpp),
/// the nominal-batch arithmetic, and reading/writing the weight decay of LibTorch's optimizer options.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain {

/// The weight decay of an optimizer's param group options (AdamW, Adam, SGD, RMSprop, Adagrad); throws
/// std::invalid_argument naming `who` for another options type.
inline double weight_decay_of(const torch::optim::OptimizerOptions& o, std::string_view who) {
  if (auto* p = dynamic_cast<const torch::optim::AdamWOptions*>(&o)) return p->weight_decay();
  if (auto* p = dynamic_cast<const torch::optim::AdamOptions*>(&o)) return p->weight_decay();
  if (auto* p = dynamic_cast<const torch::optim::SGDOptions*>(&o)) return p->weight_decay();
  if (auto* p = dynamic_cast<const torch::optim::RMSpropOptions*>(&o)) return p->weight_decay();
  if (auto* p = dynamic_cast<const torch::optim::AdagradOptions*>(&o)) return p->weight_decay();
  throw std::invalid_argument(policytrain::detail::error_message(
      who, policytrain::detail::format(
               "cannot read the weight decay of this optimizer's options (known: AdamW, Adam, SGD, RMSprop, Adagrad); "
               "set scale_weight_decay = false and scale it yourself")));
}

/// Sets the weight decay of an optimizer's param group options; same types as weight_decay_of.
inline void set_weight_decay(torch::optim::OptimizerOptions& o, double wd, std::string_view who) {
  if (auto* p = dynamic_cast<torch::optim::AdamWOptions*>(&o)) { p->weight_decay(wd); return; }
  if (auto* p = dynamic_cast<torch::optim::AdamOptions*>(&o)) { p->weight_decay(wd); return; }
  if (auto* p = dynamic_cast<torch::optim::SGDOptions*>(&o)) { p->weight_decay(wd); return; }
  if (auto* p = dynamic_cast<torch::optim::RMSpropOptions*>(&o)) { p->weight_decay(wd); return; }
  if (auto* p = dynamic_cast<torch::optim::AdagradOptions*>(&o)) { p->weight_decay(wd); return; }
  (void)weight_decay_of(o, who);  // throws the error naming the caller
}

namespace accumulate {

/// Python's `round` (half to even), which the Ultralytics rule uses: round(2.5) == 2.
inline int64_t round_half_even(double x) {
  const double f = std::floor(x);
  const double d = x - f;
  if (d > 0.5) return static_cast<int64_t>(f) + 1;
  if (d < 0.5) return static_cast<int64_t>(f);
  return static_cast<int64_t>(f) + (static_cast<int64_t>(f) % 2 != 0 ? 1 : 0);
}

/// Micro-batches per optimizer step for a nominal batch: max(round(nominal / batch), 1).
inline int64_t nominal_accumulate(int64_t nominal, int64_t batch) {
  if (nominal <= 0 || batch <= 0)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::accumulate::NominalBatch",
        policytrain::detail::format("nominal batch {} and micro-batch {}; both must be > 0", nominal, batch)));
  return std::max<int64_t>(round_half_even(static_cast<double>(nominal) / static_cast<double>(batch)), 1);
}

/// The factor NominalBatch applies to the weight decay: batch * accumulate / nominal.
inline double nominal_weight_decay_factor(int64_t nominal, int64_t batch) {
  return static_cast<double>(batch) * static_cast<double>(nominal_accumulate(nominal, batch)) /
         static_cast<double>(nominal);
}

namespace detail {

/// The exact window mean shared by Steps and NominalBatch (see the file comment).
class WindowMean {
 public:
  template <class Ctx>
  torch::Tensor transform_loss(Ctx& ctx, torch::Tensor loss, int64_t accumulate) {
    const auto& s = ctx.state();
    if (s.micro_step <= 1) prev_samples_ = 0;
    const int64_t n = s.window_samples - prev_samples_;
    prev_samples_ = s.window_samples;
    if (s.micro_step <= 1) expected_ = accumulate * n;
    if (accumulate == 1 || expected_ <= 0) return loss;
    return loss * (static_cast<double>(n) / static_cast<double>(expected_));
  }

  template <class Ctx>
  void before_step(Ctx& ctx) {
    const int64_t n = ctx.state().window_samples;
    if (n <= 0 || expected_ <= 0 || n == expected_) return;
    const double c = static_cast<double>(expected_) / static_cast<double>(n);
    std::vector<torch::Tensor> grads;
    for (auto& group : ctx.optimizer().param_groups())
      for (auto& p : group.params())
        if (p.grad().defined()) grads.push_back(p.mutable_grad());
    grads = unique_tensors(std::move(grads));  // a parameter listed twice has one gradient: scale it once
    if (!grads.empty()) at::_foreach_mul_(grads, c);
  }

 private:
  int64_t prev_samples_ = 0;  ///< window samples before the current micro-batch
  int64_t expected_ = 0;      ///< N̂ of the current window
};

}  // namespace detail

}  // namespace accumulate
}  // namespace policytrain
