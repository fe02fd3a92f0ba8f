// The same operations as concepts.cpp with Boost.Hana: hana::find_if for the lookup by category, hana::count_if
// for the duplicate check, hana::is_valid for hook detection.
#include <type_traits>
#include <utility>

#include <boost/hana.hpp>

#include "policies.hpp"

namespace hana = boost::hana;

namespace bench {
using policytrain::category_of;

template <Category C>
constexpr auto in_category = [](auto t) {
  return hana::bool_c<category_of<typename decltype(t)::type> == C>;
};

template <Category C, class Default, class Types>
constexpr auto pick(Types types) {
  static_assert(C == Category::callback || hana::count_if(types, in_category<C>) <= hana::size_c<1>,
                "more than one policy of a category");
  return hana::find_if(types, in_category<C>).value_or(hana::type_c<Default>);
}

constexpr auto has_on_fit_begin = hana::is_valid([](auto&& p) -> decltype(p.on_fit_begin(std::declval<Ctx&>())) {});
constexpr auto has_on_epoch_end = hana::is_valid([](auto&& p) -> decltype(p.on_epoch_end(std::declval<Ctx&>())) {});
constexpr auto has_after_step = hana::is_valid([](auto&& p) -> decltype(p.after_step(std::declval<Ctx&>(), true)) {});
constexpr auto has_before_step = hana::is_valid([](auto&& p) -> decltype(p.before_step(std::declval<Ctx&>())) {});
constexpr auto has_should_step = hana::is_valid([](auto&& p) -> decltype(p.should_step(std::declval<Ctx&>())) {});

template <class... Ps>
struct Composition {
  static constexpr auto types = hana::tuple_t<Ps...>;
  using parallel = typename decltype(pick<Category::parallel, DefaultParallel>(types))::type;
  using accumulation = typename decltype(pick<Category::accumulation, DefaultAccumulation>(types))::type;
  using precision = typename decltype(pick<Category::precision, DefaultPrecision>(types))::type;
  using schedule = typename decltype(pick<Category::schedule, DefaultSchedule>(types))::type;
  using checkpoint = typename decltype(pick<Category::checkpoint, DefaultCheckpoint>(types))::type;
  static constexpr int hooks = hana::fold(types, 0, [](int n, auto t) {
    using P = typename decltype(t)::type;
    return n + (decltype(has_on_fit_begin(std::declval<P&>()))::value ? 1 : 0) +
           (decltype(has_on_epoch_end(std::declval<P&>()))::value ? 1 : 0) +
           (decltype(has_after_step(std::declval<P&>()))::value ? 1 : 0) +
           (decltype(has_before_step(std::declval<P&>()))::value ? 1 : 0) +
           (decltype(has_should_step(std::declval<P&>()))::value ? 1 : 0);
  });
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
