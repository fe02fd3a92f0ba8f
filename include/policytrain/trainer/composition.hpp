#pragma once
/// \file
/// The Trainer's type-level composition: which policy fills each category (its default when none is given), the
/// callbacks' tuple, the checks that a category is given once and a callback type once, the constructor's
/// "each policy given is moved in, the others default-constructed", and what the Trainer asks of a loader's type.
/// Part of the Trainer (docs/trainer.md, "File map"); include <policytrain/trainer.hpp>.
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <tuple>
#include <type_traits>
#include <utility>

#include <policytrain/core/category.hpp>

namespace policytrain {

namespace detail {

template <Category C, class... Ps>
inline constexpr int count_category = ((category_of<Ps> == C ? 1 : 0) + ... + 0);

/// The policy of category C among Ps, or Default. Instantiated with the whole pack so that the compiler's
/// message names every policy involved.
template <Category C, class Default, class... Ps>
struct PickCategory {
  static_assert(C != Category::parallel || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one parallel policy given; keep exactly one of them "
                "(parallel::Single or parallel::DataParallel)");
  static_assert(C != Category::accumulation || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one accumulation policy given; keep exactly one accumulate:: policy");
  static_assert(C != Category::precision || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one precision policy given; keep exactly one precision:: policy "
                "(its dtype is a run-time option)");
  static_assert(C != Category::schedule || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one schedule policy given; keep exactly one schedule:: policy "
                "(warmup is an option of every schedule)");
  static_assert(C != Category::checkpoint || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one checkpoint policy given; keep exactly one checkpoint:: policy");
  template <class P, class... Rest>
  static auto pick() {
    if constexpr (category_of<P> == C) return std::type_identity<P>{};
    else if constexpr (sizeof...(Rest) == 0) return std::type_identity<Default>{};
    else return pick<Rest...>();
  }
  static auto pick_any() {
    if constexpr (sizeof...(Ps) == 0) return std::type_identity<Default>{};
    else return pick<Ps...>();
  }
  using type = typename decltype(pick_any())::type;
};

template <class T, class... Ps>
inline constexpr int count_type = ((std::is_same_v<T, Ps> ? 1 : 0) + ... + 0);

template <class... Ps>
struct UniqueCallbacks {
  static_assert(((category_of<Ps> != Category::callback || count_type<Ps, Ps...> == 1) && ...),
                "policytrain::Trainer: the same callback type is given twice; give each callback once "
                "(one callback can hold several settings)");
  static constexpr bool ok = true;
};

template <class... Ps>
using CallbackTuple = decltype(std::tuple_cat(
    std::declval<std::conditional_t<category_of<Ps> == Category::callback, std::tuple<Ps>, std::tuple<>>>()...));

template <class T, class... Args>
constexpr size_t index_of() {
  size_t i = 0, found = sizeof...(Args);
  ((found = (found == sizeof...(Args) && std::is_same_v<T, std::remove_cvref_t<Args>>) ? i : found, ++i), ...);
  return found;
}

/// The argument of type T, forwarded (moved when it was passed as an rvalue), or a default-constructed T.
template <class T, class... Args>
T take_or_default(std::tuple<Args...>& args) {
  constexpr size_t idx = index_of<T, Args...>();
  if constexpr (idx == sizeof...(Args)) return T{};
  else return T(static_cast<std::tuple_element_t<idx, std::tuple<Args...>>&&>(std::get<idx>(args)));
}

/// Tags the Trainer's private constructor, so that the public variadic one never takes its place.
struct FromTuple {};

template <class C>
int64_t size_or_unknown(C& c) {
  if constexpr (requires { { c.batches_per_epoch() } -> std::convertible_to<int64_t>; }) return c.batches_per_epoch();
  else if constexpr (requires { std::size(c); }) return static_cast<int64_t>(std::size(c));
  else return -1;
}

/// Refuses LibTorch's DataLoader passed as it is (its sampler is out of reach: no set_epoch, no mid-epoch resume,
/// and a pass left early makes its next begin() throw).
template <class Data>
constexpr bool not_a_raw_torch_loader() {
  static_assert(!requires(Data& d) { typename Data::BatchRequestType; d.join(); d.options().workers; },
                "policytrain::Trainer: a torch::data DataLoader is passed as it is, so the Trainer can neither give its "
                "sampler the epoch (set_epoch) nor resume it mid-epoch, and a pass left early makes its next begin() "
                "throw; build it with policytrain::data::from_torch(dataset, sampler, options) "
                "(<policytrain/data/from_torch.hpp>), which takes make_data_loader's arguments");
  return true;
}

}  // namespace detail

}  // namespace policytrain
