#pragma once
/// \file
/// The Trainer's training loop: fit's epochs (resume mid-epoch, max_steps, a stop at a step boundary, validation
/// at epoch ends or every N steps, and the stop agreed over the ranks) and its micro-steps (forward, loss, backward, the optimizer step when a window
/// ends, or the step policy's captured step). A friend of the Trainer, which calls it from fit(); evaluate() stays
/// in the Trainer, beside the parallel policy's services it asks for.
/// Part of the Trainer (docs/trainer.md, "File map"); include <policytrain/trainer.hpp>.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/cuda.h>
#include <torch/types.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/core/context.hpp>
#include <policytrain/core/hooks.hpp>
#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/trainer/composition.hpp>
#include <policytrain/trainer/metric_contract.hpp>

namespace policytrain::detail {

/// The loops of a Trainer of type T (its private members are reached as its friend).
template <class T>
struct Loops {
  using Task = std::remove_reference_t<decltype(std::declval<T&>().task())>;

  /// One micro-batch: forward, loss, backward, and the optimizer step when it ends a window. Under a step policy
  /// (step::CudaGraph) every micro-batch is a step, and the policy runs (or captures, or replays) the device part:
  /// forward, backward, before_step and step; the host part (counters, after_step, on_step_end) runs here.
  /// `step_end()` runs once an optimizer step is finished: the step's validation when one is due, then the
  /// on_step_end hooks (Loops::fit's end_step).
  template <class StepEnd>
  static void train_micro_step(T& t, Batch b, StepEnd&& step_end) {
    const int64_t n = b.size();
    ++t.state_.micro_step;
    ++t.state_.batch_in_epoch;
    t.state_.window_samples += n;
    t.state_.samples_seen += n;
    // Tokens only where they are declared: a task without them pays nothing (FitOptions::items_per_sample, a
    // multiplication, is the runtime way).
    if constexpr (DeclaresTokens<Task>) {
      count_tokens(t, static_cast<int64_t>(t.task_.tokens(b)));
    } else {
      if (t.options_.items_per_sample > 0) count_tokens(t, n * t.options_.items_per_sample);
    }
    if constexpr (T::has_step_policy()) {
      t.last_micro_step_ = true;
      const bool stepped = t.step_policy().run_step(t.ctx_, b, [&t](const Batch& sb) -> bool {
        forward_backward(t, sb);
        t.before_step();
        return t.do_step();
      });
      finish_step(t, stepped);
      step_end();
    } else {
      forward_backward(t, b);
      if (t.last_micro_step_) {
        optimizer_step(t);
        step_end();
      }
    }
  }

  /// Adds a micro-batch's `k` tokens to the run's count and to its accumulation window's (the logs' per-step rate).
  static void count_tokens(T& t, int64_t k) {
    t.state_.tokens_seen += k;
    t.state_.window_tokens += k;
  }

  /// Before an epoch's training time is taken: on CUDA, waits for the queued work (the host may run ahead of the
  /// device by many steps when nothing reads a value back, e.g. data::DeviceLoader inside a CUDA graph), so that
  /// FitResult::train_seconds is the device's time, not the host's enqueueing. One synchronisation per epoch.
  static void wait_for_device(T& t) {
    if (t.device().is_cuda()) torch::cuda::synchronize(t.device().index());
  }

  static void forward_backward(T& t, const Batch& b) {
    torch::Tensor loss = t.wrap_forward([&]() -> torch::Tensor { return t.task_.training_step(b); });
    t.state_.last_loss = loss.detach();
    loss = t.transform_loss(std::move(loss));
    t.last_micro_step_ = t.should_step() || t.state_.batch_in_epoch == t.epoch_batches_;
    t.wrap_backward([&] { loss.backward(); });
  }

  static void optimizer_step(T& t) {
    t.before_step();
    finish_step(t, t.do_step());
  }

