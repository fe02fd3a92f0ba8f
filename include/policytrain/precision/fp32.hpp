#pragma once
/// \file
/// precision::Fp32 — full precision, no autocast, no loss scaling. The default precision policy.
/// Hooks: transform_loss (the non-finite check), step (skips when asked to), on_epoch_end and on_fit_end (read the
/// pending check), flush_checks (before a checkpoint is written).
/// Cost: one copy of the loss into a device buffer per micro-batch; the host reads it every `check_every`
/// micro-batches (NonFinite::error, the default) or once per optimizer step (skip / rollback). No host sync per step
/// under the default.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <torch/types.h>

#include <policytrain/core/category.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain {

namespace detail {
/// Whether a policy of the Trainer already clips gradients (declares `bool clips() const`, true:
/// callbacks::GradClip).
template <class Ctx>
bool clips_gradients(Ctx& ctx) {
  bool clipping = false;
  if constexpr (requires { ctx.for_each_policy([](auto&) {}); })
    ctx.for_each_policy([&](auto& p) {
      if constexpr (requires { { p.clips() } -> std::convertible_to<bool>; }) clipping = clipping || p.clips();
    });
  return clipping;
}
/// "clip gradients (callbacks::GradClip), " for a message's list of remedies, or "" when a policy of the Trainer
/// already clips: advice never suggests what is on.
inline const char* clip_advice_for(bool clipping) { return clipping ? "" : "clip gradients (callbacks::GradClip), "; }
template <class Ctx>
std::string clip_advice(Ctx& ctx) {
  return clip_advice_for(clips_gradients(ctx));
}
}  // namespace detail

/// What to do when a micro-batch's loss is inf or NaN.
enum class NonFinite {
  error,   ///< throw NonFiniteLoss naming the epoch and step (the default: never train on garbage silently)
  skip,    ///< discard the whole accumulation window: no optimizer step, counted in TrainState::skipped_steps
  ignore,  ///< do not check (no copy or read of the loss)
  rollback,  ///< as skip; a callbacks::DivergenceRollback then restores the last good state and lowers the lr
};

/// Thrown by the precision policies when the loss is not finite and `NonFinite::error` is set.
struct NonFiniteLoss : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
/// The non-finite check of the loss, kept on the loss's device so that the step does not wait for it.
///
/// Every micro-batch's loss is copied into a device buffer (one small copy, no host read). The buffer is read
/// once per window under NonFinite::skip / rollback (the step must know), and otherwise only when it is full
/// (`every` micro-batches), at the end of an epoch and of a fit, and before a checkpoint is written
/// (`flush_checks`): under NonFinite::error the error is raised at the latest `every` micro-batches after the
/// bad loss, and names the epoch, step and micro-batch where it happened. Between the two, the optimizer keeps
/// stepping: a checkpoint is never written from such weights, because writing one flushes the check first.
class LossCheck {
 public:
  /// Micro-batches between two reads under NonFinite::error (1: read every micro-batch, as an eager check).
  int64_t every = 64;

  /// Records a micro-batch's loss; reads the buffer when it is full.
  template <class Ctx>
  void add(Ctx& ctx, const torch::Tensor& loss, NonFinite action) {
    if (action == NonFinite::ignore) return;
    torch::Tensor l = loss.detach();
    if (l.dim() != 0) l = l.sum();  // a non-finite element makes the sum non-finite
    const int64_t size = std::max<int64_t>(every, 1);
    if (!buf_.defined() || buf_.device() != l.device() || buf_.scalar_type() != l.scalar_type() || buf_.size(0) != size) {
      flush(ctx, action);
      window_bad_ = first_bad().has_value() || window_bad_;
      buf_ = torch::zeros({size}, l.options());
    }
    const auto& s = ctx.state();
    buf_.select(0, static_cast<int64_t>(where_.size())).copy_(l);
    where_.push_back({s.epoch, s.global_step, s.batch_in_epoch});
    if (static_cast<int64_t>(where_.size()) == size) {
      if (action == NonFinite::error) flush(ctx, action);
      else window_bad_ = first_bad().has_value() || window_bad_;  // a window longer than the buffer
    }
  }

