#pragma once
/// \file
/// The Trainer's training loop: fit's settings checked, and what its epochs (fit_loop.hpp's run_fit, compiled once)
/// ask of one Trainer and its loaders: the micro-steps (forward, loss, backward, the optimizer step when a window
/// ends, or the step policy's captured step), the hooks, the data's iterator. A friend of the Trainer, which calls
/// it from fit(); evaluate() stays in the Trainer, beside the parallel policy's services it asks for.
/// Part of the Trainer (docs/trainer.md, "File map"); include <policytrain/trainer.hpp>.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
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
#include <policytrain/trainer/fit_loop.hpp>
#include <policytrain/trainer/metric_contract.hpp>

namespace policytrain::detail {

/// The loops of a Trainer of type T (its private members are reached as its friend).
/// Whether a loader's item converts to a policytrain::Batch or is one stacked torch::data::Example (what
/// Trainer::to_device accepts).
template <class Item>
inline constexpr bool yields_batch =
    std::is_convertible_v<Item, Batch> || requires(std::remove_reference_t<Item>& item) { Batch{item.data, item.target}; };

template <class T>
struct Loops {
  using Task = std::remove_reference_t<decltype(std::declval<T&>().task())>;

  /// One micro-batch: forward, loss, backward, and the optimizer step when it ends a window. Under a step policy
  /// (step::CudaGraph) every micro-batch is a step, and the policy runs (or captures, or replays) the device part:
  /// forward, backward, before_step and step; the host part (counters, after_step, on_step_end) runs here.
  /// Returns whether an optimizer step is finished, after which run_fit ends the step (the step's validation when
  /// one is due, then the on_step_end hooks).
  static bool train_micro_step(T& t, Batch b) {
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
      return true;
    } else {
      forward_backward(t, b);
      if (!t.last_micro_step_) return false;
      optimizer_step(t);
      return true;
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
    count_step(t.optimizer_, t.step_lrs_, t.state_, stepped);
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

  /// What run_fit asks of Trainer `t` and its loaders for one fit (`val`: a pointer to the validation data, or
  /// nullptr).
  template <class TrainData, class ValData>
  class Driver final : public FitDriver {
   public:
    Driver(T& t, TrainData& train, ValData val, const FitOptions& options)
        : FitDriver({t.state_, t.epoch_batches_, t.resume_batches_, t.epoch_cut_, t.last_micro_step_,
                     t.step_validated_},
                    options, !std::is_same_v<ValData, std::nullptr_t>),
          t_(t), train_(train), val_(val) {}

    void on_fit_begin() override { t_.on_fit_begin(); }
    void on_fit_end() override { t_.on_fit_end(); }
    void on_epoch_begin() override { t_.on_epoch_begin(); }
    bool on_epoch_end() override { return t_.on_epoch_end(); }
    bool on_validation_end(const Metrics& m) override { return t_.on_validation_end(m); }
    void on_step_end() override { t_.on_step_end(); }
    bool agree_any(bool b) override { return t_.agree_any(b); }
    void train_mode() override { t_.module().train(); }
    Metrics evaluate() override {
      if constexpr (!std::is_same_v<ValData, std::nullptr_t>) return t_.evaluate(*val_, options().limit_val_batches);
      else return {};  // run_fit asks only when has_val()
    }
    void wait_for_device() override { Loops::wait_for_device(t_); }
    void optimizer_step() override { Loops::optimizer_step(t_); }
    int64_t begin_epoch() override {
      if constexpr (requires { train_.set_epoch(t_.state_.epoch); }) train_.set_epoch(t_.state_.epoch);
      return size_or_unknown(train_);
    }
    void reshard_resumed_epoch() override { Loops::reshard_resumed_epoch(t_, train_); }
    void start_batches() override {
      // A resumed epoch passes over the batches already consumed: a loader with begin_at(k) (data::from_torch)
      // skips them before loading any; otherwise the iterator is advanced without dereferencing (TensorLoader
      // assembles a batch only on dereference).
      constexpr bool skips = requires {
        { train_.begin_at(int64_t{}) } -> std::same_as<Iterator>;
      };
      const int64_t done = t_.state_.batch_in_epoch;
      if constexpr (skips) {
        if (done > 0) it_.emplace(train_.begin_at(done));
        else it_.emplace(std::begin(train_));
      } else {
        it_.emplace(std::begin(train_));
      }
      end_.emplace(std::end(train_));
      if constexpr (!skips)
        for (int64_t i = 0; i < done && *it_ != *end_; ++i) ++*it_;
    }
    bool batches_left() override { return *it_ != *end_; }
    void next_batch() override { ++*it_; }
    void end_batches() override {
      end_.reset();
      it_.reset();
    }
    bool train_micro_step() override {
      auto&& item = **it_;
      return Loops::train_micro_step(t_, t_.to_device(item));
    }
    void count_result(FitResult& result, int64_t tokens) override {
      result.world_size = t_.template policy<Category::parallel>().world_size();
      if (t_.counts_tokens()) sum_tokens(t_, result, tokens, options());
    }

   private:
    using Iterator = decltype(std::begin(std::declval<TrainData&>()));
    T& t_;
    TrainData& train_;
    ValData val_;
    std::optional<Iterator> it_;
    std::optional<decltype(std::end(std::declval<TrainData&>()))> end_;
  };

  template <class TrainData, class ValData>
  static FitResult fit(T& t, TrainData& train, ValData val, const FitOptions& options) {
    static_assert(not_a_raw_torch_loader<TrainData>());
    // The Driver's members are virtual, so they are instantiated at the end of the translation unit, outside the
    // user's call: a loader whose items are no batch is refused here, where the error names the user's fit call
    // (to_device's own check would name only this header).
    static_assert(yields_batch<decltype(*std::begin(std::declval<TrainData&>()))>,
                  "policytrain::Trainer: the loader yields neither a policytrain::Batch nor one stacked "
                  "torch::data::Example (a std::vector of separate examples: the dataset is not mapped with "
                  "Stack<>); map the dataset with `.map(torch::data::transforms::Stack<>())`");
    t.options_ = options;
    check_unique_parameters(t.optimizer_, t.module());
    // Shards of different lengths (data::UnrepeatedDistributedSampler, for validation) would make the ranks step a
    // different number of times, and the gradient reductions wait for each other until the timeout.
    if constexpr (requires { { train.training_refusal() } -> std::convertible_to<std::string>; })
      if (!train.training_refusal().empty()) throw std::invalid_argument(train.training_refusal());
    check_fit_options(options, !std::is_same_v<ValData, std::nullptr_t>, DeclaresTokens<Task>,
                      DeclaresFlopsPerToken<Task>);
    t.state_.stop_requested = false;
    t.state_.stop_at_step = false;
    t.step_validated_ = false;
    t.module().train();
    if constexpr (!std::is_same_v<ValData, std::nullptr_t>) check_monitors<Task>(t.policies_, t.scalar_metric_names());
    Driver<TrainData, ValData> d(t, train, val, options);
    return run_fit(d);
  }
};

}  // namespace policytrain::detail
