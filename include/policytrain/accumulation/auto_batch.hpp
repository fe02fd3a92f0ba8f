#pragma once
/// \file
/// accumulate::AutoBatch — finds the largest micro-batch that fits a fraction of the device's memory, then keeps
/// the global batch (samples per optimizer step) fixed by choosing the accumulation (the Composer behaviour;
/// Ultralytics and Accelerate change the global batch instead). During training, an out-of-memory error halves
/// the micro-batch and doubles the accumulation, up to `max_halvings` times, with a log line.
///
/// The search and the back-off are plain logic over a *probe*: `probe(batch)` runs a real training step at that
/// micro-batch and returns the peak bytes it used, or throws c10::OutOfMemoryError. A probe fits when it does not
/// throw and its peak is within `memory_fraction` of the budget. On CUDA, cuda_peak_bytes() measures a step with the
/// caching allocator's statistics and cuda_memory_budget() reads the device's total memory (both only in a build
/// against a CUDA LibTorch, POLICYTRAIN_WITH_CUDA); the tests drive the same logic on the CPU with a fake limit.
/// Auto batch size is a CUDA feature: on the CPU memory is not the constraint, and there is nothing to measure.
///
/// fit_auto_batch(trainer, auto_batch, plan, make_loader, val, options) trains with a plan and recovers from an
/// out-of-memory error: it discards the open window (zeroes the gradients), applies the halved plan to the
/// accumulation policy (set_accumulate or set_batch) and to a new loader, resets the precision policy's per-step
/// state (discard_step: a loss scaler interrupted between unscale and update), and continues with `fit`, which restarts
/// the interrupted epoch from its first batch (optimizer steps already taken in that epoch are kept).
/// Hooks: none (not a policy). Cost when unused: nothing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/detail/format.hpp>

#ifdef POLICYTRAIN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace policytrain::accumulate {

/// Settings of AutoBatch: the global batch to keep, the search range, the memory fraction and the recoveries.
struct AutoBatchOptions {
  int64_t global_batch = 0;       ///< samples per optimizer step to keep (0: the micro-batch found, accumulate 1)
  int64_t min_batch = 1;          ///< smallest micro-batch tried
  int64_t max_batch = 4096;       ///< largest micro-batch tried
  double memory_fraction = 0.9;   ///< a micro-batch fits when its peak is within this fraction of the budget
  int max_halvings = 4;           ///< out-of-memory recoveries during training before the error is rethrown
  std::FILE* log = stderr;        ///< where the search and the recoveries are reported (nullptr: silent)
};

/// A micro-batch size and the accumulation that goes with it.
struct BatchPlan {
  /// Samples per micro-batch.
  int64_t micro_batch = 0;
  /// Micro-batches per optimizer step.
  int64_t accumulate = 1;
  /// Samples per optimizer step, micro_batch * accumulate.
  int64_t global_batch() const { return micro_batch * accumulate; }
  /// Same micro-batch and accumulation.
  bool operator==(const BatchPlan&) const = default;
};

/// One probe of the search: the micro-batch tried, its peak bytes (-1 after out-of-memory), whether it fit.
struct Probe {
  /// The micro-batch tried.
  int64_t batch = 0;
  /// Peak bytes of the step (-1 after out-of-memory).
  int64_t peak_bytes = -1;
  /// Whether it fit within the budget.
  bool fits = false;
};

/// What ended a search: a probe that did not fit (memory), or max_batch fitting (the range).
enum class SearchLimit { memory, max_batch };

