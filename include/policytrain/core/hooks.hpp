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
/// | `on_step_end(ctx)` | each optimizer step, after every after_step, zero_grad and the step's validation if one is due (FitOptions::val_every_steps; the state is whole: checkpoints) | void |
/// | `around_evaluate(ctx, fn)` | each evaluation | `fn()`'s result (Metrics) |
/// | `on_validation_end(ctx, metrics)` | after each validation (an epoch's end, or a step's: Context::step_validated) | void or bool (true = stop) |
/// | `around_evaluated_weights(ctx, fn)` | a checkpoint of evaluated weights (best.ckpt, best.pt): `fn()` with the weights this policy evaluates swapped in | std::string (their name; empty: the live weights) |
/// | `on_weights_loaded(ctx)` | after evaluated weights were loaded into the module (checkpoint::load_weights(trainer, file)) | void |
/// | `state_dict()`, `load_state_dict(d)` | checkpoint save and load | StateDict / void |
/// | `before_save(ctx)`, `after_save(ctx)` | on every rank around a checkpoint's serialisation of the optimizer (Context::before_save) | void |
/// | `before_checkpoint(ctx, epoch_end)` | before a checkpoint policy writes a checkpoint (Context::before_checkpoint; logs flush) | void |
/// | `run_step(ctx, batch, body)` | each optimizer step, a step policy (step::CudaGraph) at most | bool (`body`'s) |
/// | `prepare_capture(ctx)` | before a step policy captures the step | void |
/// | `on_replay(ctx)` | after a step policy replayed the captured step (its hooks' host code did not run) | void |
/// | `graph_refusal(ctx)` | when a step policy begins a fit | std::string (empty: graph-safe as configured) |
///
/// Return types are checked: a hook listed as void that returns something (a `bool on_step_end` meant as "stop")
/// is a static_assert, as is any other type where bool or Tensor is asked. A policy may also list the hooks it
/// declares (`using hooks = policytrain::Hooks<policytrain::hook::on_validation_end>;`), so that a misspelt one is
/// caught: see policytrain::Hooks.
///
/// Graph safety: under a step policy that captures the step (step::CudaGraph) the hooks inside the step
/// (around_forward, transform_loss, around_backward, should_step, before_step, step) run once, at capture; a replay
/// runs only the device work they launched. A policy with such hooks declares `static constexpr bool graph_safe`;
/// one that does not, composed with a capturing step policy, is a static_assert naming it.
#include <concepts>
#include <string>
#include <type_traits>
#include <vector>

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

/// A Task that counts the tokens (or any items: pixels, frames) of a training batch, `int64_t tokens(const Batch&)
/// const`: the Trainer adds them up for every micro-batch trained (FitResult::tokens_seen, tokens/s in the logs and
/// the progress bar). A language model's is `b.x.numel()` (batch x block). Read from the batch's shape, not its
/// values, so that counting costs no device synchronisation.
template <class T>
concept DeclaresTokens = requires(const T& t, const Batch& b) {
  { t.tokens(b) } -> std::convertible_to<int64_t>;
};

/// A Task that says the FLOPs one token costs in a training step, forward and backward (`double flops_per_token()
/// const`; nanoGPT's estimate_mfu: 6N + 12 L H Q T): with FitOptions::peak_flops, the model FLOPs utilisation
/// (FitResult::mfu).
template <class T>
concept DeclaresFlopsPerToken = requires(const T& t) {
  { t.flops_per_token() } -> std::convertible_to<double>;
};