  static void finish_step(T& t, bool stepped) {
    // The lrs this step used, before a schedule's after_step sets the next step's (Context::step_lr).
    const auto& groups = t.optimizer_.param_groups();
    t.step_lrs_.resize(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) t.step_lrs_[g] = groups[g].options().get_lr();
    ++t.state_.global_step;
    if (!stepped) ++t.state_.skipped_steps;
    t.after_step(stepped);
    // A step policy that replays a graph keeps the gradients where the graph writes them.
    if constexpr (T::has_step_policy()) {
      if (!t.step_policy().keeps_grads()) release_grads(t.optimizer_);
    } else {
      release_grads(t.optimizer_);
    }
    t.state_.micro_step = 0;
    t.state_.window_samples = 0;
    t.state_.window_tokens = 0;
  }

  /// A tensor listed twice in the optimizer would be updated twice per step: refuse it, naming the cause (twice in
  /// one group: tied weights, Module::parameters() repeats a shared tensor; in two groups: the groups' split).
  static void check_unique_parameters(T& t) {
    std::unordered_map<const void*, size_t> seen;  // each tensor's first param group
    const auto& groups = t.optimizer_.param_groups();
    for (size_t gi = 0; gi < groups.size(); ++gi)
      for (const auto& p : groups[gi].params())
        if (const auto [it, fresh] = seen.emplace(p.unsafeGetTensorImpl(), gi); !fresh) {
          std::string name = "(a tensor not in the module)";
          for (const auto& q : t.module().named_parameters(true))
            if (q.value().unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) { name = q.key(); break; }
          // In two groups: the groups were built wrong (a decay/no-decay split that lists a tensor in both), not
          // tied weights.
          if (it->second != gi)
            throw std::invalid_argument(error_message(
                "policytrain::Trainer",
                format("the parameter '{}' is in param groups {} and {} of the optimizer, so every step would update "
                       "it twice, once with each group's settings",
                       name, it->second, gi),
                {}, "put each tensor in one group (split the module's named_parameters() once, e.g. by dim() for "
                    "decay and no-decay)"));
          throw std::invalid_argument(error_message(
              "policytrain::Trainer",
              format("the optimizer holds the parameter '{}' more than once (tied weights: "
                             "torch::nn::Module::parameters() lists a shared tensor once per module that registers "
                             "it), so every step would update it twice",
                             name),
              {}, "build the optimizer from policytrain::unique_parameters(module)"));
        }
  }

  /// A mid-epoch resume on another world size than the checkpoint's (docs/parallel.md, "Elastic restarts"): the
  /// samples the checkpoint's run trained are a prefix of the epoch's global order; the loader (reshard_after)
  /// shards that prefix and the rest over this run's ranks, the prefix first, so that passing over the
  /// checkpoint's micro-batches resumes at the rest. The global micro-batch must be the checkpoint's. A loader
  /// without reshard_after leaves it to the parallel policy's start check, which refuses by name.
  template <class TrainData>
  static void reshard_resumed_epoch(T& t, TrainData& train) {
    auto& par = t.template policy<Category::parallel>();
    if constexpr (requires { { par.elastic_resume_samples() } -> std::same_as<std::optional<int64_t>>; }) {
      if constexpr (requires { { train.reshard_after(int64_t{}) } -> std::convertible_to<int64_t>; }) {
        const std::optional<int64_t> done = par.elastic_resume_samples();
        if (!done) return;
        const int64_t k = train.reshard_after(*done);
        if (k != t.state_.batch_in_epoch)
          throw std::invalid_argument(error_message(
              "policytrain::Trainer",
              format("the checkpoint's run trained {} samples of epoch {} in {} micro-batches ({} samples each over "
                     "all ranks); this run's global micro-batch (batch size x world size {}) makes that {}",
                     *done, t.state_.epoch, t.state_.batch_in_epoch,
                     *done / std::max<int64_t>(1, t.state_.batch_in_epoch), par.world_size(), k),
              "the global micro-batch of the run that wrote the checkpoint",
              "set the per-rank batch size to that global micro-batch / this world size"));
        par.resharded();
      }
    }
  }

