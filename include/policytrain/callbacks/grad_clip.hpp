#pragma once
/// \file
/// callbacks::GradClip — gradient clipping by total norm (any p, including inf) or by value.
/// Hook: before_step, which the Trainer calls after the parallel and precision policies' before_step, so the
/// gradients it sees are reduced and unscaled (a precision policy unscales in its before_step).
/// By norm: total = ||(||g_1||_p, ..., ||g_n||_p)||_p (max for p = inf); every gradient is multiplied by
/// clamp(max_norm / (total + 1e-6), max = 1) — the math of torch::nn::utils::clip_grad_norm_, but without
/// reading the norm back: no host sync, so it can run inside a CUDA graph later. On CUDA
/// (POLICYTRAIN_WITH_CUDA) the norms and the multiply are foreach kernels (one launch per group); on the CPU
/// the same math runs per tensor. The total norm stays a tensor (`last_norm_tensor()`); `last_norm()` reads it.
/// By value: every gradient element clamped to [-clip_value, clip_value].
/// Tied (shared) parameters are counted once (policytrain::unique_parameters), as clip_grad_norm_ over
/// Python's deduplicated `parameters()`.
/// Turned on by its threshold: `GradClip({.max_norm = 1})` clips by norm, `GradClip({.clip_value = 0.5})` by value; a
/// threshold its mode would ignore is refused at construction. Cost when off (no threshold): one branch per step.
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#if POLICYTRAIN_DEFINE
// What the definitions below use: a translation unit that only declares them (separate compilation) parses none.
#  include <torch/optim/optimizer.h>
#endif

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace policytrain::callbacks {

namespace detail {
/// Scales `grads` in place so that the total p-norm is at most max_norm (as the overload below), with `gather`
/// turning this process's per-gradient norms (float, on the gradients' device) into the list whose p-norm is the
/// total: the identity on one process; under sharded gradients every rank's norms, in
/// the order one process would list them (parallel::ShardedDataParallel, stage 2), so the total is bit-identical
/// to the unsharded one. `grads` may then be empty on a rank that owns no gradient.
template <class Gather>
torch::Tensor clip_grad_norm_no_sync(const std::vector<torch::Tensor>& grads, double max_norm, double p, Gather&& gather,
                                     torch::Device device = torch::kCPU) {
  const bool inf = std::isinf(p);
  std::vector<torch::Tensor> norms;
#ifdef POLICYTRAIN_WITH_CUDA
  if (!grads.empty() && grads.front().is_cuda()) {
    norms = at::_foreach_norm(grads, p);
  } else
#endif
  {
    norms.reserve(grads.size());
    for (const auto& g : grads) norms.push_back(inf ? g.abs().max() : g.norm(p));
  }
  if (!grads.empty()) device = grads.front().device();
  for (auto& n : norms) n = n.to(device, torch::kFloat);
  norms = gather(norms);
  if (norms.empty()) return torch::zeros({}, torch::TensorOptions(torch::kFloat).device(device));
  auto stacked = torch::stack(norms);
  torch::Tensor total = inf ? stacked.max() : stacked.norm(p);
  auto coef = torch::clamp(max_norm / (total + 1e-6), std::nullopt, 1.0);
  if (grads.empty()) return total;
#ifdef POLICYTRAIN_WITH_CUDA
  if (grads.front().is_cuda()) {
    at::_foreach_mul_(grads, coef);
    return total;
  }
#endif
  for (const auto& g : grads) g.mul_(coef.to(g.scalar_type()));
  return total;
}

/// Scales `grads` in place so that their total p-norm is at most max_norm; returns the total norm before
/// clipping (a 0-dim tensor on the gradients' device, float32 or wider). Never synchronises with the device.
inline torch::Tensor clip_grad_norm_no_sync(const std::vector<torch::Tensor>& grads, double max_norm, double p) {
  return clip_grad_norm_no_sync(grads, max_norm, p, [](const std::vector<torch::Tensor>& norms) { return norms; });
}

}  // namespace detail

/// Clips the gradients by total norm or by value before the optimizer step (see the file comment).
class GradClip {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::GradClip";
  /// Its before_step launches device work only (the norm and the coefficient stay on the device).
  static constexpr bool graph_safe = true;
  /// How gradients are clipped: not at all, by total norm, or by value.
  enum class Mode { none, norm, value };
  /// Settings of GradClip: the mode and its limit. A threshold given turns clipping on: `{.max_norm = 0.5}` clips by
  /// norm and `{.clip_value = 0.1}` by value, with no `mode` needed; a mode given with no threshold uses 1.0.
  struct Options {
    /// Unset: norm when max_norm is given, value when clip_value is given, none (no clipping) when neither is.
    std::optional<Mode> mode{};
    std::optional<double> max_norm{};    ///< by norm: the largest total norm (1.0 when mode is norm and it is unset)
    double p = 2.0;                      ///< by norm: the norm's order (> 0, or infinity)
    std::optional<double> clip_value{};  ///< by value: elements clamped to [-clip_value, clip_value] (1.0 when unset)
  };
  GradClip() = default;
  /// Throws std::invalid_argument for a non-positive max_norm or p (mode norm) or clip_value (mode value), and for a
  /// threshold the mode would ignore (both thresholds, max_norm with mode value or none, clip_value with mode norm or
  /// none): no setting is silently dropped. options() afterwards holds the resolved mode and its threshold.
  explicit GradClip(Options o);

  /// Clips the reduced, unscaled gradients of the module's parameters.
  template <class Ctx>
  void before_step(Ctx& ctx) {
    if (mode() == Mode::none) return;
    // The work is clip()'s, which sees the context through these pieces only (compiled once with separate
    // compilation, whatever the Trainer): the module, the device, whether a graph is being captured and, under a
    // sharding parallel policy, the optimizer (stage 3: its param groups hold the shards), whether the gradients are
    // sharded or split along dim 0 (ZeRO-2), and the reduction of a statistic over the ranks.
    View view{ctx.module()};
    if constexpr (requires { ctx.device(); }) view.device = ctx.device();
    if constexpr (requires { ctx.capturing(); }) view.capturing = ctx.capturing();
    if constexpr (requires { ctx.parameters_sharded(); }) view.shards = ctx.parameters_sharded() ? &ctx.optimizer() : nullptr;
    if constexpr (requires { ctx.gradients_sharded(); }) view.sharded = mode() == Mode::norm && ctx.gradients_sharded();
    if constexpr (requires { ctx.gradients_split(); }) view.split = ctx.gradients_split();
    if constexpr (requires(torch::Tensor& t) { ctx.reduce_gradient_statistic(t, GradientReduce::sum); }) {
      view.reduce = [](void* c, torch::Tensor& t, GradientReduce op) {
        static_cast<Ctx*>(c)->reduce_gradient_statistic(t, op);
      };
      view.ctx = &ctx;
    }
    clip(view);
  }

  /// Under step::CudaGraph, after a replay: the norm of the replayed step, copied from the tensor the graph rewrote
  /// (asynchronously), so that a norm tensor kept from an earlier step keeps its value.
  template <class Ctx>
  void on_replay(Ctx&) {
    if (graph_norm_.defined()) last_norm_ = graph_norm_.clone();
  }

  /// The settings, resolved: the mode is set, and so is the threshold of the mode (the other one is unset).
  const Options& options() const { return o_; }
  /// How it clips (none for a default-constructed GradClip).
  Mode mode() const { return o_.mode.value_or(Mode::none); }
  /// Whether it clips at all (messages that would suggest clipping ask this: detail::clip_advice, precision/fp32.hpp).
  bool clips() const { return mode() != Mode::none; }
  /// Whether it clips by norm (so last_norm() is measured).
  bool clips_by_norm() const { return mode() == Mode::norm; }
  /// The total gradient norm measured at the last step (before clipping); undefined before the first.
  const torch::Tensor& last_norm_tensor() const { return last_norm_; }
  /// The same as a double (synchronises with the device); NaN when not clipping by norm.
  double last_norm() const {
    return last_norm_.defined() ? last_norm_.item<double>() : std::numeric_limits<double>::quiet_NaN();
  }
  /// The settings as JSON, for a run's summary.
  /// A template so that this header needs only <nlohmann/json_fwd.hpp>: include <nlohmann/json.hpp> to call it.
  template <class Json = nlohmann::json>
  Json describe() const {
    switch (mode()) {
      case Mode::norm: return Json{{"name", name}, {"mode", "norm"}, {"max_norm", *o_.max_norm},
                                   {"p", std::isinf(o_.p) ? Json("inf") : Json(o_.p)}};
      case Mode::value: return Json{{"name", name}, {"mode", "value"}, {"clip_value", *o_.clip_value}};
      default: return Json{{"name", name}, {"mode", "none"}};
    }
  }

 private:
  static Options resolve(Options o);
  /// What before_step's work needs of the context (see before_step).
  struct View {
    torch::nn::Module& module;
    torch::Device device = torch::kCPU;
    bool capturing = false;
    torch::optim::Optimizer* shards = nullptr;  ///< stage 3: the optimizer whose param groups are the shards
    bool sharded = false;                       ///< clipping by norm with each rank's own partition's gradients
    bool split = false;                         ///< ZeRO-2's dim-0 partition: each rank holds rows of every gradient
    void (*reduce)(void*, torch::Tensor&, GradientReduce) = nullptr;  ///< the context's reduce_gradient_statistic
    void* ctx = nullptr;                                               ///< its argument
    void reduce_statistic(torch::Tensor& t, GradientReduce op) const { reduce(ctx, t, op); }
  };
  /// before_step's work: clips the module's gradients (each tensor once), or stage 3's shards.
  void clip(const View& view);
  /// Stage 3: the gradients are the shards' (the optimizer's param groups). The total p-norm is
  /// (sum over every shard of sum |g|^p)^(1/p), the sum reduced over the ranks (the max for p = inf), as the
  /// norm of the stacked per-parameter norms is mathematically (summed in another order: within rounding).
  void clip_shards(const View& view);

  Options o_;
  torch::Tensor last_norm_;

  torch::Tensor graph_norm_;  // the captured step's norm (rewritten by every replay)
};

#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL GradClip::GradClip(Options o) : o_(resolve(o)) {
  if (o_.mode == Mode::norm && !(*o_.max_norm > 0 && o_.p > 0))
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::callbacks::GradClip",
        policytrain::detail::format("max_norm {} and p {}; expected both > 0 (p may be inf)", *o_.max_norm, o_.p)));
  if (o_.mode == Mode::value && !(*o_.clip_value > 0))
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::callbacks::GradClip",
        policytrain::detail::format("clip_value {}, expected > 0", *o_.clip_value)));
}