/// A Task that names the metrics its validation reports besides loss (those of Prediction::metrics, and
/// "accuracy" when it has one), so that a policy's monitor is checked when fit begins.
template <class T>
concept DeclaresMetrics = requires(T& t) {
  { t.metric_names() } -> std::convertible_to<std::vector<std::string>>;
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
/// Runs before a checkpoint policy writes a checkpoint (called through Context::before_checkpoint): a policy that
/// writes files of its own (a log) makes them hold everything up to the checkpoint's step, so that a resume from
/// it finds no gap. `epoch_end`: the checkpoint ends the epoch (it resumes at the next epoch's start).
template <class P, class C> concept HasBeforeCheckpoint = requires(P& p, C& c, bool e) { p.before_checkpoint(c, e); };
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
/// A policy that evaluates other weights than the live ones (callbacks::Ema): runs `fn` with them swapped into the
/// module, and returns their name ("" when it evaluates the live weights, e.g. switched off). A checkpoint policy
/// calls it (Context::with_evaluated_weights) to record and export the weights that scored.
template <class P, class C> concept HasAroundEvaluatedWeights = requires(P& p, C& c, detail::VoidThunk f) { { p.around_evaluated_weights(c, f) } -> std::convertible_to<std::string>; };
/// Called once evaluated weights were loaded into the module: a policy that evaluates other weights evaluates
/// the module's weights from now on (callbacks::Ema: its average becomes a copy of them).
template <class P, class C> concept HasOnWeightsLoaded = requires(P& p, C& c) { p.on_weights_loaded(c); };
template <class P, class C> concept HasOnValidationEnd = requires(P& p, C& c, const Metrics& m) { p.on_validation_end(c, m); };

namespace detail {

// --- Which members a policy declares, by name -------------------------------------------------------------------
// C++20 cannot ask "does P declare a member named X" of a member template or an overload set (`&P::X` is ill-formed
// for both), so a probe derives from P and from a class holding one `int X` per name: `&NameProbe<P>::X` is then
// ambiguous (ill-formed) exactly when P declares X too, whatever X is in P. Data members are not functions and are
// left out; a final class cannot be derived from, so for it only a plain member function (`&P::X`) is found.

/// Every hook's name (the Trainer calls each by this name).
#define POLICYTRAIN_DETAIL_HOOK_NAMES(X)                                                                           \
  X(on_fit_begin) X(on_fit_end) X(on_epoch_begin) X(on_epoch_end) X(around_forward) X(transform_loss)              \
  X(around_backward) X(should_step) X(before_step) X(step) X(after_step) X(on_step_end) X(around_evaluate)          \
  X(on_validation_end) X(flush_checks) X(run_step) X(prepare_capture) X(on_replay) X(graph_refusal) X(state_dict)  \
  X(load_state_dict) X(around_step) X(before_save) X(after_save) X(before_checkpoint)                             \
  X(around_evaluated_weights) X(on_weights_loaded)

/// Names a policy author may write for a hook (one edit away, or another library's name for it) and the hook they
/// mean. The list is fixed: C++ cannot enumerate a class's members, so a name not listed is not caught
/// (docs/writing-a-policy.md).
#define POLICYTRAIN_DETAIL_NEAR_HOOK_NAMES(X)                                                                      \
  X(on_fit_begins, on_fit_begin) X(on_fit_began, on_fit_begin) X(on_fit_start, on_fit_begin)                       \
  X(on_fit_started, on_fit_begin) X(fit_begin, on_fit_begin) X(on_train_begin, on_fit_begin)                       \
  X(on_train_start, on_fit_begin) X(onFitBegin, on_fit_begin)                                                      \
  X(on_fit_ends, on_fit_end) X(on_fit_ended, on_fit_end) X(fit_end, on_fit_end) X(on_train_end, on_fit_end)        \
  X(onFitEnd, on_fit_end)                                                                                          \
  X(on_epoch_begins, on_epoch_begin) X(on_epoch_began, on_epoch_begin) X(on_epoch_start, on_epoch_begin)           \
  X(on_epoch_started, on_epoch_begin) X(epoch_begin, on_epoch_begin) X(on_train_epoch_start, on_epoch_begin)       \
  X(onEpochBegin, on_epoch_begin)                                                                                  \
  X(on_epoch_ends, on_epoch_end) X(on_epoch_ended, on_epoch_end) X(epoch_end, on_epoch_end)                        \
  X(on_train_epoch_end, on_epoch_end) X(onEpochEnd, on_epoch_end)                                                  \
  X(around_forwards, around_forward) X(on_forward, around_forward) X(onForward, around_forward)                    \
  X(transform_losses, transform_loss) X(transformLoss, transform_loss)                                             \
  X(around_backwards, around_backward) X(on_backward, around_backward) X(on_before_backward, around_backward)      \
  X(on_after_backward, around_backward)                                                                            \
  X(should_steps, should_step) X(shouldStep, should_step)                                                          \
  X(before_steps, before_step) X(on_step_begin, before_step) X(on_step_start, before_step)                         \
  X(on_before_optimizer_step, before_step) X(beforeStep, before_step)                                              \
  X(after_steps, after_step) X(on_after_step, after_step) X(on_batch_end, after_step)                              \
  X(on_train_batch_end, after_step) X(afterStep, after_step)                                                       \
  X(on_step_ends, on_step_end) X(on_step_ended, on_step_end) X(step_end, on_step_end) X(onStepEnd, on_step_end)    \
  X(around_evaluation, around_evaluate) X(around_eval, around_evaluate) X(around_validation, around_evaluate)      \
  X(on_validation_ends, on_validation_end) X(on_validation_ended, on_validation_end)                               \
  X(validation_end, on_validation_end) X(on_val_end, on_validation_end) X(on_validation_epoch_end, on_validation_end) \
  X(on_evaluate_end, on_validation_end) X(on_eval_end, on_validation_end) X(onValidationEnd, on_validation_end)    \
  X(flush_check, flush_checks) X(prepare_captures, prepare_capture) X(on_replays, on_replay)                        \
  X(graph_refusals, graph_refusal) X(state_dicts, state_dict) X(load_state, load_state_dict)                       \
  X(load_state_dicts, load_state_dict)

/// The signature each hook is declared with, quoted by the messages below.
#define POLICYTRAIN_DETAIL_SIG_on_fit_begin "template <class Ctx> void on_fit_begin(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_on_fit_end "template <class Ctx> void on_fit_end(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_on_epoch_begin "template <class Ctx> void on_epoch_begin(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_on_epoch_end "template <class Ctx> bool on_epoch_end(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_around_forward "template <class Ctx, class F> auto around_forward(Ctx& ctx, F&& fn)"
#define POLICYTRAIN_DETAIL_SIG_transform_loss \
  "template <class Ctx> torch::Tensor transform_loss(Ctx& ctx, torch::Tensor loss)"
#define POLICYTRAIN_DETAIL_SIG_around_backward "template <class Ctx, class F> void around_backward(Ctx& ctx, F&& fn)"
#define POLICYTRAIN_DETAIL_SIG_should_step "template <class Ctx> bool should_step(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_before_step "template <class Ctx> void before_step(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_step "template <class Ctx> bool step(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_after_step "template <class Ctx> void after_step(Ctx& ctx, bool stepped)"
#define POLICYTRAIN_DETAIL_SIG_on_step_end "template <class Ctx> void on_step_end(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_around_evaluate \
  "template <class Ctx, class F> policytrain::Metrics around_evaluate(Ctx& ctx, F&& fn)"
#define POLICYTRAIN_DETAIL_SIG_on_validation_end \
  "template <class Ctx> bool on_validation_end(Ctx& ctx, const policytrain::Metrics& m)"
#define POLICYTRAIN_DETAIL_SIG_flush_checks "template <class Ctx> void flush_checks(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_run_step \
  "template <class Ctx, class F> bool run_step(Ctx& ctx, const policytrain::Batch& b, F&& body)"
#define POLICYTRAIN_DETAIL_SIG_prepare_capture "template <class Ctx> void prepare_capture(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_on_replay "template <class Ctx> void on_replay(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_graph_refusal "template <class Ctx> std::string graph_refusal(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_state_dict \
  "policytrain::StateDict state_dict() const` and `void load_state_dict(const policytrain::StateDict& d)"
#define POLICYTRAIN_DETAIL_SIG_load_state_dict \
  "void load_state_dict(const policytrain::StateDict& d)` and `policytrain::StateDict state_dict() const"

#define POLICYTRAIN_DETAIL_SIG_around_step "template <class Ctx, class F> bool around_step(Ctx& ctx, F&& fn)"
#define POLICYTRAIN_DETAIL_SIG_before_save "template <class Ctx> void before_save(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_after_save "template <class Ctx> void after_save(Ctx& ctx)"
#define POLICYTRAIN_DETAIL_SIG_before_checkpoint "template <class Ctx> void before_checkpoint(Ctx& ctx, bool epoch_end)"
#define POLICYTRAIN_DETAIL_SIG_around_evaluated_weights \
  "template <class Ctx, class F> std::string around_evaluated_weights(Ctx& ctx, F&& fn)"
#define POLICYTRAIN_DETAIL_SIG_on_weights_loaded "template <class Ctx> void on_weights_loaded(Ctx& ctx)"

#define POLICYTRAIN_DETAIL_MEMBER(name) int name;
#define POLICYTRAIN_DETAIL_NEAR_MEMBER(near, hook) int near;
/// One member per name the probes look for.
struct HookNames {
  POLICYTRAIN_DETAIL_HOOK_NAMES(POLICYTRAIN_DETAIL_MEMBER)
  POLICYTRAIN_DETAIL_NEAR_HOOK_NAMES(POLICYTRAIN_DETAIL_NEAR_MEMBER)
};
#undef POLICYTRAIN_DETAIL_MEMBER
#undef POLICYTRAIN_DETAIL_NEAR_MEMBER

/// Derives from the policy and HookNames: a name both declare is ambiguous in it.
template <class P>
struct NameProbe : P, HookNames {};

/// `&P::x` of a data member: a pointer to a member object (non-static) or to an object (static).
template <class T>
concept DataMemberPointer =
    std::is_member_object_pointer_v<T> || (std::is_pointer_v<T> && std::is_object_v<std::remove_pointer_t<T>>);

template <class P>
concept Probeable = std::is_class_v<P> && !std::is_final_v<P>;

#define POLICYTRAIN_DETAIL_DECLARES(name)                                                                          \
  template <class P>                                                                                               \
  concept declares_##name = ((Probeable<P> && !requires { &NameProbe<P>::name; }) ||                             \
                             (!Probeable<P> && requires { &P::name; })) &&                                         \
                            !requires { requires DataMemberPointer<decltype(&P::name)>; };
#define POLICYTRAIN_DETAIL_NEAR_DECLARES(near, hook) POLICYTRAIN_DETAIL_DECLARES(near)
POLICYTRAIN_DETAIL_HOOK_NAMES(POLICYTRAIN_DETAIL_DECLARES)
POLICYTRAIN_DETAIL_NEAR_HOOK_NAMES(POLICYTRAIN_DETAIL_NEAR_DECLARES)
#undef POLICYTRAIN_DETAIL_NEAR_DECLARES
#undef POLICYTRAIN_DETAIL_DECLARES

}  // namespace detail