  /// Allocates the device flags a captured step writes (step::CudaGraph): outside the graph's memory pool, so
  /// that they outlive every replay and the host reads them at the next flush.
  void prepare_capture(const torch::Device& device) {
    if (!graph_step_.defined() || graph_step_.device() != device) {
      graph_step_ = torch::full({}, -1, torch::dtype(torch::kLong).device(device));
      graph_value_ = torch::zeros({}, torch::dtype(torch::kDouble).device(device));
    }
  }

  /// Records a micro-batch's loss inside a captured step, with device work only: the first non-finite loss and
  /// its step (`step`: the step policy's device step counter) are kept on the device until the next flush.
  void add_captured(const torch::Tensor& loss, const torch::Tensor& step, NonFinite action) {
    if (action == NonFinite::ignore) return;
    if (!graph_step_.defined() || !step.defined())
      throw std::logic_error(
          policytrain::detail::error_message("policytrain",
                                             "the loss check was captured without prepare_capture(); a step policy "
                                             "calls Context::prepare_capture() before it captures"));
    torch::Tensor l = loss.detach();
    if (l.dim() != 0) l = l.sum();
    const torch::Tensor first = l.isfinite().logical_not().logical_and(graph_step_.lt(0));
    graph_value_.copy_(torch::where(first, l.to(torch::kDouble), graph_value_));
    graph_step_.copy_(torch::where(first, step.to(torch::kLong), graph_step_));
  }

  /// Whether the window that ends now had a non-finite loss (skip / rollback: one host read; error: false,
  /// checked later).
  bool window_bad(NonFinite action) {
    if (action != NonFinite::skip && action != NonFinite::rollback) return false;
    const bool bad = first_bad().has_value() || window_bad_;
    window_bad_ = false;
    return bad;
  }

  /// Reads what is pending; under NonFinite::error throws NonFiniteLoss naming the first bad micro-batch.
  template <class Ctx>
  void flush(Ctx& ctx, NonFinite action) {
    if (action == NonFinite::error) flush_error(ctx.state().global_step, clips_gradients(ctx));
  }

  /// Forgets what is pending (an exception interrupted the step).
  void discard() {
    where_.clear();
    window_bad_ = false;
    if (graph_step_.defined()) graph_step_.fill_(-1);
  }

 private:
  struct Where {
    int64_t epoch, step, batch;
    double value = 0;
  };
  /// The first non-finite entry pending, if any; empties the buffer. One host read when anything is pending.
  std::optional<Where> first_bad();
  /// flush under NonFinite::error, at step `global_step` of a Trainer that clips gradients or not.
  void flush_error(int64_t global_step, bool clipping);

  torch::Tensor buf_;
  torch::Tensor graph_step_, graph_value_;  // the captured check's first bad step (-1: none) and its loss
  std::vector<Where> where_;
  bool window_bad_ = false;
};

// The definitions: here header-only, in <policytrain/src.hpp> with separate compilation (detail/config.hpp).
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL void LossCheck::flush_error(int64_t global_step, bool clipping) {
  auto w = first_bad();
  if (graph_step_.defined()) {
    // What the captured steps found: one host read.
    const torch::Tensor packed = torch::stack({graph_step_.to(torch::kDouble), graph_value_}).cpu();
    const auto step = static_cast<int64_t>(packed[0].item<double>());
    if (step >= 0) {
      graph_step_.fill_(-1);
      if (!w || step < w->step)
        throw NonFiniteLoss(policytrain::detail::error_message(
            "policytrain",
            policytrain::detail::format(
                "the loss is {} at step {} (a step replayed from a CUDA graph; detected at step {}: the "
                "check stays on the device and is read at epoch ends, at the fit's end and before a checkpoint is "
                "written); lower the learning rate, {}or scale the loss (precision::Autocast with LossScaling::on), "
                "which skips such steps",
                packed[1].item<double>(), step, global_step, policytrain::detail::clip_advice_for(clipping))));
    }
  }
  if (!w) return;
  throw NonFiniteLoss(policytrain::detail::error_message(
      "policytrain",
      policytrain::detail::format(
          "the loss is {} at epoch {}, step {} (micro-batch {} of the epoch; detected at step {}: the "
          "check reads the loss every {} micro-batches, at epoch ends and before a checkpoint is written); lower the "
          "learning rate, {}or choose NonFinite::skip to skip such steps",
          w->value, w->epoch, w->step, w->batch, global_step, every, policytrain::detail::clip_advice_for(clipping))));
}
POLICYTRAIN_DECL std::optional<LossCheck::Where> LossCheck::first_bad() {
  if (where_.empty()) return std::nullopt;
  const torch::Tensor b = buf_.narrow(0, 0, static_cast<int64_t>(where_.size()));
  const torch::Tensor bad = b.isfinite().logical_not();
  // argmax of the mask is its first true entry; both numbers and the value come back in one copy.
  const torch::Tensor i = bad.to(torch::kByte).argmax();
  const torch::Tensor packed =
      torch::stack({bad.any().to(torch::kDouble), i.to(torch::kDouble), b.index({i}).to(torch::kDouble)}).cpu();
  std::optional<Where> r;
  if (packed[0].item<double>() != 0) {
    r = where_.at(static_cast<size_t>(packed[1].item<double>()));
    r->value = packed[2].item<double>();
  }
  where_.clear();
  return r;
}
#endif