POLICYTRAIN_DECL GradClip::Options GradClip::resolve(Options o) {
  const char* const who = "policytrain::callbacks::GradClip";
  if (!o.mode) {
    if (o.max_norm && o.clip_value)
      throw std::invalid_argument(policytrain::detail::error_message(
          who, policytrain::detail::format("both max_norm {} and clip_value {} given", *o.max_norm, *o.clip_value),
          {}, "give one (clip by norm or by value)"));
    o.mode = o.max_norm ? Mode::norm : o.clip_value ? Mode::value : Mode::none;
  }
  if (*o.mode != Mode::norm && o.max_norm)
    throw std::invalid_argument(policytrain::detail::error_message(
        who,
        policytrain::detail::format("max_norm {} given with mode {}, which ignores it", *o.max_norm,
                                    *o.mode == Mode::none ? "none" : "value"),
        {}, "drop the mode (a max_norm alone clips by norm) or the max_norm"));
  if (*o.mode != Mode::value && o.clip_value)
    throw std::invalid_argument(policytrain::detail::error_message(
        who,
        policytrain::detail::format("clip_value {} given with mode {}, which ignores it", *o.clip_value,
                                    *o.mode == Mode::none ? "none" : "norm"),
        {}, "drop the mode (a clip_value alone clips by value) or the clip_value"));
  if (*o.mode == Mode::norm && !o.max_norm) o.max_norm = 1.0;
  if (*o.mode == Mode::value && !o.clip_value) o.clip_value = 1.0;
  return o;
}

