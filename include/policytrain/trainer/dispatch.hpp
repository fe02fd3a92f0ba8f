#pragma once
/// \file
/// The Trainer's generic hook dispatch: every hook call goes through one of three helpers over the tuple of
/// policies (in hook order), keyed by the hook's tag (policytrain::hook::..., core/hooks.hpp):
///   - each_with<hook::H>(ps, c, f): `f(p)` for every policy p that has hook H (a fold; a policy without it costs
///     nothing);
///   - count_with<hook::H, Ps, C>() and index_with<...>(): how many policies have H, and the first that does;
///   - nest<hook::H>(ps, c, around, f): the around_* hooks nested, the first policy outermost, `f()` innermost:
///     `around(p, inner)` calls p's hook with `inner`, the rest of the nest.
/// Whether a policy "has" a hook is the hook's concept (HasOnFitBegin<P, C>, ...), looked up by tag in HasHook.
/// Part of the Trainer (docs/trainer.md, "File map"); include <policytrain/trainer.hpp>.
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <policytrain/core/hooks.hpp>

namespace policytrain::detail {

/// Whether policy P has the hook whose tag is H, called with a context of type C: the hook's concept.
template <class H, class P, class C>
struct HasHook;
template <class P, class C> struct HasHook<hook::on_fit_begin, P, C> : std::bool_constant<HasOnFitBegin<P, C>> {};
template <class P, class C> struct HasHook<hook::on_fit_end, P, C> : std::bool_constant<HasOnFitEnd<P, C>> {};
template <class P, class C> struct HasHook<hook::on_epoch_begin, P, C> : std::bool_constant<HasOnEpochBegin<P, C>> {};
template <class P, class C> struct HasHook<hook::on_epoch_end, P, C> : std::bool_constant<HasOnEpochEnd<P, C>> {};
template <class P, class C> struct HasHook<hook::around_forward, P, C> : std::bool_constant<HasAroundForward<P, C>> {};
template <class P, class C> struct HasHook<hook::transform_loss, P, C> : std::bool_constant<HasTransformLoss<P, C>> {};
template <class P, class C> struct HasHook<hook::around_backward, P, C> : std::bool_constant<HasAroundBackward<P, C>> {};
template <class P, class C> struct HasHook<hook::should_step, P, C> : std::bool_constant<HasShouldStep<P, C>> {};
template <class P, class C> struct HasHook<hook::before_step, P, C> : std::bool_constant<HasBeforeStep<P, C>> {};
template <class P, class C> struct HasHook<hook::step, P, C> : std::bool_constant<HasStep<P, C>> {};
template <class P, class C> struct HasHook<hook::around_step, P, C> : std::bool_constant<HasAroundStep<P, C>> {};
template <class P, class C> struct HasHook<hook::after_step, P, C> : std::bool_constant<HasAfterStep<P, C>> {};
template <class P, class C> struct HasHook<hook::on_step_end, P, C> : std::bool_constant<HasOnStepEnd<P, C>> {};
template <class P, class C> struct HasHook<hook::around_evaluate, P, C> : std::bool_constant<HasAroundEvaluate<P, C>> {};
template <class P, class C>
struct HasHook<hook::on_validation_end, P, C> : std::bool_constant<HasOnValidationEnd<P, C>> {};
template <class P, class C> struct HasHook<hook::flush_checks, P, C> : std::bool_constant<HasFlushChecks<P, C>> {};
template <class P, class C> struct HasHook<hook::run_step, P, C> : std::bool_constant<HasRunStep<P, C>> {};
template <class P, class C> struct HasHook<hook::prepare_capture, P, C> : std::bool_constant<HasPrepareCapture<P, C>> {};
template <class P, class C> struct HasHook<hook::on_replay, P, C> : std::bool_constant<HasOnReplay<P, C>> {};
template <class P, class C> struct HasHook<hook::graph_refusal, P, C> : std::bool_constant<HasGraphRefusal<P, C>> {};
template <class P, class C> struct HasHook<hook::before_save, P, C> : std::bool_constant<HasBeforeSave<P, C>> {};
template <class P, class C> struct HasHook<hook::after_save, P, C> : std::bool_constant<HasAfterSave<P, C>> {};
template <class P, class C>
struct HasHook<hook::before_checkpoint, P, C> : std::bool_constant<HasBeforeCheckpoint<P, C>> {};
template <class P, class C>
struct HasHook<hook::around_evaluated_weights, P, C> : std::bool_constant<HasAroundEvaluatedWeights<P, C>> {};
template <class P, class C>
struct HasHook<hook::on_weights_loaded, P, C> : std::bool_constant<HasOnWeightsLoaded<P, C>> {};

template <class H, class P, class C>
inline constexpr bool has_hook_v = HasHook<H, std::remove_cvref_t<P>, C>::value;

/// `f(p)` for every policy p of the tuple `ps` that has hook H, in the tuple's order.
template <class H, class C, class Tuple, class F>
void each_with(Tuple& ps, F&& f) {
  std::apply([&](auto&... p) {
    ([&](auto& q) {
      if constexpr (has_hook_v<H, decltype(q), C>) f(q);
    }(p), ...);
  }, ps);
}

/// How many of the tuple type's policies have hook H.
template <class H, class C, class Tuple>
constexpr int count_with() {
  return []<size_t... I>(std::index_sequence<I...>) {
    return ((has_hook_v<H, std::tuple_element_t<I, Tuple>, C> ? 1 : 0) + ... + 0);
  }(std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

/// The index of the first of the tuple type's policies that has hook H (the tuple's size when none has).
template <class H, class C, class Tuple>
constexpr size_t index_with() {
  return []<size_t... I>(std::index_sequence<I...>) {
    size_t found = sizeof...(I);
    ((found = (found == sizeof...(I) && has_hook_v<H, std::tuple_element_t<I, Tuple>, C>) ? I : found), ...);
    return found;
  }(std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

/// The around-hooks H of the policies from index I on, nested, the first outermost, around `f()`: for a policy
/// that has H, `around(p, inner)` runs (it calls p's hook with `inner`, the rest of the nest, and returns its
/// result); a policy without H is passed over. Returns what the outermost level returns (`f()`'s type when no
/// policy has H).
template <class H, class C, size_t I = 0, class Tuple, class Around, class F>
decltype(auto) nest(Tuple& ps, Around& around, F& f) {
  if constexpr (I == std::tuple_size_v<Tuple>) {
    return f();
  } else {
    auto& p = std::get<I>(ps);
    if constexpr (has_hook_v<H, decltype(p), C>)
      return around(p, [&]() -> decltype(auto) { return nest<H, C, I + 1>(ps, around, f); });
    else return nest<H, C, I + 1>(ps, around, f);
  }
}

}  // namespace policytrain::detail