  static bool reached_max_steps(const T& t, const FitOptions& o) {
    return o.max_steps >= 0 && t.state_.global_step >= o.max_steps;
  }

  /// Refuses settings that cannot mean anything, by name, before any step.
  static void check_options(const FitOptions& o, bool has_val) {
    auto refuse = [](const std::string& what, const std::string& fix) {
      throw std::invalid_argument(error_message("policytrain::Trainer::fit", what, {}, fix));
    };
    if (o.val_every_steps < 0)
      refuse(format("FitOptions::val_every_steps is {}", o.val_every_steps),
             "give a positive number of optimizer steps, or 0 to validate at each epoch's end");
    if (!has_val && (o.val_every_steps > 0 || o.eval_on_start))
      refuse(format("FitOptions::{} is set but fit was given no validation data",
                    o.val_every_steps > 0 ? "val_every_steps" : "eval_on_start"),
             "call fit(train, val, options), or leave it unset");
    if (o.epochs < -1)
      refuse(format("FitOptions::epochs is {}", o.epochs),
             "give a count of epochs, or -1 (one epoch; with max_steps, as many as the steps take)");
    if (o.items_per_sample < 0)
      refuse(format("FitOptions::items_per_sample is {}", o.items_per_sample),
             "give the tokens of one sample (a language model's block size), or 0 to count none");
    if (DeclaresTokens<Task> && o.items_per_sample > 0)
      refuse(format("FitOptions::items_per_sample is {} and the task declares tokens(batch), which counts them",
                    o.items_per_sample),
             "leave items_per_sample at 0 (the task's count is used)");
    if (!(o.peak_flops >= 0) || !std::isfinite(o.peak_flops))
      refuse(format("FitOptions::peak_flops is {}", o.peak_flops),
             "give the peak FLOP/s of one device (e.g. 312e12), or 0 to report no MFU");
    if (o.peak_flops > 0 && !DeclaresFlopsPerToken<Task>)
      refuse(format("FitOptions::peak_flops is {:g} but the task declares no flops_per_token(), so no MFU can be "
                    "computed", o.peak_flops),
             "add `double flops_per_token() const` to the task (nanoGPT's estimate: 6 N + 12 L H Q T), or leave "
             "peak_flops at 0");
    if (o.peak_flops > 0 && !DeclaresTokens<Task> && o.items_per_sample == 0)
      refuse(format("FitOptions::peak_flops is {:g} but no tokens are counted, so no MFU can be computed",
                    o.peak_flops),
             "add `int64_t tokens(const policytrain::Batch&) const` to the task, or set FitOptions::items_per_sample");
  }