POLICYTRAIN_DECL void GradClip::clip(const View& view) {
  if (view.shards) return clip_shards(view);
  // Each tensor once: a tied weight's gradient counts once in the norm and is scaled once.
  std::vector<torch::Tensor> grads;
  const auto params = unique_parameters(view.module);
  for (auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  const bool sharded = view.sharded;
  if (grads.empty() && !sharded) return;
  torch::NoGradGuard ng;
  if (mode() == Mode::norm && sharded) {
    // Each rank holds its own partition's gradients only: every rank's per-parameter norms, in the module's
    // order, make the same list one process would stack (a slot per parameter, and a flag for "has a gradient").
    // Under the dim-0 partition (gradients_split) each rank holds some rows of every gradient: a parameter's
    // norm is itself reduced, as the p-th root of the ranks' sums of |g|^p (the largest |g| for p = inf).
    const bool split = view.split;
    const bool inf = std::isinf(o_.p);
    last_norm_ = detail::clip_grad_norm_no_sync(grads, *o_.max_norm, o_.p, [&](const std::vector<torch::Tensor>& mine) {
      const auto n = static_cast<int64_t>(params.size());
      auto slots = torch::zeros({2, n}, torch::TensorOptions(torch::kFloat).device(view.device));
      size_t k = 0;
      for (int64_t i = 0; i < n; ++i)
        if (params[static_cast<size_t>(i)].grad().defined()) {
          slots[0][i].copy_(split && !inf ? mine[k++].pow(o_.p) : mine[k++]);
          slots[1][i].fill_(1);
        }
      if (split && inf) {
        auto largest = slots[0].clone();
        view.reduce_statistic(largest, GradientReduce::max);
        view.reduce_statistic(slots, GradientReduce::sum);
        slots[0].copy_(largest);
      } else {
        view.reduce_statistic(slots, GradientReduce::sum);
        if (split) slots[0].pow_(1.0 / o_.p);
      }
      const auto has = slots[1].gt(0).nonzero().reshape({-1});
      const auto all = slots[0].index_select(0, has);
      return all.unbind(0);
    }, view.device);
  } else if (mode() == Mode::norm) {
    last_norm_ = detail::clip_grad_norm_no_sync(grads, *o_.max_norm, o_.p);
    if (view.capturing) graph_norm_ = last_norm_;  // a graph rewrites this tensor at every replay
  } else {
    for (auto& g : grads) g.clamp_(-*o_.clip_value, *o_.clip_value);
  }
}

POLICYTRAIN_DECL void GradClip::clip_shards(const View& view) {
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> grads;
  for (auto& group : view.shards->param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) grads.push_back(p.grad());
  if (mode() == Mode::value) {
    for (auto& g : grads) g.clamp_(-*o_.clip_value, *o_.clip_value);
    return;
  }
  const bool inf = std::isinf(o_.p);
  auto total = torch::zeros({1}, torch::TensorOptions(torch::kFloat).device(view.device));
  for (auto& g : grads) {
    if (g.numel() == 0) continue;
    auto n = torch::linalg_vector_norm(g.to(torch::kFloat), o_.p).reshape({1});
    if (inf) total = torch::maximum(total, n);
    else total += n.pow(o_.p);
  }
  view.reduce_statistic(total, inf ? GradientReduce::max : GradientReduce::sum);
  last_norm_ = (inf ? total : total.pow(1.0 / o_.p)).reshape({});
  const auto coef = (*o_.max_norm / (last_norm_ + 1e-6)).clamp_max(1.0);
  for (auto& g : grads) g.mul_(coef.to(g.scalar_type()));
}
#endif

}  // namespace policytrain::callbacks
