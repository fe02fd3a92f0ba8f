#pragma once
/// \file
/// The hook contract, as concepts. Every hook is optional; a policy defines the ones it needs.
///
/// | hook | when | returns |
/// |---|---|---|
/// | `on_fit_begin(ctx)`, `on_fit_end(ctx)` | once per fit | void |
/// | `on_epoch_begin(ctx)` | each epoch | void |
/// | `on_epoch_end(ctx)` | each epoch, after validation | void or bool (true = stop) |
/// | `around_forward(ctx, fn)` | each micro-batch and evaluation batch | `fn()`'s result |
/// | `transform_loss(ctx, loss)` | each micro-batch, before backward | Tensor |
/// | `around_backward(ctx, fn)` | each micro-batch | void |
/// | `should_step(ctx)` | each micro-batch, before backward | bool (false = keep accumulating) |
/// | `before_step(ctx)` | each optimizer step | void |
/// | `step(ctx)` | each optimizer step (one policy at most) | bool (false = skipped) |
/// | `around_step(ctx, fn)` | each optimizer step, around `step` (the optimizer's step) | bool (`fn()`'s, false = skipped) |
/// | `after_step(ctx, stepped)` | each optimizer step | void |
/// | `on_step_end(ctx)` | each optimizer step, after every after_step and zero_grad (the state is whole: checkpoints) | void |
/// | `around_evaluate(ctx, fn)` | each evaluation | `fn()`'s result (Metrics) |
/// | `on_validation_end(ctx, metrics)` | after each validation | void or bool (true = stop) |
/// | `state_dict()`, `load_state_dict(d)` | checkpoint save and load | StateDict / void |
/// | `before_save(ctx)`, `after_save(ctx)` | on every rank around a checkpoint's serialisation of the optimizer (Context::before_save) | void |
/// | `run_step(ctx, batch, body)` | each optimizer step, a step policy (step::CudaGraph) at most | bool (`body`'s) |
/// | `prepare_capture(ctx)` | before a step policy captures the step | void |
/// | `on_replay(ctx)` | after a step policy replayed the captured step (its hooks' host code did not run) | void |
/// | `graph_refusal(ctx)` | when a step policy begins a fit | std::string (empty: graph-safe as configured) |
///
/// Graph safety: under a step policy that captures the step (step::CudaGraph) the hooks inside the step
/// (around_forward, transform_loss, around_backward, should_step, before_step, step) run once, at capture; a replay
/// runs only the device work they launched. A policy with such hooks declares `static constexpr bool graph_safe`;
/// one that does not, composed with a capturing step policy, is a static_assert naming it.
#include <concepts>
#include <string>
#include <type_traits>

#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/state_dict.hpp>

