#pragma once
/// \file
/// precision::Autocast — mixed precision: the forward under autocast (bf16 or fp16, on CPU or CUDA), and dynamic
/// loss scaling with GradScaler's semantics (precision::LossScaler), by default for fp16 only. The dtype, the
/// device type and the loss scaling are run-time options; dtype fp32 turns autocast off, so one composed Trainer
/// runs fp32, bf16 and fp16 (e.g. from a command line).
///
/// Hooks (category precision):
///   around_forward  the forward (and every evaluation forward) inside an AutocastGuard; backward runs outside it.
///   transform_loss  scaling: loss * S. Otherwise: the non-finite check of precision::Fp32 (`on_nonfinite`).
///   before_step     scaling: unscales the gradients once, so the callbacks that run after the precision policy
///                   (gradient clipping) see true gradients.
///   step            scaling: skips the optimizer step when a gradient is inf/NaN. With a fused optimizer (and
///                   `device_skip`, the default) the kernel skips it on the device and step returns true; the skip
///                   joins TrainState::skipped_steps at the next flush (epoch end, fit end, checkpoint). Otherwise
///                   the flag is read on the host and step returns false when skipped: the Trainer counts it and
///                   every after_step receives stepped=false, so schedules and EMA do not advance. Unscaled: skips
///                   the step when a loss of the window was non-finite and `on_nonfinite` is skip.
///   after_step      scaling: updates the scale.
///   state_dict      the scaler's scale, growth tracker and skip count (also when scaling is off, so that a
///                   checkpoint's keys do not depend on the dtype).
/// Shows: `loss_scale()` (0 when not scaling) in callbacks::ProgressBar.
/// Requires: fp32 parameters (autocast keeps the master weights in fp32). Conflicts: any other precision policy.
/// Cost: with dtype fp32 and no scaling, the same as precision::Fp32 (one device copy of the loss per micro-batch,
/// one host read every `check_every` micro-batches; none with NonFinite::ignore). With scaling: one multiply per
/// loss, one pass over the gradients, and one read of the inf flag per step unless the optimizer is fused
/// (`device_skip`: no read per step). Example: examples/fashion_mnist (`--precision`, `--loss-scale`), tests/unit/test_precision.cpp.
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <fmt/format.h>
#include <torch/types.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/optim/fused_common.hpp>
#include <policytrain/precision/autocast_guard.hpp>
#include <policytrain/precision/fp32.hpp>
#include <policytrain/precision/loss_scaler.hpp>

namespace policytrain::precision {

/// When precision::Autocast scales the loss.
enum class LossScaling {
  automatic,  ///< for fp16 only (bf16 has fp32's exponent range and needs none)
  on,         ///< always, whatever the dtype
  off,        ///< never
};

/// The option's name: "auto", "on" or "off".
constexpr std::string_view to_string(LossScaling s) {
  switch (s) {
    case LossScaling::on: return "on";
    case LossScaling::off: return "off";
    default: return "auto";
  }
}

/// Mixed precision: the forward under autocast and dynamic loss scaling (see the file comment).
class Autocast {
 public:
  /// Category: precision (at most one per Trainer).
  static constexpr Category category = Category::precision;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "precision::Autocast";
  /// Its hooks inside the step have a device-only form for a captured step (graph_refusal says when not).
  static constexpr bool graph_safe = true;

  /// Settings of Autocast: dtype, device type, loss scaling.
  struct Options {
    /// bf16 or fp16 under autocast; fp32 (torch::kFloat) turns autocast off. Default: the device type's
    /// autocast dtype (CPU bf16, CUDA fp16), as torch.autocast.
    std::optional<c10::ScalarType> dtype{};
    /// The device type autocast applies to. Default: that of the model's parameters (the Trainer's device).
    std::optional<c10::DeviceType> device{};
    /// When the loss is scaled (default: for fp16 only).
    LossScaling loss_scaling = LossScaling::automatic;
    /// Settings of the loss scaler (initial scale, growth and backoff).
    LossScaler::Options scaler{};
    /// What a non-finite loss does when the loss is not scaled (with scaling, the scaler skips the step).
    NonFinite on_nonfinite = NonFinite::error;
    /// Under NonFinite::error without loss scaling: micro-batches between two host reads of the loss check
    /// (precision::Fp32::check_every).
    int64_t check_every = 64;
    /// Cache the low-precision casts of the weights within one forward (torch.autocast's cache_enabled).
    bool cache_enabled = true;
    /// With loss scaling and a fused optimizer (optim::FusedAdamW, FusedAdam, FusedSgd): skip a step with an
    /// inf/NaN gradient on the device, through the kernel's `found_inf` (LossScaler::step_on_device), so the step
    /// reads nothing back. Such a step is reported as stepped to every after_step (EMA updates and schedules
    /// advance, as with GradScaler and torch.optim.lr_scheduler in Python) and is counted in
    /// TrainState::skipped_steps at the next read: epoch end, fit end, before a checkpoint. false: read the flag
    /// on the host every step (the Trainer then sees stepped=false for a skipped step). Other optimizers always
    /// read the flag on the host.
    bool device_skip = true;
  };

