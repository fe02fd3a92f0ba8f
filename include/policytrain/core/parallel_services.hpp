#pragma once
/// \file
/// The parallel-services contract: what the Trainer, its context and the other policies ask the parallel policy
/// (the policy of Category::parallel) for, besides its hooks. Every member is required: there is no fallback to
/// single-process behaviour, so a parallel policy of your own that misses one, or spells its signature another
/// way, is a compile error naming the member, its signature and the fix (ParallelServicesCheck, below), never a
/// run in which the ranks silently disagree.
///
/// | service | semantics | asked by |
/// |---|---|---|
/// | `bool is_main()` | whether this process logs, prints and writes files (rank 0) | Context::is_main: loggers, checkpoints |
/// | `int64_t world_size()` | the number of processes training together (1 alone) | checkpoint::Disk's fingerprint, accumulate::NominalBatch, fit_auto_batch |
/// | `bool agree_any(ctx, b)` | true on every rank when `b` is true on any rank (a collective) | Context::agree_any: stop, save, rollback decisions |
/// | `int64_t agree_min(ctx, v)` | the smallest `v` over the ranks (a collective) | accumulate::fit_auto_batch (the micro-batch), Context::agree_min: callbacks::Preemption (the signal) |
/// | `bool gradients_sharded()` | whether each rank keeps only its partition's gradients after the backward (ZeRO-2) | Context::gradients_sharded: grad clipping, loss scaling, TensorBoard's norms |
/// | `void reduce_gradient_statistic(ctx, t, op)` | reduces `t` in place (GradientReduce::sum or max) over the ranks when gradients are sharded; otherwise leaves it | Context::reduce_gradient_statistic |
/// | `void reduce_metrics(ctx, acc)` | sums an evaluation's MetricsAccumulator over the ranks, in place (a collective; `acc` by non-const reference) | Trainer::evaluate |
/// | `void reduce_metric_states(ctx, states)` | reduces the epoch-level metrics' states (policytrain::reduce_metric_states) over the ranks, in place (a collective) | Trainer::evaluate |
///
/// One signature style: a service that is a collective takes the context first (`ctx`: the Trainer's Context),
/// a query of this rank's place in the job takes nothing. A collective may be asked before fit begins (an
/// evaluation before the first fit, fit_auto_batch's agreement), so it must be able to join the job by itself,
/// on the device the context names (NCCL reduces device tensors only); the queries never communicate. Before
/// this contract `agree_any(ctx, b)` and `agree_min(v)` disagreed, and fit_auto_batch connected the process group
/// itself through members (`active()`, `connect(device)`) that only parallel::DataParallel has.
///
/// A collective must be called by every rank, in the same order; on one process each is the identity.
/// parallel::Single models the contract for one process; parallel::DataParallel and
/// parallel::ShardedDataParallel for many. A policy of your own: docs/writing-a-policy.md, "A parallel policy of
/// your own".
#include <concepts>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <torch/types.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>