namespace policytrain {

/// A Task owns the model and says what one training step computes.
template <class T>
concept TrainableTask = requires(T& t, const Batch& b) {
  { t.training_step(b) } -> std::convertible_to<torch::Tensor>;
  { t.module() } -> std::convertible_to<torch::nn::Module&>;
};

/// A Task that can also be evaluated.
template <class T>
concept EvaluableTask = requires(T& t, const Batch& b) {
  { t.validation_step(b) } -> std::convertible_to<Prediction>;
};

namespace detail {

template <class R>
concept VoidOrBool = std::is_void_v<R> || std::is_same_v<std::remove_cvref_t<R>, bool>;

/// Stand-ins for the callables the Trainer passes to `around_*` hooks.
struct TensorThunk { torch::Tensor operator()() const; };
struct VoidThunk { void operator()() const; };
struct MetricsThunk { Metrics operator()() const; };
struct BoolThunk { bool operator()() const; };

}  // namespace detail

// One concept per hook: "P has hook X callable with context type C".
template <class P, class C> concept HasOnFitBegin = requires(P& p, C& c) { p.on_fit_begin(c); };
template <class P, class C> concept HasOnFitEnd = requires(P& p, C& c) { p.on_fit_end(c); };
template <class P, class C> concept HasOnEpochBegin = requires(P& p, C& c) { p.on_epoch_begin(c); };
template <class P, class C> concept HasOnEpochEnd = requires(P& p, C& c) { p.on_epoch_end(c); };
template <class P, class C> concept HasAroundForward = requires(P& p, C& c, detail::TensorThunk f) { p.around_forward(c, f); };
template <class P, class C> concept HasTransformLoss = requires(P& p, C& c, torch::Tensor l) { p.transform_loss(c, l); };
template <class P, class C> concept HasAroundBackward = requires(P& p, C& c, detail::VoidThunk f) { p.around_backward(c, f); };
template <class P, class C> concept HasShouldStep = requires(P& p, C& c) { p.should_step(c); };
template <class P, class C> concept HasBeforeStep = requires(P& p, C& c) { p.before_step(c); };
template <class P, class C> concept HasStep = requires(P& p, C& c) { p.step(c); };
template <class P, class C> concept HasAroundStep = requires(P& p, C& c, detail::BoolThunk f) { p.around_step(c, f); };
/// Called on every rank before and after a checkpoint policy serialises the optimizer (Context::before_save /
/// after_save): a sharded optimizer gathers its whole state on the main rank, then lets it go.
template <class P, class C> concept HasBeforeSave = requires(P& p, C& c) { p.before_save(c); };
template <class P, class C> concept HasAfterSave = requires(P& p, C& c) { p.after_save(c); };
template <class P, class C> concept HasAfterStep = requires(P& p, C& c, bool s) { p.after_step(c, s); };
template <class P, class C> concept HasOnStepEnd = requires(P& p, C& c) { p.on_step_end(c); };
template <class P, class C> concept HasAroundEvaluate = requires(P& p, C& c, detail::MetricsThunk f) { p.around_evaluate(c, f); };
/// Reads a check a policy keeps pending on the device (precision's non-finite loss check); called through
/// Context::flush_checks by a policy about to persist the run (a checkpoint), so a deferred error surfaces first.
template <class P, class C> concept HasFlushChecks = requires(P& p, C& c) { p.flush_checks(c); };
template <class P, class C> concept HasRunStep = requires(P& p, C& c, const Batch& b, bool (*f)(const Batch&)) { { p.run_step(c, b, f) } -> std::same_as<bool>; };
template <class P, class C> concept HasPrepareCapture = requires(P& p, C& c) { p.prepare_capture(c); };
template <class P, class C> concept HasOnReplay = requires(P& p, C& c) { p.on_replay(c); };
template <class P, class C> concept HasGraphRefusal = requires(P& p, C& c) { { p.graph_refusal(c) } -> std::convertible_to<std::string>; };
/// Whether P has a hook that runs inside the optimizer step a step policy captures.
template <class P, class C>
concept InCapturedStep = HasAroundForward<P, C> || HasTransformLoss<P, C> || HasAroundBackward<P, C> ||
                         HasShouldStep<P, C> || HasBeforeStep<P, C> || HasStep<P, C> || HasAroundStep<P, C>;
/// Whether P may be composed with a capturing step policy: its own `graph_safe`, else true when none of its hooks
/// runs inside the captured step (a callback of after_step, epoch or validation hooks only).
template <class P, class C>
inline constexpr bool graph_safe_v = [] {
  if constexpr (requires { bool{P::graph_safe}; }) return P::graph_safe;
  else return !InCapturedStep<P, C>;
}();
template <class P, class C> concept HasOnValidationEnd = requires(P& p, C& c, const Metrics& m) { p.on_validation_end(c, m); };

namespace detail {

/// Compile-time checks of one policy against the hook contract. Instantiated once per policy, so the
/// compiler's "in instantiation of HookCheck<P, ...>" line names the offending policy.
template <class P, class C>
struct HookCheck {
  static_assert(!HasOnEpochEnd<P, C> || requires(P& p, C& c) { { p.on_epoch_end(c) } -> VoidOrBool; },
                "policytrain::Trainer: a policy's on_epoch_end(ctx) returns neither void nor bool; "
                "return bool (true = stop training) or void");
  static_assert(!HasOnValidationEnd<P, C> ||
                    requires(P& p, C& c, const Metrics& m) { { p.on_validation_end(c, m) } -> VoidOrBool; },
                "policytrain::Trainer: a policy's on_validation_end(ctx, metrics) returns neither void nor bool; "
                "return bool (true = stop training) or void");
  static_assert(!HasShouldStep<P, C> || requires(P& p, C& c) { { p.should_step(c) } -> std::same_as<bool>; },
                "policytrain::Trainer: a policy's should_step(ctx) must return bool (false = keep accumulating); "
                "change its return type to bool");
  static_assert(!HasStep<P, C> || requires(P& p, C& c) { { p.step(c) } -> std::same_as<bool>; },
                "policytrain::Trainer: a policy's step(ctx) must return bool (false = the step was skipped); "
                "change its return type to bool");
  static_assert(!HasAroundStep<P, C> ||
                    requires(P& p, C& c, BoolThunk f) { { p.around_step(c, f) } -> std::same_as<bool>; },
                "policytrain::Trainer: a policy's around_step(ctx, fn) must return whether the step was taken (fn()'s "
                "bool); write it as `template <class C, class F> bool around_step(C& ctx, F&& fn) { ...; return fn(); }`");
  static_assert(!HasTransformLoss<P, C> ||
                    requires(P& p, C& c, torch::Tensor l) { { p.transform_loss(c, l) } -> std::same_as<torch::Tensor>; },
                "policytrain::Trainer: a policy's transform_loss(ctx, loss) must return the new loss as torch::Tensor; "
                "change its return type to torch::Tensor");
  static_assert(!HasAroundForward<P, C> ||
                    requires(P& p, C& c, TensorThunk f) { { p.around_forward(c, f) } -> std::same_as<torch::Tensor>; },
                "policytrain::Trainer: a policy's around_forward(ctx, fn) must return what fn() returns; "
                "write it as `template <class C, class F> auto around_forward(C& ctx, F&& fn) { ...; return fn(); }`");
  static_assert(!HasAfterStep<P, C> || requires(P& p, C& c, bool s) { { p.after_step(c, s) } -> std::same_as<void>; },
                "policytrain::Trainer: a policy's after_step(ctx, stepped) must return void; change its return type");
  // Hooks declared as plain member functions, but with parameters the Trainer cannot pass.
  static_assert(!requires { &P::on_epoch_end; } || HasOnEpochEnd<P, C>,
                "policytrain::Trainer: a policy declares on_epoch_end, but it cannot be called as on_epoch_end(ctx); "
                "take the context as a template parameter: `template <class Ctx> bool on_epoch_end(Ctx& ctx)`");
  static_assert(!requires { &P::on_validation_end; } || HasOnValidationEnd<P, C>,
                "policytrain::Trainer: a policy declares on_validation_end, but it cannot be called as "
                "on_validation_end(ctx, metrics); use `template <class Ctx> bool on_validation_end(Ctx& ctx, "
                "const policytrain::Metrics& m)`");
  static_assert(!requires { &P::after_step; } || HasAfterStep<P, C>,
                "policytrain::Trainer: a policy declares after_step, but it cannot be called as after_step(ctx, stepped); "
                "use `template <class Ctx> void after_step(Ctx& ctx, bool stepped)`");
  static_assert(!Stateful<P> || requires { std::string_view{P::name}; },
                "policytrain::Trainer: a stateful policy (one with state_dict/load_state_dict) must declare "
                "`static constexpr std::string_view name`; it prefixes the policy's entries in a checkpoint");
  static constexpr bool ok = true;
};

/// Compile-time check of one policy against a step policy that captures the optimizer step (step::CudaGraph).
/// Instantiated once per policy, so the compiler's "in instantiation of GraphSafeCheck<P, ...>" line names it.
template <class P, class C>
struct GraphSafeCheck {
  static_assert(graph_safe_v<P, C>,
                "policytrain::Trainer: step::CudaGraph captures the optimizer step, but this policy has hooks inside it "
                "(around_forward, transform_loss, around_backward, should_step, before_step or step) that are not "
                "graph-safe: a replay would run none of their host code. Drop the policy or step::CudaGraph from this "
                "Trainer; a policy of your own whose hooks only launch device work declares "
                "`static constexpr bool graph_safe = true;`");
  static constexpr bool ok = true;
};

}  // namespace detail
}  // namespace policytrain
