#pragma once
/// \file
/// Policy categories. A policy declares `static constexpr policytrain::Category category = ...;`.
/// A class without that member is a callback: any number of them may be composed.
#include <string_view>

namespace policytrain {

/// The categories a Trainer composes: at most one policy of each, a default for each one absent.
enum class Category { callback, parallel, accumulation, precision, schedule, checkpoint };

/// How Context::reduce_gradient_statistic combines the ranks' parts of a statistic of sharded gradients (ZeRO-2).
enum class GradientReduce { sum, max };

/// The category of policy `P` (`Category::callback` when `P` declares none).
template <class P>
inline constexpr Category category_of = [] {
  if constexpr (requires { P::category; }) return static_cast<Category>(P::category);
  else return Category::callback;
}();

/// The name a policy gives itself in logs and summaries (`P::name`), else "unnamed".
template <class P>
constexpr std::string_view policy_name() {
  if constexpr (requires { std::string_view{P::name}; }) return P::name;
  else return "unnamed";
}

/// The name of category `c` ("parallel", "accumulation", ..., "callback").
constexpr std::string_view to_string(Category c) {
  switch (c) {
    case Category::parallel: return "parallel";
    case Category::accumulation: return "accumulation";
    case Category::precision: return "precision";
    case Category::schedule: return "schedule";
    case Category::checkpoint: return "checkpoint";
    default: return "callback";
  }
}

}  // namespace policytrain