/// Why a precision policy acting on a non-finite loss as `action` says cannot run inside a captured step.
POLICYTRAIN_DECL std::string nonfinite_graph_refusal(std::string_view policy, NonFinite action)
#if POLICYTRAIN_DEFINE
{
  if (action != NonFinite::skip && action != NonFinite::rollback) return {};
  return policytrain::detail::format("{} with NonFinite::{} reads the loss on the host every step to decide whether to step; under "
                     "step::CudaGraph use NonFinite::error (checked on the device, raised at the next read) or "
                     "NonFinite::ignore, or loss scaling with a fused optimizer (skips on the device)",
                     policy, action == NonFinite::skip ? "skip" : "rollback");
}
#else
;
#endif
}  // namespace detail

namespace precision {

/// Plain fp32 training.
struct Fp32 {
  /// The category the policy fills and its name in logs and checkpoints.
  ///@{
  static constexpr Category category = Category::precision;
  static constexpr std::string_view name = "precision::Fp32";
  /// Its hooks inside the step (the loss check, the step) have a device-only form for a captured step.
  static constexpr bool graph_safe = true;
  ///@}

  /// Fails on a non-finite loss (NonFinite::error).
  Fp32() = default;
  /// Acts on a non-finite loss as `on_nonfinite` says.
  explicit Fp32(NonFinite on_nonfinite) : on_nonfinite(on_nonfinite) {}

  /// What to do when a micro-batch's loss is inf or NaN.
  NonFinite on_nonfinite = NonFinite::error;
  /// Under NonFinite::error, micro-batches between two host reads of the loss check (1: every micro-batch, the
  /// error at the bad step itself; larger: no device sync per step, the error at most this many micro-batches
  /// later, still naming the bad step). Also read at every epoch end, fit end and before a checkpoint is written.
  int64_t check_every = 64;

  /// Called by the Trainer (the contract: core/hooks.hpp); not meant to be called directly.
  ///@{
  template <class Ctx>
  torch::Tensor transform_loss(Ctx& ctx, torch::Tensor loss) {
    check_.every = check_every;
    if (ctx.capturing()) check_.add_captured(loss, ctx.step_tensor(), on_nonfinite);
    else check_.add(ctx, loss, on_nonfinite);
    return loss;
  }

  template <class Ctx>
  void prepare_capture(Ctx& ctx) { check_.prepare_capture(ctx.device()); }
  template <class Ctx>
  std::string graph_refusal(Ctx&) const { return detail::nonfinite_graph_refusal(name, on_nonfinite); }

  template <class Ctx>
  bool step(Ctx& ctx) {
    // Under data parallelism a window is skipped on every rank when any rank's loss was non-finite.
    const bool skip = on_nonfinite == NonFinite::skip || on_nonfinite == NonFinite::rollback;
    const bool ok = !skip || !ctx.agree_any(check_.window_bad(on_nonfinite));
    if (ok) ctx.optimizer().step();
    return ok;
  }

  template <class Ctx>
  void on_epoch_end(Ctx& ctx) { check_.flush(ctx, on_nonfinite); }
  template <class Ctx>
  void on_fit_end(Ctx& ctx) { check_.flush(ctx, on_nonfinite); }
  /// Reads the pending check (a checkpoint policy calls it through Context::flush_checks before writing).
  template <class Ctx>
  void flush_checks(Ctx& ctx) { check_.flush(ctx, on_nonfinite); }
  /// Forgets the pending check (an exception interrupted the window).
  void discard_step() { check_.discard(); }
  ///@}

 private:
  detail::LossCheck check_;
};

}  // namespace precision
}  // namespace policytrain