/// Finds the largest micro-batch that fits, and halves it on out-of-memory keeping the global batch (see the file comment).
class AutoBatch {
 public:
  /// `budget_bytes`: the device's memory (on CUDA, cuda_memory_budget()); a probe fits below
  /// memory_fraction * budget_bytes.
  AutoBatch(AutoBatchOptions o, int64_t budget_bytes) : o_(o), budget_(budget_bytes) {
    if (o_.min_batch < 1 || o_.max_batch < o_.min_batch || o_.memory_fraction <= 0 || o_.memory_fraction > 1 ||
        budget_ <= 0 || o_.max_halvings < 0 || o_.global_batch < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::accumulate::AutoBatch",
          policytrain::detail::format(
              "min_batch {}, max_batch {}, memory_fraction {}, budget {} bytes, "
              "max_halvings {}, global_batch {}; expected 1 <= min_batch <= max_batch, 0 < memory_fraction <= 1, "
              "budget > 0, max_halvings >= 0, global_batch >= 0",
              o_.min_batch, o_.max_batch, o_.memory_fraction, budget_, o_.max_halvings, o_.global_batch)));
  }

  /// The settings.
  const AutoBatchOptions& options() const { return o_; }
  /// Every probe of the last search, in order.
  const std::vector<Probe>& probes() const { return probes_; }
  /// Out-of-memory recoveries so far.
  int halvings() const { return halvings_; }
  /// What ended the last search: memory (the batch found + 1 did not fit, or did not fit the fraction) or
  /// max_batch (it fits, and the range ends there: the memory fraction was not reached).
  SearchLimit limited_by() const { return limit_; }

  /// The largest micro-batch in [min_batch, max_batch] that fits: doubling from min_batch until a probe fails,
  /// then a binary search between the last fit and the first failure. Throws std::runtime_error when even
  /// min_batch does not fit; rethrows anything but c10::OutOfMemoryError.
  template <class ProbeFn>
  int64_t search(ProbeFn&& probe) {
    probes_.clear();
    int64_t good = 0, bad = o_.max_batch + 1;
    for (int64_t b = o_.min_batch;;) {
      if (try_probe(probe, b)) good = b;
      else { bad = b; break; }
      if (b == o_.max_batch) break;
      b = std::min(2 * b, o_.max_batch);
    }
    if (good == 0)
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::accumulate::AutoBatch",
          policytrain::detail::format("even the smallest micro-batch ({}) does not fit in {:.0f}% of {} MiB; "
                                      "lower min_batch, raise memory_fraction, or use a smaller model",
                                      o_.min_batch, 100 * o_.memory_fraction, budget_ >> 20)));
    while (bad - good > 1) {
      const int64_t mid = good + (bad - good) / 2;
      if (try_probe(probe, mid)) good = mid;
      else bad = mid;
    }
    limit_ = bad > o_.max_batch ? SearchLimit::max_batch : SearchLimit::memory;
    if (o_.log) {
      double used = -1;
      for (const auto& p : probes_)
        if (p.batch == good && p.fits) used = static_cast<double>(p.peak_bytes) / static_cast<double>(budget_);
      std::fprintf(o_.log, "policytrain::accumulate::AutoBatch: largest micro-batch %lld (%zu probes; %.3f of the "
                   "memory against %.3f: %s)\n", static_cast<long long>(good), probes_.size(), used, o_.memory_fraction,
                   limit_ == SearchLimit::max_batch ? "max_batch ended the search, raise it to fill more"
                                                    : "the next micro-batch up does not fit");
    }
    return good;
  }

  /// The plan keeping the global batch with micro-batches of at most `max_micro`: the largest divisor of the
  /// global batch in [max_micro / 2, max_micro] when there is one (the global batch exactly), else
  /// accumulate = ceil(global / max_micro) and the micro-batch ceil(global / accumulate) (the global batch
  /// exceeded by less than `accumulate` samples).
  BatchPlan plan(int64_t max_micro) const {
    if (max_micro < 1)
      throw std::invalid_argument(
          policytrain::detail::error_message("policytrain::accumulate::AutoBatch::plan",
                                             policytrain::detail::format("micro-batch {}; expected >= 1", max_micro)));
    const int64_t global = o_.global_batch > 0 ? o_.global_batch : max_micro;
    if (max_micro >= global) return {global, 1};
    for (int64_t d = max_micro; 2 * d >= max_micro; --d)
      if (global % d == 0) return {d, global / d};
    const int64_t acc = (global + max_micro - 1) / max_micro;
    return {(global + acc - 1) / acc, acc};
  }

  /// After an out-of-memory error with plan `p`: the micro-batch halved (rounded up) and the accumulation doubled,
  /// with a log line; std::nullopt when max_halvings recoveries were already made or the micro-batch is 1.
  std::optional<BatchPlan> on_out_of_memory(const BatchPlan& p) {
    if (halvings_ >= o_.max_halvings || p.micro_batch <= 1) {
      if (o_.log)
        std::fprintf(o_.log, "policytrain::accumulate::AutoBatch: out of memory at micro-batch %lld after %d of %d "
                     "halvings; giving up\n", static_cast<long long>(p.micro_batch), halvings_, o_.max_halvings);
      return std::nullopt;
    }
    ++halvings_;
    BatchPlan next{(p.micro_batch + 1) / 2, p.accumulate * 2};
    if (o_.log)
      std::fprintf(o_.log, "policytrain::accumulate::AutoBatch: out of memory at micro-batch %lld x %lld; retrying "
                   "with micro-batch %lld x %lld (halving %d of %d)\n", static_cast<long long>(p.micro_batch),
                   static_cast<long long>(p.accumulate), static_cast<long long>(next.micro_batch),
                   static_cast<long long>(next.accumulate), halvings_, o_.max_halvings);
    return next;
  }

 private:
  template <class ProbeFn>
  bool try_probe(ProbeFn& probe, int64_t b) {
    Probe r{b, -1, false};
    try {
      r.peak_bytes = static_cast<int64_t>(probe(b));
      r.fits = static_cast<double>(r.peak_bytes) <= o_.memory_fraction * static_cast<double>(budget_);
    } catch (const c10::OutOfMemoryError&) {
      r.fits = false;
    }
    probes_.push_back(r);
    return r.fits;
  }

  AutoBatchOptions o_;
  int64_t budget_;
  std::vector<Probe> probes_;
  int halvings_ = 0;
  SearchLimit limit_ = SearchLimit::memory;
};