  Autocast() : Autocast(Options{}) {}
  /// Throws std::invalid_argument for a dtype other than fp32, bf16 or fp16.
  explicit Autocast(Options o);
  /// Copied and moved as its members are, out of line: the implicit members were generated in every file that
  /// builds a Trainer with an Autocast.
  ///@{
  Autocast(const Autocast&);
  Autocast(Autocast&&) noexcept;
  Autocast& operator=(const Autocast&);
  Autocast& operator=(Autocast&&) noexcept;
  ~Autocast();
  ///@}

  /// The settings.
  const Options& options() const { return o_; }
  /// The dtype in effect (torch::kFloat when autocast is off). Known once a forward ran or fit began.
  c10::ScalarType dtype() const { return dtype_; }
  /// The device type autocast applies to (known once a forward ran or fit began).
  c10::DeviceType device_type() const { return device_; }
  /// Whether the loss is scaled (known once a forward ran or fit began).
  bool scaling() const { return scaling_; }
  /// The current loss scale, 0 when the loss is not scaled.
  double loss_scale() const { return scaling_ ? scaler_.scale_value() : 0.0; }
  /// The loss scaler (its scale, growth tracker and skip count).
  const LossScaler& scaler() const { return scaler_; }

  /// Resolves the dtype, device type and whether to scale, from the Trainer's device.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    resolve(ctx.device().type());
    check_.discard();
  }

  /// Runs `fn` (a forward) inside an AutocastGuard, unless the dtype is fp32.
  template <class Ctx, class F>
  auto around_forward(Ctx& ctx, F&& fn) {
    if (!resolved_) resolve(ctx.device().type());
    if (dtype_ == c10::ScalarType::Float) return fn();
    // A captured step runs without the cast cache, as torch.cuda.graphs requires of autocast.
    AutocastGuard guard(device_, dtype_, /*enabled=*/true, o_.cache_enabled && !ctx.capturing());
    return fn();
  }

  /// Scales the loss when scaling; otherwise checks it for non-finite values as `on_nonfinite` says.
  template <class Ctx>
  torch::Tensor transform_loss(Ctx& ctx, torch::Tensor loss) {
    if (scaling_) return scaler_.scale(loss);
    check_.every = o_.check_every;
    if (ctx.capturing()) check_.add_captured(loss, ctx.step_tensor(), o_.on_nonfinite);
    else check_.add(ctx, loss, o_.on_nonfinite);
    return loss;
  }

  /// Under step::CudaGraph: allocates the loss check's and the scaler's device counters before the capture; after
  /// a replay, records that the graph unscaled and stepped (the scale update then follows in after_step).
  ///@{
  template <class Ctx>
  void prepare_capture(Ctx& ctx) {
    check_.prepare_capture(ctx.device());
    if (scaling_) scaler_.prepare_capture(ctx.device());
  }
  template <class Ctx>
  void on_replay(Ctx&) {
    if (scaling_) scaler_.replayed();
  }
  ///@}
  /// Why this configuration cannot be captured (empty when it can): loss scaling that reads found_inf on the host
  /// (device_skip off, or an optimizer that is not fused), or a non-finite action decided on the host.
  template <class Ctx>
  std::string graph_refusal(Ctx& ctx) const {
    if (!scaling_) return detail::nonfinite_graph_refusal(name, o_.on_nonfinite);
    if (!o_.device_skip)
      return "precision::Autocast with loss scaling and device_skip = false reads found_inf on the host every step; "
             "set Options::device_skip = true under step::CudaGraph";
    if (!dynamic_cast<const optim::FusedGradScaling*>(&ctx.optimizer()))
      return "precision::Autocast with loss scaling skips a step on the device only with a fused optimizer; use "
             "optim::FusedAdamW, optim::FusedAdam or optim::FusedSgd under step::CudaGraph";
    return {};
  }

  /// Unscales the gradients once when scaling, so later callbacks see true gradients.
  template <class Ctx>
  void before_step(Ctx& ctx) {
    if (!scaling_) return;
    scaler_.unscale(ctx.optimizer());
    // Sharded gradients (ZeRO-2): each rank checked its own partition; the skip is decided on all of them.
    if constexpr (requires { ctx.gradients_sharded(); })
      if (ctx.gradients_sharded())
        scaler_.agree_found_inf([&](torch::Tensor& t) { ctx.reduce_gradient_statistic(t, GradientReduce::max); });
  }

