#pragma once
/// \file
/// The Trainer's metric contract: the metrics a validation of the task reports (what it declares, else "loss" and
/// the built-in "accuracy"), and the checks that hold a task to it: a monitor (checkpoint::Disk's best,
/// EarlyStopping, schedule::Lr's plateau) names a reported scalar metric, a validation reports exactly what the
/// task declares, and a scalar epoch-level metric computes one value.
/// Part of the Trainer (docs/trainer.md, "File map"); include <policytrain/trainer.hpp>.
#include <algorithm>
#include <concepts>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <c10/util/StringUtil.h>
#include <torch/types.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/hooks.hpp>
#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::detail {

/// The entries of `v`, comma-separated.
POLICYTRAIN_DECL std::string joined(const std::vector<std::string>& v)
#if POLICYTRAIN_DEFINE
{
  std::string s;
  for (const auto& k : v) s += (s.empty() ? "" : ", ") + k;
  return s;
}
#else
;
#endif
/// Whether `v` holds `k`.
inline bool contains(const std::vector<std::string>& v, const std::string& k) {
  return std::find(v.begin(), v.end(), k) != v.end();
}

/// The metrics a validation of `task` reports: "loss" and the task's metric_names() when it declares them, else
/// "loss" and "accuracy" (built in for classification outputs); then the names of its epoch-level metrics.
template <class Task>
std::vector<std::string> reported_metric_names(Task& task, MetricCollection* epoch) {
  std::vector<std::string> n{"loss"};
  if constexpr (DeclaresMetrics<Task>) {
    for (auto& k : std::vector<std::string>(task.metric_names()))
      if (k != "loss") n.push_back(std::move(k));
  } else if constexpr (!DeclaresEpochMetrics<Task>) {
    n.push_back("accuracy");
  }
  if (epoch)
    for (auto& k : epoch->names())
      if (!contains(n, k)) n.push_back(std::move(k));
  return n;
}

/// Refuses, before anything is trained, a policy whose monitor (its monitored_metric()) names a metric that is
/// not among `known` (the validation's scalar metrics).
template <class Task, class Tuple>
void check_monitors(Tuple& policies, const std::vector<std::string>& known) {
  std::apply([&](auto&... p) {
    ([&]<class P>(P& q) {
      if constexpr (requires { { q.monitored_metric() } -> std::convertible_to<std::string>; }) {
        const std::string metric = q.monitored_metric();
        if (metric.empty() || contains(known, metric)) return;
        throw std::invalid_argument(error_message(
            "policytrain::Trainer",
            format("{} monitors the metric '{}', which the validation does not report; it reports: {}{}",
                   policy_name<P>(), metric, joined(known),
                   DeclaresMetrics<Task> || DeclaresEpochMetrics<Task>
                       ? " (loss, the task's metric_names() and the scalar ones of its metrics())"
                       : " (built in; a task that reports its own metrics in Prediction::metrics lists "
                         "them in `std::vector<std::string> metric_names()`)"),
            {}, "monitor one of these"));
      }
    }(p), ...);
  }, policies);
}

/// Refuses an evaluation whose metrics differ from what the task declares (`declared`: a declared metric missing,
/// or one reported but not declared), since a monitor was checked against the declaration.
template <class Task>
void check_reported(const Metrics& m, const std::vector<std::string>& declared) {
  if (m.samples == 0) return;
  if constexpr (DeclaresMetrics<Task>) {
    for (const auto& k : declared)
      if (!m.has(k) && !m.tensors.count(k))
        throw std::runtime_error(error_message(
            "policytrain::Trainer",
            format("the task declares the metric '{}' in metric_names(), but its validation reports: {}", k,
                   joined(m.names())),
            {},
            "report it in Prediction::metrics (accuracy is built in only for [batch, classes] scores with integer "
            "targets)"));
    for (const auto& [k, v] : m.extra)
      if (!contains(declared, k))
        throw std::runtime_error(error_message(
            "policytrain::Trainer",
            format("the task's validation_step reports the metric '{}' (Prediction::metrics), which its "
                   "metric_names() does not list ({})",
                   k, joined(declared)),
            {}, "add it there"));
  } else {
    for (const auto& [k, v] : m.extra)
      if (!contains(declared, k))
        throw std::runtime_error(error_message(
            "policytrain::Trainer",
            format("the task's validation_step reports the metric '{}' (Prediction::metrics) but the task declares "
                   "no metric_names()",
                   k),
            {},
            "add `std::vector<std::string> metric_names()` listing every metric it reports, so that a monitor of "
            "one is checked when fit begins"));
  }
}

/// Adds the epoch-level metrics' values (computed from their reduced states) to `m`: a scalar one as a number
/// (accuracy in its place), another (a confusion matrix) as a tensor. Throws naming a scalar metric that computed
/// several values.
POLICYTRAIN_DECL void add_epoch_metrics(Metrics& m, const MetricCollection& epoch)
#if POLICYTRAIN_DEFINE
{
  const std::vector<std::string> scalars = epoch.scalar_names();
  for (const auto& kv : epoch.compute()) {
    const std::string& name = kv.first;
    const torch::Tensor& value = kv.second;
    if (!contains(scalars, name)) m.tensors[name] = value;
    else if (value.numel() != 1)
      throw std::runtime_error(error_message(
          "policytrain::Trainer",
          format("the task's epoch-level metric '{}' computed {} values (shape {})", name, value.numel(),
                 c10::str(value.sizes())),
          {}, "a scalar metric computes one (a metric of several declares `bool scalar() const { return false; }`)"));
    else if (name == "accuracy") m.accuracy = value.item<double>();
    else m.extra[name] = value.item<double>();
  }
}
#else
;
#endif

}  // namespace policytrain::detail