/// Applies `plan` to an accumulation policy: set_accumulate(n) (Steps, NominalBatch with nominal 0) or
/// set_batch(micro) (NominalBatch, whose rule then derives the accumulation).
template <class Acc>
void apply_plan(Acc& acc, const BatchPlan& plan) {
  if constexpr (requires { acc.options().nominal; acc.set_batch(plan.micro_batch); }) {
    if (acc.options().nominal > 0) { acc.set_batch(plan.micro_batch); return; }
  }
  if constexpr (requires { acc.set_accumulate(plan.accumulate); }) {
    acc.set_accumulate(plan.accumulate);
  } else {
    if (plan.accumulate != 1)
      throw std::invalid_argument(
          policytrain::detail::error_message("policytrain::accumulate::AutoBatch",
                                             "the plan needs gradient accumulation but the Trainer's accumulation "
                                             "policy has none; compose accumulate::Steps or accumulate::NominalBatch"));
  }
}

/// Trains with `plan` (make_loader(micro_batch) builds the training loader), recovering from out-of-memory errors
/// as the file comment describes. Returns the result of the last, successful `fit`; `plan` holds the plan used.
///
/// Under data parallelism (world_size() over 1: parallel::DataParallel, ShardedDataParallel) every
/// rank searched its own device: before training the ranks agree on the smallest micro-batch any of them found
/// (a collective; the plan is rebuilt from it), so that every rank takes the same steps. An out-of-memory error on
/// one rank cannot be recovered alone there (the other ranks are inside the step's collectives and would follow
/// another plan): it stops with an error naming the rank and the plan, instead of a halved plan on that rank only.
template <class TrainerT, class MakeLoader, class Val, class FitOpts>
auto fit_auto_batch(TrainerT& trainer, AutoBatch& auto_batch, BatchPlan& plan, MakeLoader&& make_loader, Val& val,
                    const FitOpts& options) {
  // The parallel services (core/parallel_services.hpp): agree_min joins the job by itself (the process group
  // otherwise forms at fit begin) and is the identity on one process.
  auto& par = trainer.template policy<Category::parallel>();
  const bool parallel = par.world_size() > 1;
  if (parallel) {
    const int64_t agreed = par.agree_min(trainer.context(), plan.micro_batch);
    if (agreed != plan.micro_batch) plan = auto_batch.plan(agreed);
  }
  for (;;) {
    apply_plan(trainer.template policy<Category::accumulation>(), plan);
    auto loader = make_loader(plan.micro_batch);
    try {
      // make_loader may return a loader or a pointer to one (loaders that own threads do not move).
      if constexpr (requires { *loader; loader.get(); }) return trainer.fit(*loader, val, options);
      else return trainer.fit(loader, val, options);
    } catch (const c10::OutOfMemoryError& e) {
      if (parallel)
        throw std::runtime_error(policytrain::detail::error_message(
            "policytrain::accumulate::fit_auto_batch",
            policytrain::detail::format(
                "out of memory at micro-batch {} (x {} accumulated) under data "
                "parallelism: the other ranks cannot follow a halved plan from inside the step's collectives, so this "
                "rank stops instead of training on alone; restart with a smaller batch, or a lower "
                "AutoBatchOptions::memory_fraction. {}",
                plan.micro_batch, plan.accumulate, std::string(e.what()).substr(0, std::string(e.what()).find('\n')))));
      auto next = auto_batch.on_out_of_memory(plan);
      if (!next) throw;
      plan = *next;
      // The open window's gradients and counters belong to the failed micro-batch size: discard them.
      detail::release_grads(trainer.optimizer());
      // A step interrupted inside optimizer.step() left the loss scaler unscaled-but-not-updated.
      if constexpr (requires { trainer.template policy<Category::precision>().discard_step(); })
        trainer.template policy<Category::precision>().discard_step();
      trainer.state().micro_step = 0;
      trainer.state().window_samples = 0;
      trainer.state().window_tokens = 0;
#ifdef POLICYTRAIN_WITH_CUDA
      c10::cuda::CUDACachingAllocator::emptyCache();
#endif
    }
  }
}

#ifdef POLICYTRAIN_WITH_CUDA
/// memory_fraction's reference on CUDA: the device's total memory in bytes.
inline int64_t cuda_memory_budget(c10::DeviceIndex device) {
  return static_cast<int64_t>(c10::cuda::CUDACachingAllocator::get()->getMemoryInfo(device).second);
}

/// Runs `step(batch)` (a real forward and backward at that micro-batch) and returns the peak bytes the caching
/// allocator reserved on `device` meanwhile; out-of-memory propagates as c10::OutOfMemoryError.
template <class StepFn>
int64_t cuda_peak_bytes(StepFn&& step, int64_t batch, c10::DeviceIndex device) {
  namespace alloc = c10::cuda::CUDACachingAllocator;
  alloc::emptyCache();
  alloc::resetPeakStats(device);
  step(batch);
  c10::cuda::device_synchronize();
  const auto stats = alloc::getDeviceStats(device);
  return stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}
#endif

}  // namespace policytrain::accumulate
