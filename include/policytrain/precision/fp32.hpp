#pragma once
/// \file
/// precision::Fp32 — full precision, no autocast, no loss scaling. The default precision policy.
/// Hooks: transform_loss (the non-finite check), step (skips when asked to).
/// Cost: one read of the loss per micro-batch (a device sync on CUDA; `NonFinite::ignore` removes it).
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <torch/types.h>

#include <policytrain/core/category.hpp>

namespace policytrain {

/// What to do when a micro-batch's loss is inf or NaN.
enum class NonFinite {
  error,   ///< throw NonFiniteLoss naming the epoch and step (the default: never train on garbage silently)
  skip,    ///< discard the whole accumulation window: no optimizer step, counted in TrainState::skipped_steps
  ignore,  ///< do not check (no per-step read of the loss)
  rollback,  ///< as skip; a callbacks::DivergenceRollback then restores the last good state and lowers the lr
};

/// Thrown by the precision policies when the loss is not finite and `NonFinite::error` is set.
struct NonFiniteLoss : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
/// Shared by the precision policies: checks a micro-batch's loss, returns whether the window stays good.
template <class Ctx>
bool check_loss(Ctx& ctx, const torch::Tensor& loss, NonFinite action) {
  if (action == NonFinite::ignore) return true;
  const double v = loss.detach().to(torch::kDouble).item<double>();
  if (std::isfinite(v)) return true;
  if (action == NonFinite::error)
    throw NonFiniteLoss(fmt::format(
        "policytrain: the loss is {} at epoch {}, step {} (micro-batch {} of the epoch); "
        "lower the learning rate, clip gradients, or choose NonFinite::skip to skip such steps",
        v, ctx.state().epoch, ctx.state().global_step, ctx.state().batch_in_epoch));
  return false;
}
}  // namespace detail

namespace precision {

/// Plain fp32 training.
struct Fp32 {
  /// The category the policy fills and its name in logs and checkpoints.
  ///@{
  static constexpr Category category = Category::precision;
  static constexpr std::string_view name = "precision::Fp32";
  ///@}

  /// Fails on a non-finite loss (NonFinite::error).
  Fp32() = default;
  /// Acts on a non-finite loss as `on_nonfinite` says.
  explicit Fp32(NonFinite on_nonfinite) : on_nonfinite(on_nonfinite) {}

  /// What to do when a micro-batch's loss is inf or NaN.
  NonFinite on_nonfinite = NonFinite::error;

  /// Called by the Trainer (the contract: core/hooks.hpp); not meant to be called directly.
  ///@{
  template <class Ctx>
  torch::Tensor transform_loss(Ctx& ctx, torch::Tensor loss) {
    window_ok_ = detail::check_loss(ctx, loss, on_nonfinite) && window_ok_;
    return loss;
  }

  template <class Ctx>
  bool step(Ctx& ctx) {
    // Under data parallelism a window is skipped on every rank when any rank's loss was non-finite.
    const bool ok = (on_nonfinite == NonFinite::skip || on_nonfinite == NonFinite::rollback) ? !ctx.agree_any(!window_ok_)
                                                                                 : window_ok_;
    window_ok_ = true;
    if (ok) ctx.optimizer().step();
    return ok;
  }
  ///@}

 private:
  bool window_ok_ = true;
};

}  // namespace precision
}  // namespace policytrain