  /// One validation (a step's, an epoch's start): the evaluation, the on_validation_end hooks, and a stop they ask
  /// for agreed over the ranks (it takes effect after this step). Returns its wall time.
  template <class ValData>
  static double validate(T& t, ValData& val, const FitOptions& options, FitResult& result) {
    const auto t0 = std::chrono::steady_clock::now();
    Metrics m = t.evaluate(val, options.limit_val_batches);
    const bool stop = t.on_validation_end(m);
    result.validation.push_back(std::move(m));
    result.validation_steps.push_back(t.state_.global_step);
    if (t.agree_any(stop)) {
      t.state_.stop_requested = true;
      result.stopped_early = !reached_max_steps(t, options);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  /// FitResult's tokens: this rank's, and every rank's summed through the parallel policy's reduction of metric
  /// states (a collective: every rank counts tokens, or none does, since the task and options are the same).
  static void sum_tokens(T& t, FitResult& result, int64_t tokens, const FitOptions& options) {
    result.tokens_seen = tokens;
    MetricState total{"tokens_seen", torch::tensor({tokens}, torch::kLong), Reduce::sum};
    t.template policy<Category::parallel>().reduce_metric_states(t.ctx_, std::vector<MetricState*>{&total});
    result.tokens_seen_all_ranks = total.value.sum().template item<int64_t>();
    result.flops_per_token = t.flops_per_token();
    result.peak_flops = options.peak_flops;
  }

  template <class TrainData, class ValData>
  static FitResult fit(T& t, TrainData& train, ValData val, const FitOptions& options) {
    static_assert(not_a_raw_torch_loader<TrainData>());
    t.options_ = options;
    check_unique_parameters(t);
    // Shards of different lengths (data::UnrepeatedDistributedSampler, for validation) would make the ranks step a
    // different number of times, and the gradient reductions wait for each other until the timeout.
    if constexpr (requires { { train.training_refusal() } -> std::convertible_to<std::string>; })
      if (!train.training_refusal().empty()) throw std::invalid_argument(train.training_refusal());
    check_options(options, !std::is_same_v<ValData, std::nullptr_t>);
    FitResult result;
    t.state_.stop_requested = false;
    t.state_.stop_at_step = false;
    t.step_validated_ = false;
    t.module().train();
    if constexpr (!std::is_same_v<ValData, std::nullptr_t>) check_monitors<Task>(t.policies_, t.scalar_metric_names());
    t.on_fit_begin();
    const int64_t start_epoch = t.state_.epoch;
    const int64_t tokens0 = t.state_.tokens_seen;
    const int64_t epochs = options.epoch_limit();
    // The end of every optimizer step: its validation when one is due (val_every_steps, at the global steps that are
    // its multiples, so that a resumed run validates where the uninterrupted one does, whatever interval it had),
    // then the on_step_end hooks, which see it (Context::step_validated: a checkpoint policy saves last and best).
    double val_seconds = 0;  // of the step validations in the current epoch: not training time
    auto end_step = [&] {
      if constexpr (!std::is_same_v<ValData, std::nullptr_t>) {
        if (options.val_every_steps > 0 && t.state_.global_step % options.val_every_steps == 0) {
          t.step_validated_ = true;
          wait_for_device(t);
          val_seconds += validate(t, *val, options, result);
        }
      }
      t.on_step_end();
      t.step_validated_ = false;
    };
    if constexpr (!std::is_same_v<ValData, std::nullptr_t>) {
      // nanoGPT's evaluation at iteration 0: once, at the run's start (not again at a resume).
      if (options.eval_on_start && t.state_.global_step == 0 && t.state_.batch_in_epoch == 0 && t.state_.epoch == 0)
        validate(t, *val, options, result);
    }
    // A finished epoch leaves batch_in_epoch at 0: a state taken between epochs resumes at the next one's start.
    for (; t.state_.epoch < epochs && !t.state_.stop_requested && !reached_max_steps(t, options);
         ++t.state_.epoch, t.state_.batch_in_epoch = 0) {
      if constexpr (requires { train.set_epoch(t.state_.epoch); }) train.set_epoch(t.state_.epoch);
      const int64_t n = size_or_unknown(train);
      t.epoch_batches_ = options.limit_train_batches >= 0 && (n < 0 || options.limit_train_batches < n)
                             ? options.limit_train_batches : n;
      t.state_.batch_in_epoch = std::exchange(t.resume_batches_, 0);
      if (t.state_.batch_in_epoch > 0) reshard_resumed_epoch(t, train);
      t.module().train();
      t.on_epoch_begin();
      const auto t0 = std::chrono::steady_clock::now();
      val_seconds = 0;
      const int64_t seen0 = t.state_.samples_seen;
      // A resumed epoch passes over the batches already consumed: a loader with begin_at(k) (data::from_torch)
      // skips them before loading any; otherwise the iterator is advanced without dereferencing (TensorLoader
      // assembles a batch only on dereference).
      constexpr bool skips = requires {
        { train.begin_at(int64_t{}) } -> std::same_as<decltype(std::begin(train))>;
      };
      auto it = [&] {
        if constexpr (skips) {
          if (t.state_.batch_in_epoch > 0) return train.begin_at(t.state_.batch_in_epoch);
        }
        return std::begin(train);
      }();
      const auto end = std::end(train);
      if constexpr (!skips)
        for (int64_t i = 0; i < t.state_.batch_in_epoch && it != end; ++i) ++it;
      bool cut = false;
      t.epoch_cut_ = false;
      for (; it != end; ++it) {
        if (t.epoch_batches_ >= 0 && t.state_.batch_in_epoch >= t.epoch_batches_) break;
        auto&& item = *it;
        train_micro_step(t, t.to_device(item), end_step);
        if (t.state_.stop_at_step && t.state_.micro_step == 0) break;  // after the step: handled below the loop
        // A stop agreed at a step's validation (val_every_steps), or the run's last step: the epoch ends here.
        if (t.state_.micro_step == 0 &&
            ((options.val_every_steps > 0 && t.state_.stop_requested) || reached_max_steps(t, options))) {
          t.state_.stop_requested = true;
          // Cut before the epoch's last batch: the epoch is not finished, and the next fit resumes it.
          if (t.epoch_batches_ >= 0) {
            cut = t.state_.batch_in_epoch < t.epoch_batches_;
          } else {
            ++it;
            cut = it != end;
          }
          t.epoch_cut_ = cut;
          break;
        }
      }
      // A run by steps over data without a batch would pass over it for ever.
      if (options.by_steps() && t.state_.batch_in_epoch == 0)
        throw std::invalid_argument(error_message(
            "policytrain::Trainer::fit",
            format("epoch {} of the training data yielded no batch, and the run is by steps (max_steps {}): it would "
                   "pass over the data for ever", t.state_.epoch, options.max_steps),
            {}, "give training data with at least one batch"));
      // A stop at a step boundary (callbacks::Preemption): the epoch ends here, unvalidated, and resumes at the
      // next batch (the checkpoint policy's fit end saves it mid-epoch); no epoch-end hook runs, so a resumed run
      // validates and ends this epoch once, as the uninterrupted one does.
      if (t.state_.stop_at_step) {
        t.state_.stop_requested = true;
        t.epoch_cut_ = true;
        result.stopped_at_step = true;
        wait_for_device(t);
        result.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - val_seconds;
        result.samples_seen += t.state_.samples_seen - seen0;
        result.epochs_run = t.state_.epoch - start_epoch;
        t.resume_batches_ = t.state_.batch_in_epoch;
        break;
      }
      // A window left open at the end of an epoch (unknown epoch length, or max_steps mid-window) is
      // stepped with the samples it has, normalised by their count.
      if (t.state_.micro_step > 0) {
        t.last_micro_step_ = true;
        optimizer_step(t);
        end_step();
      }
      wait_for_device(t);
      result.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - val_seconds;
      result.samples_seen += t.state_.samples_seen - seen0;
      bool stop = false;
      if constexpr (!std::is_same_v<ValData, std::nullptr_t>) {
        if (options.val_every_steps <= 0) {
          Metrics m = t.evaluate(*val, options.limit_val_batches);
          stop = t.on_validation_end(m) || stop;
          result.validation.push_back(std::move(m));
          result.validation_steps.push_back(t.state_.global_step);
        }
      }
      stop = t.on_epoch_end() || stop;
      if (t.agree_any(stop)) {
        t.state_.stop_requested = true;
        result.stopped_early = t.state_.epoch + 1 < epochs;
      }
      result.epochs_run = t.state_.epoch + 1 - start_epoch;
      if (cut) {
        // The state stays inside the epoch (epoch, batch_in_epoch), as a mid-epoch checkpoint records it, so
        // that the next fit continues with the batch after the last one trained.
        t.resume_batches_ = t.state_.batch_in_epoch;
        break;
      }
    }
    result.world_size = t.template policy<Category::parallel>().world_size();
    if (t.counts_tokens()) sum_tokens(t, result, t.state_.tokens_seen - tokens0, options);
    t.on_fit_end();
    result.global_steps = t.state_.global_step;
    result.skipped_steps = t.state_.skipped_steps;
    return result;
  }
};

}  // namespace policytrain::detail