namespace policytrain {

namespace detail {
/// Each service alone, so that a missing one is named by itself.
///@{
template <class P>
concept ParallelIsMain = requires(P& p) { { p.is_main() } -> std::same_as<bool>; };
template <class P>
concept ParallelWorldSize = requires(P& p) { { p.world_size() } -> std::convertible_to<int64_t>; };
template <class P, class Ctx>
concept ParallelAgreeAny = requires(P& p, Ctx& c, bool b) { { p.agree_any(c, b) } -> std::same_as<bool>; };
template <class P, class Ctx>
concept ParallelAgreeMin = requires(P& p, Ctx& c, int64_t v) { { p.agree_min(c, v) } -> std::same_as<int64_t>; };
template <class P>
concept ParallelGradientsSharded = requires(P& p) { { p.gradients_sharded() } -> std::same_as<bool>; };
template <class P, class Ctx>
concept ParallelReduceGradientStatistic = requires(P& p, Ctx& c, torch::Tensor& t, GradientReduce op) {
  { p.reduce_gradient_statistic(c, t, op) } -> std::same_as<void>;
};
template <class P, class Ctx>
concept ParallelReduceMetrics = requires(P& p, Ctx& c, MetricsAccumulator& acc) {
  { p.reduce_metrics(c, acc) } -> std::same_as<void>;
};
/// reduce_metrics reduces in place, so it must take the accumulator by non-const lvalue reference: a member taking
/// it by value (or by const reference) is callable with an lvalue as well, compiles, and reduces a copy, so every
/// rank reported its own shard. Such a member also accepts an rvalue, which a `MetricsAccumulator&` does not.
template <class P, class Ctx>
concept ParallelReduceMetricsInPlace = !requires(P& p, Ctx& c, MetricsAccumulator&& acc) {
  p.reduce_metrics(c, static_cast<MetricsAccumulator&&>(acc));
};
template <class P, class Ctx>
concept ParallelReduceMetricStates = requires(P& p, Ctx& c, const std::vector<MetricState*>& s) {
  { p.reduce_metric_states(c, s) } -> std::same_as<void>;
};
///@}
}  // namespace detail

/// A parallel policy `P` offers every service of the contract to a Trainer whose context is `Ctx` (see the table
/// above).
template <class P, class Ctx>
concept ParallelServices = detail::ParallelIsMain<P> && detail::ParallelWorldSize<P> &&
                           detail::ParallelAgreeAny<P, Ctx> && detail::ParallelAgreeMin<P, Ctx> &&
                           detail::ParallelGradientsSharded<P> && detail::ParallelReduceGradientStatistic<P, Ctx> &&
                           detail::ParallelReduceMetrics<P, Ctx> && detail::ParallelReduceMetricsInPlace<P, Ctx> &&
                           detail::ParallelReduceMetricStates<P, Ctx>;

namespace detail {

/// The Trainer instantiates it with its parallel policy: one static_assert per service, each naming the member,
/// the signature it must have and the fix. The policy's type is in the instantiation's name
/// (ParallelServicesCheck<YourPolicy, ...>), as HookCheck's.
template <class P, class Ctx>
struct ParallelServicesCheck {
  static_assert(ParallelIsMain<P>,
                "policytrain::Trainer: the parallel policy lacks `bool is_main()` (whether this process logs and "
                "writes files: rank 0); add it (the parallel-services contract, core/parallel_services.hpp)");
  static_assert(ParallelWorldSize<P>,
                "policytrain::Trainer: the parallel policy lacks `int64_t world_size()` (processes training "
                "together, 1 alone); add it (the parallel-services contract, core/parallel_services.hpp)");
  static_assert(ParallelAgreeAny<P, Ctx>,
                "policytrain::Trainer: the parallel policy lacks `template <class Ctx> bool agree_any(Ctx& ctx, "
                "bool b)` (true on every rank when b is on any: a collective, which takes the context first); "
                "declare it with that signature (an agree_any(bool) is not called: the ranks would disagree) "
                "(core/parallel_services.hpp)");
  static_assert(ParallelAgreeMin<P, Ctx>,
                "policytrain::Trainer: the parallel policy lacks `template <class Ctx> int64_t agree_min(Ctx& ctx, "
                "int64_t v)` (the smallest v over the ranks: a collective, which takes the context first); declare "
                "it with that signature (core/parallel_services.hpp)");
  static_assert(ParallelGradientsSharded<P>,
                "policytrain::Trainer: the parallel policy lacks `bool gradients_sharded()` (whether each rank "
                "keeps only its partition's gradients: ZeRO-2); add it, returning false if it never shards "
                "(core/parallel_services.hpp)");
  static_assert(ParallelReduceGradientStatistic<P, Ctx>,
                "policytrain::Trainer: the parallel policy lacks `template <class Ctx> void "
                "reduce_gradient_statistic(Ctx& ctx, torch::Tensor& t, policytrain::GradientReduce op)` (reduces "
                "a statistic of sharded gradients over the ranks); add it, doing nothing if gradients are never "
                "sharded (core/parallel_services.hpp)");
  static_assert(ParallelReduceMetrics<P, Ctx>,
                "policytrain::Trainer: the parallel policy lacks `template <class Ctx> void reduce_metrics(Ctx& "
                "ctx, policytrain::MetricsAccumulator& acc)` (sums an evaluation over the ranks: a collective); add "
                "it (core/parallel_services.hpp)");
  static_assert(!ParallelReduceMetrics<P, Ctx> || ParallelReduceMetricsInPlace<P, Ctx>,
                "policytrain::Trainer: the parallel policy's reduce_metrics takes the MetricsAccumulator by value "
                "(or by const reference), so it reduces a copy and every rank reports its own shard's metrics; "
                "declare it `template <class Ctx> void reduce_metrics(Ctx& ctx, policytrain::MetricsAccumulator& "
                "acc)`, which sums in place (core/parallel_services.hpp)");
  static_assert(ParallelReduceMetricStates<P, Ctx>,
                "policytrain::Trainer: the parallel policy lacks `template <class Ctx> void "
                "reduce_metric_states(Ctx& ctx, const std::vector<policytrain::MetricState*>& states)` (reduces "
                "the epoch-level metrics' states over the ranks: a collective); add it (core/parallel_services.hpp)");
  static constexpr bool ok = true;
};

}  // namespace detail

}  // namespace policytrain
