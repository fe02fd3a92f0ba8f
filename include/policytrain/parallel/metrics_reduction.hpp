#pragma once
/// \file
/// The reduction of an evaluation's metrics over the ranks of a parallel::ProcessGroup: the loss, sample count,
/// confusion matrix and the task's own metrics (reduce_metrics), and the states of the task's epoch-level metrics
/// (reduce_metric_states). Pieces of the parallel policies' services (core/parallel_services.hpp); they know no
/// Trainer. Collectives: every rank calls them at the same evaluation.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/process_group.hpp>

namespace policytrain::parallel {

/// Sums the loss, sample count, confusion matrix and the task's own metrics (Prediction::metrics) of an
/// evaluation over the ranks of `group`, in place. Every rank must report the same metric names
/// (std::runtime_error otherwise). Nothing with one process.
inline void reduce_metrics(ProcessGroup& group, MetricsAccumulator& acc) {
  if (!group.active()) return;
  auto sums = acc.sums();
  // A rank without a classification batch has no confusion matrix: take the largest class count.
  const int64_t ne = static_cast<int64_t>(sums.extra.size());
  auto kt = torch::tensor({sums.confusion.defined() ? sums.confusion.size(0) : int64_t{0}, ne, -ne}, torch::kLong);
  group.all_reduce(kt, c10d::ReduceOp::MAX, "reduction of validation metrics (class count)");
  const int64_t k = kt[0].item<int64_t>();
  if (kt[1].item<int64_t>() != -kt[2].item<int64_t>())
    throw std::runtime_error(policytrain::detail::error_message(
        "policytrain::parallel::DataParallel",
        policytrain::detail::format(
            "{}: the ranks' validations report different numbers of the task's "
            "metrics (this rank {}, between {} and {} over the ranks); every rank must evaluate at least one batch and "
            "report the same Prediction::metrics",
            group.who(), ne, -kt[2].item<int64_t>(), kt[1].item<int64_t>())));
  auto packed = torch::zeros({2 + 2 * ne + k * k}, torch::kDouble);
  packed[0] = sums.loss_sum;
  packed[1] = static_cast<double>(sums.samples);
  int64_t i = 2;
  for (const auto& [name, sc] : sums.extra) {  // by name: a std::map's order, the same on every rank
    packed[i] = sc.first;
    packed[i + ne] = static_cast<double>(sc.second);
    ++i;
  }
  if (sums.confusion.defined() && sums.confusion.size(0) == k)
    packed.slice(0, 2 + 2 * ne).copy_(sums.confusion.reshape({-1}).to(torch::kDouble));
  group.all_reduce(packed, c10d::ReduceOp::SUM, "reduction of validation metrics");
  sums.loss_sum = packed[0].item<double>();
  sums.samples = static_cast<int64_t>(std::llround(packed[1].item<double>()));
  i = 2;
  for (auto& [name, sc] : sums.extra) {
    sc.first = packed[i].item<double>();
    sc.second = static_cast<int64_t>(std::llround(packed[i + ne].item<double>()));
    ++i;
  }
  if (k > 0) sums.confusion = packed.slice(0, 2 + 2 * ne).round().to(torch::kLong).view({k, k});
  acc.set_sums(std::move(sums));
}

/// Reduces the states of the task's epoch-level metrics (MetricState::reduce: sum, max, min, or concatenation in
/// rank order) over the ranks of `group`, with policytrain::reduce_metric_states. Every rank declares the same
/// metrics. Nothing with one process.
inline void reduce_metric_states(ProcessGroup& group, const std::vector<MetricState*>& states) {
  if (!group.active()) return;
  policytrain::reduce_metric_states(states, group.rank(), group.world_size(), [&](torch::Tensor& t, Reduce op) {
    group.all_reduce(t, op == Reduce::max ? c10d::ReduceOp::MAX : op == Reduce::min ? c10d::ReduceOp::MIN : c10d::ReduceOp::SUM,
                     "reduction of the task's epoch-level metrics");
  });
}

}  // namespace policytrain::parallel