  /// Steps the optimizer unless the scaler found a non-finite gradient, or (unscaled) a loss of the window was
  /// non-finite under NonFinite::skip / rollback; returns whether it stepped.
  template <class Ctx>
  bool step(Ctx& ctx) {
    if (scaling_) {
      if (o_.device_skip)
        if (auto* fused = dynamic_cast<optim::FusedGradScaling*>(&ctx.optimizer())) {
          scaler_.step_on_device(ctx.optimizer(), *fused);
          return true;
        }
      return scaler_.step(ctx.optimizer());
    }
    // Under data parallelism a window is skipped on every rank when any rank's loss was non-finite.
    const bool skip = o_.on_nonfinite == NonFinite::skip || o_.on_nonfinite == NonFinite::rollback;
    const bool ok = !skip || !ctx.agree_any(check_.window_bad(o_.on_nonfinite));
    if (ok) ctx.optimizer().step();
    return ok;
  }

  /// Updates the loss scale when scaling.
  template <class Ctx>
  void after_step(Ctx& ctx, bool /*stepped*/) {
    if (scaling_) scaler_.update();
  }

  /// Abandons the current window (an exception interrupted the step): the scaler's per-step state
  /// (LossScaler::discard_step) and the window's loss check are reset; the scale is unchanged.
  void discard_step() {
    scaler_.discard_step();
    check_.discard();
  }

  /// Read the pending loss check (unscaled runs; see precision::Fp32::check_every) at epoch and fit ends and
  /// before a checkpoint is written (Context::flush_checks). The steps skipped on the device (`device_skip`) join TrainState::skipped_steps at the same reads.
  ///@{
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) { flush_checks(ctx); }
  template <class Ctx>
  void on_fit_end(Ctx& ctx) { flush_checks(ctx); }
  template <class Ctx>
  void flush_checks(Ctx& ctx) {
    check_.flush(ctx, o_.on_nonfinite);
    ctx.state().skipped_steps += scaler_.collect_skips();
  }
  ///@}

  /// The scaler's scale, growth tracker and skip count (also when not scaling).
  StateDict state_dict() const { return scaler_.state_dict(); }
  /// Restores what state_dict() saved.
  void load_state_dict(const StateDict& d) { scaler_.load_state_dict(d); }

 private:
  void resolve(c10::DeviceType trainer_device);

  Options o_;
  LossScaler scaler_;
  c10::DeviceType device_ = c10::DeviceType::CPU;
  c10::ScalarType dtype_ = c10::ScalarType::Float;
  bool scaling_ = false;
  bool resolved_ = false;
  detail::LossCheck check_;
};


// The definitions: here header-only, in <policytrain/src.hpp> with separate compilation (detail/config.hpp).
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL Autocast::Autocast(const Autocast&) = default;
POLICYTRAIN_DECL Autocast::Autocast(Autocast&&) noexcept = default;
POLICYTRAIN_DECL Autocast& Autocast::operator=(const Autocast&) = default;
POLICYTRAIN_DECL Autocast& Autocast::operator=(Autocast&&) noexcept = default;
POLICYTRAIN_DECL Autocast::~Autocast() = default;
POLICYTRAIN_DECL void Autocast::resolve(c10::DeviceType trainer_device) {
  device_ = o_.device.value_or(trainer_device);
  dtype_ = o_.dtype.value_or(default_autocast_dtype(device_));
  if (dtype_ != c10::ScalarType::Float && !autocast_supports(device_, dtype_))
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::precision::Autocast",
        policytrain::detail::format("autocast on {} with dtype {} is not supported; use bf16 or fp16 on "
                                    "CPU or CUDA, or fp32 to turn autocast off",
                                    c10::DeviceTypeName(device_), c10::toString(dtype_))));
#ifndef POLICYTRAIN_WITH_CUDA
  // Without CUDA kernels an autocast scope for CUDA would silently change nothing.
  if (device_ == c10::DeviceType::CUDA && dtype_ != c10::ScalarType::Float)
    throw std::invalid_argument(
        policytrain::detail::error_message("policytrain::precision::Autocast",
                                           "device CUDA requested, but this build's LibTorch has no CUDA; "
                                           "use the CPU, or build against a CUDA LibTorch"));
#endif
  scaling_ = o_.loss_scaling == LossScaling::on ||
             (o_.loss_scaling == LossScaling::automatic && dtype_ == c10::ScalarType::Half);
  resolved_ = true;
}

POLICYTRAIN_DECL Autocast::Autocast(Options o) : o_(o), scaler_(o.scaler) {
  if (o_.dtype && *o_.dtype != c10::ScalarType::Float && *o_.dtype != c10::ScalarType::BFloat16 &&
      *o_.dtype != c10::ScalarType::Half)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::precision::Autocast",
        policytrain::detail::format("dtype {} is not supported; "
                                    "use torch::kFloat (off), torch::kBFloat16 or torch::kHalf",
                                    c10::toString(*o_.dtype))));
}
#endif

}  // namespace policytrain::precision