/// The hooks by name, as tags for a policy's opt-in list (policytrain::Hooks); one per hook the Trainer calls.
namespace hook {
#define POLICYTRAIN_DETAIL_TAG(name) struct name {};
POLICYTRAIN_DETAIL_HOOK_NAMES(POLICYTRAIN_DETAIL_TAG)
#undef POLICYTRAIN_DETAIL_TAG
}  // namespace hook

/// A policy's list of the hooks it declares, opted into with `using hooks = policytrain::Hooks<hook::on_epoch_end,
/// hook::on_validation_end>;`. The Trainer then checks that each listed hook is declared so that it calls it, and
/// that every hook it calls is listed: a member whose name is a typo of a hook's (`on_validaton_end`) leaves the
/// listed hook undeclared and stops the build (docs/writing-a-policy.md).
template <class... Tags>
struct Hooks {};

namespace detail {
template <class T> inline constexpr bool IsHooks = false;
template <class... Tags> inline constexpr bool IsHooks<Hooks<Tags...>> = true;
/// Whether policy P opted into the hook list (declares a member type `hooks`).
template <class P> concept ListsHooks = requires { typename P::hooks; };
template <class P> struct HooksOf { using type = Hooks<>; };
template <ListsHooks P> struct HooksOf<P> { using type = typename P::hooks; };
template <class Tag, class List> inline constexpr bool listed_v = false;
template <class Tag, class... Tags> inline constexpr bool listed_v<Tag, Hooks<Tags...>> = (std::is_same_v<Tag, Tags> || ...);

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
  // The hooks whose result the Trainer drops: a `bool on_step_end` meant as "stop" would be silently ignored.
#define POLICYTRAIN_DETAIL_VOID_CHECK(hook, call, has, expr)                                                        \
  static_assert(!(has) || requires(P& p, C& c) { { expr } -> std::same_as<void>; },                              \
                "policytrain::Trainer: a policy's " call " must return void (the Trainer drops its result; to "   \
                "stop training return bool from on_epoch_end or on_validation_end); declare it `"                \
                POLICYTRAIN_DETAIL_SIG_##hook "`");
  POLICYTRAIN_DETAIL_VOID_CHECK(on_fit_begin, "on_fit_begin(ctx)", (HasOnFitBegin<P, C>), p.on_fit_begin(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(on_fit_end, "on_fit_end(ctx)", (HasOnFitEnd<P, C>), p.on_fit_end(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(on_epoch_begin, "on_epoch_begin(ctx)", (HasOnEpochBegin<P, C>), p.on_epoch_begin(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(before_step, "before_step(ctx)", (HasBeforeStep<P, C>), p.before_step(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(on_step_end, "on_step_end(ctx)", (HasOnStepEnd<P, C>), p.on_step_end(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(flush_checks, "flush_checks(ctx)", (HasFlushChecks<P, C>), p.flush_checks(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(prepare_capture, "prepare_capture(ctx)", (HasPrepareCapture<P, C>), p.prepare_capture(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(on_replay, "on_replay(ctx)", (HasOnReplay<P, C>), p.on_replay(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(before_save, "before_save(ctx)", (HasBeforeSave<P, C>), p.before_save(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(after_save, "after_save(ctx)", (HasAfterSave<P, C>), p.after_save(c))
  POLICYTRAIN_DETAIL_VOID_CHECK(before_checkpoint, "before_checkpoint(ctx, epoch_end)", (HasBeforeCheckpoint<P, C>),
                                p.before_checkpoint(c, true))
  POLICYTRAIN_DETAIL_VOID_CHECK(on_weights_loaded, "on_weights_loaded(ctx)", (HasOnWeightsLoaded<P, C>),
                                p.on_weights_loaded(c))
#undef POLICYTRAIN_DETAIL_VOID_CHECK
  // A member named like a hook (a plain function, a member template or an overload set) that the Trainer cannot
  // call with its arguments would never run: refused, naming the hook and the signature it needs.
#define POLICYTRAIN_DETAIL_CALLABLE_CHECK(hook, call, has)                                                          \
  static_assert(!declares_##hook<P> || has,                                                                     \
                "policytrain::Trainer: a policy declares " #hook ", but it cannot be called as " call            \
                ", so the Trainer would never call it; declare it `" POLICYTRAIN_DETAIL_SIG_##hook "`");
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(on_fit_begin, "on_fit_begin(ctx)", (HasOnFitBegin<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(on_fit_end, "on_fit_end(ctx)", (HasOnFitEnd<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(on_epoch_begin, "on_epoch_begin(ctx)", (HasOnEpochBegin<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(on_epoch_end, "on_epoch_end(ctx)", (HasOnEpochEnd<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(around_forward, "around_forward(ctx, fn)", (HasAroundForward<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(transform_loss, "transform_loss(ctx, loss)", (HasTransformLoss<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(around_backward, "around_backward(ctx, fn)", (HasAroundBackward<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(should_step, "should_step(ctx)", (HasShouldStep<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(before_step, "before_step(ctx)", (HasBeforeStep<P, C>))
  // `step()` without arguments is an accessor (schedule::Lr::step(): the steps it counted), not a mistaken hook.
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(step, "step(ctx)", (HasStep<P, C> || requires(P& p) { p.step(); }))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(after_step, "after_step(ctx, stepped)", (HasAfterStep<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(on_step_end, "on_step_end(ctx)", (HasOnStepEnd<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(around_evaluate, "around_evaluate(ctx, fn)", (HasAroundEvaluate<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(on_validation_end, "on_validation_end(ctx, metrics)", (HasOnValidationEnd<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(flush_checks, "flush_checks(ctx)", (HasFlushChecks<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(run_step, "run_step(ctx, batch, body) returning bool", (HasRunStep<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(prepare_capture, "prepare_capture(ctx)", (HasPrepareCapture<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(on_replay, "on_replay(ctx)", (HasOnReplay<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(graph_refusal, "graph_refusal(ctx) returning std::string", (HasGraphRefusal<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(state_dict, "state_dict() const beside load_state_dict(d)", (Stateful<P>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(load_state_dict, "load_state_dict(d) beside state_dict() const", (Stateful<P>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(around_step, "around_step(ctx, fn)", (HasAroundStep<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(before_save, "before_save(ctx)", (HasBeforeSave<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(after_save, "after_save(ctx)", (HasAfterSave<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(before_checkpoint, "before_checkpoint(ctx, epoch_end)", (HasBeforeCheckpoint<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(around_evaluated_weights, "around_evaluated_weights(ctx, fn) returning std::string",
                                    (HasAroundEvaluatedWeights<P, C>))
  POLICYTRAIN_DETAIL_CALLABLE_CHECK(on_weights_loaded, "on_weights_loaded(ctx)", (HasOnWeightsLoaded<P, C>))
#undef POLICYTRAIN_DETAIL_CALLABLE_CHECK
  // A member one edit (or one library's naming) away from a hook's name: the Trainer calls no such hook.
#define POLICYTRAIN_DETAIL_NEAR_CHECK(near, hook)                                                                  \
  static_assert(!declares_##near<P>,                                                                             \
                "policytrain::Trainer: a policy declares " #near ", which is not a hook, so the Trainer never "  \
                "calls it; did you mean " #hook "? Declare it `" POLICYTRAIN_DETAIL_SIG_##hook "`, or rename the " \
                "member if it is not meant as a hook");
  POLICYTRAIN_DETAIL_NEAR_HOOK_NAMES(POLICYTRAIN_DETAIL_NEAR_CHECK)
#undef POLICYTRAIN_DETAIL_NEAR_CHECK
  // The opt-in list (`using hooks = policytrain::Hooks<policytrain::hook::on_epoch_end, ...>`): every hook listed
  // must be declared so that the Trainer calls it (a misspelt member is then caught: on_validaton_end leaves the
  // listed on_validation_end undeclared), and every hook the Trainer calls must be listed.
  static_assert(!ListsHooks<P> || IsHooks<typename HooksOf<P>::type>,
                "policytrain::Trainer: a policy's `hooks` must be policytrain::Hooks<policytrain::hook::...>, the "
                "list of the hooks it declares; write `using hooks = policytrain::Hooks<policytrain::hook::on_epoch_end>;`");
#define POLICYTRAIN_DETAIL_LIST_CHECK(h, call, has)                                                              \
  static_assert(!ListsHooks<P> || !listed_v<policytrain::hook::h, typename HooksOf<P>::type> || (has),        \
                "policytrain::Trainer: a policy lists hook::" #h " in its `using hooks`, but declares no " #h \
                " the Trainer can call as " call " (a misspelt name?); declare it `" POLICYTRAIN_DETAIL_SIG_##h \
                "`, or take hook::" #h " off the list");                                                      \
  static_assert(!ListsHooks<P> || listed_v<policytrain::hook::h, typename HooksOf<P>::type> || !(has),        \
                "policytrain::Trainer: a policy declares the hook " #h " but its `using hooks` does not list "   \
                "it; add policytrain::hook::" #h " to the list");
  POLICYTRAIN_DETAIL_LIST_CHECK(on_fit_begin, "on_fit_begin(ctx)", (HasOnFitBegin<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(on_fit_end, "on_fit_end(ctx)", (HasOnFitEnd<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(on_epoch_begin, "on_epoch_begin(ctx)", (HasOnEpochBegin<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(on_epoch_end, "on_epoch_end(ctx)", (HasOnEpochEnd<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(around_forward, "around_forward(ctx, fn)", (HasAroundForward<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(transform_loss, "transform_loss(ctx, loss)", (HasTransformLoss<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(around_backward, "around_backward(ctx, fn)", (HasAroundBackward<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(should_step, "should_step(ctx)", (HasShouldStep<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(before_step, "before_step(ctx)", (HasBeforeStep<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(step, "step(ctx)", (HasStep<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(after_step, "after_step(ctx, stepped)", (HasAfterStep<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(on_step_end, "on_step_end(ctx)", (HasOnStepEnd<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(around_evaluate, "around_evaluate(ctx, fn)", (HasAroundEvaluate<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(on_validation_end, "on_validation_end(ctx, metrics)", (HasOnValidationEnd<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(flush_checks, "flush_checks(ctx)", (HasFlushChecks<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(run_step, "run_step(ctx, batch, body)", (HasRunStep<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(prepare_capture, "prepare_capture(ctx)", (HasPrepareCapture<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(on_replay, "on_replay(ctx)", (HasOnReplay<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(graph_refusal, "graph_refusal(ctx)", (HasGraphRefusal<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(state_dict, "state_dict() beside load_state_dict(d)", (Stateful<P>))
  POLICYTRAIN_DETAIL_LIST_CHECK(load_state_dict, "load_state_dict(d) beside state_dict()", (Stateful<P>))
  POLICYTRAIN_DETAIL_LIST_CHECK(around_step, "around_step(ctx, fn)", (HasAroundStep<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(before_save, "before_save(ctx)", (HasBeforeSave<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(after_save, "after_save(ctx)", (HasAfterSave<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(before_checkpoint, "before_checkpoint(ctx, epoch_end)", (HasBeforeCheckpoint<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(around_evaluated_weights, "around_evaluated_weights(ctx, fn)",
                                (HasAroundEvaluatedWeights<P, C>))
  POLICYTRAIN_DETAIL_LIST_CHECK(on_weights_loaded, "on_weights_loaded(ctx)", (HasOnWeightsLoaded<P, C>))
#undef POLICYTRAIN_DETAIL_LIST_CHECK
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

#undef POLICYTRAIN_DETAIL_HOOK_NAMES
#undef POLICYTRAIN_DETAIL_NEAR_HOOK_NAMES
#undef POLICYTRAIN_DETAIL_SIG_around_step
#undef POLICYTRAIN_DETAIL_SIG_before_save
#undef POLICYTRAIN_DETAIL_SIG_after_save
#undef POLICYTRAIN_DETAIL_SIG_before_checkpoint
#undef POLICYTRAIN_DETAIL_SIG_around_evaluated_weights
#undef POLICYTRAIN_DETAIL_SIG_on_weights_loaded
#undef POLICYTRAIN_DETAIL_SIG_on_fit_begin
#undef POLICYTRAIN_DETAIL_SIG_on_fit_end
#undef POLICYTRAIN_DETAIL_SIG_on_epoch_begin
#undef POLICYTRAIN_DETAIL_SIG_on_epoch_end
#undef POLICYTRAIN_DETAIL_SIG_around_forward
#undef POLICYTRAIN_DETAIL_SIG_transform_loss
#undef POLICYTRAIN_DETAIL_SIG_around_backward
#undef POLICYTRAIN_DETAIL_SIG_should_step
#undef POLICYTRAIN_DETAIL_SIG_before_step
#undef POLICYTRAIN_DETAIL_SIG_step
#undef POLICYTRAIN_DETAIL_SIG_after_step
#undef POLICYTRAIN_DETAIL_SIG_on_step_end
#undef POLICYTRAIN_DETAIL_SIG_around_evaluate
#undef POLICYTRAIN_DETAIL_SIG_on_validation_end
#undef POLICYTRAIN_DETAIL_SIG_flush_checks
#undef POLICYTRAIN_DETAIL_SIG_run_step
#undef POLICYTRAIN_DETAIL_SIG_prepare_capture
#undef POLICYTRAIN_DETAIL_SIG_on_replay
#undef POLICYTRAIN_DETAIL_SIG_graph_refusal
#undef POLICYTRAIN_DETAIL_SIG_state_dict
#undef POLICYTRAIN_DETAIL_SIG_load_state_dict

}  // namespace policytrain
