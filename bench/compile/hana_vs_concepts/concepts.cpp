// Policy lookup by category, duplicate-category check and hook detection over a pack of ten policies, written as
// policytrain writes them (core/category.hpp, trainer.hpp's PickCategory, core/hooks.hpp's concepts), once per
// composition. bench/compile_cost.py --hana times this file against hana.cpp.
#include <type_traits>
#include <utility>

#include "policies.hpp"

namespace bench {
using policytrain::category_of;

template <Category C, class... Ps>
inline constexpr int count_category = ((category_of<Ps> == C ? 1 : 0) + ... + 0);

template <Category C, class Default, class... Ps>
struct PickCategory {
  static_assert(C == Category::callback || count_category<C, Ps...> <= 1, "more than one policy of a category");
  template <class P, class... Rest>
  static auto pick() {
    if constexpr (category_of<P> == C) return std::type_identity<P>{};
    else if constexpr (sizeof...(Rest) == 0) return std::type_identity<Default>{};
    else return pick<Rest...>();
  }
  using type = typename decltype(pick<Ps...>())::type;
};

template <class P, class C> concept HasOnFitBegin = requires(P& p, C& c) { p.on_fit_begin(c); };
template <class P, class C> concept HasOnEpochEnd = requires(P& p, C& c) { p.on_epoch_end(c); };
template <class P, class C> concept HasAfterStep = requires(P& p, C& c, bool s) { p.after_step(c, s); };
template <class P, class C> concept HasBeforeStep = requires(P& p, C& c) { p.before_step(c); };
template <class P, class C> concept HasShouldStep = requires(P& p, C& c) { p.should_step(c); };

template <class... Ps>
struct Composition {
  using parallel = typename PickCategory<Category::parallel, DefaultParallel, Ps...>::type;
  using accumulation = typename PickCategory<Category::accumulation, DefaultAccumulation, Ps...>::type;
  using precision = typename PickCategory<Category::precision, DefaultPrecision, Ps...>::type;
  using schedule = typename PickCategory<Category::schedule, DefaultSchedule, Ps...>::type;
  using checkpoint = typename PickCategory<Category::checkpoint, DefaultCheckpoint, Ps...>::type;
  static constexpr int hooks = (((HasOnFitBegin<Ps, Ctx> ? 1 : 0) + (HasOnEpochEnd<Ps, Ctx> ? 1 : 0) +
                                 (HasAfterStep<Ps, Ctx> ? 1 : 0) + (HasBeforeStep<Ps, Ctx> ? 1 : 0) +
                                 (HasShouldStep<Ps, Ctx> ? 1 : 0)) + ...);
};

template <int I>
using Of = Composition<ProgressBar<I>, Parallel<I>, Ema<I>, Accumulation<I>, EarlyStopping<I>, Precision<I>,
                       GradClip<I>, Schedule<I>, MetricsLog<I>, Checkpoint<I>>;

template <int I>
constexpr bool check() {
  using T = Of<I>;
  static_assert(std::is_same_v<typename T::parallel, Parallel<I>> && std::is_same_v<typename T::checkpoint, Checkpoint<I>> &&
                std::is_same_v<typename T::schedule, Schedule<I>> && std::is_same_v<typename T::precision, Precision<I>> &&
                std::is_same_v<typename T::accumulation, Accumulation<I>>);
  static_assert(T::hooks == 10);  // counted by hand from policies.hpp
  return true;
}
template <int... I>
constexpr bool all(std::integer_sequence<int, I...>) { return (check<I>() && ...); }
static_assert(all(std::make_integer_sequence<int, kCompositions>{}));
}  // namespace bench

int main() {}
