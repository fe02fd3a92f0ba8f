#pragma once
/// \file
/// parallel::Single — one process, one device. The default parallel policy.
/// Hooks: none. Services (core/parallel_services.hpp): every one, each the identity of one process. Cost when
/// used: nothing.
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>

namespace policytrain::parallel {

/// One process trains alone: nothing to broadcast, reduce or agree on.
struct Single {
  /// The category the policy fills and its name in logs and checkpoints.
  ///@{
  static constexpr Category category = Category::parallel;
  static constexpr std::string_view name = "parallel::Single";
  ///@}

  /// The parallel services (core/parallel_services.hpp) of one process: it is the main one, alone, agrees with
  /// itself and has nothing to reduce.
  ///@{
  bool is_main() const { return true; }
  int64_t world_size() const { return 1; }
  template <class Ctx>
  bool agree_any(Ctx&, bool b) { return b; }
  template <class Ctx>
  int64_t agree_min(Ctx&, int64_t v) { return v; }
  bool gradients_sharded() const { return false; }
  template <class Ctx>
  void reduce_gradient_statistic(Ctx&, torch::Tensor&, GradientReduce) {}
  template <class Ctx>
  void reduce_metrics(Ctx&, MetricsAccumulator&) {}
  template <class Ctx>
  void reduce_metric_states(Ctx&, const std::vector<MetricState*>&) {}
  ///@}
};

}  // namespace policytrain::parallel
