#pragma once
/// \file
/// `Trainer<Task, Policies...>`: one generic training loop whose features are compile-time policies.
///
/// Policies are unordered. Each declares a category (parallel, accumulation, precision, schedule,
/// checkpoint) or none (a callback). A category that is not named gets its default, which has no hooks
/// and so compiles to nothing. Within one hook the Trainer calls the policies in a fixed order —
/// parallel, accumulation, precision, schedule, checkpoint, then the callbacks in the order given —
/// so the order of the template arguments matters only among callbacks.
///
/// The step pipeline, fixed and correct by construction:
///   forward (around_forward: autocast) → transform_loss (accumulation normalisation, loss scale)
///   → should_step? → backward (around_backward: no-sync on non-final micro-steps)
///   → [last micro-step] before_step (reduce, normalise, unscale, clip) → step (skipped on inf/NaN)
///   → after_step (scale update, schedule, EMA, logging) → zero_grad → on_step_end (checkpoints).
/// A step policy (step::CudaGraph) may capture forward to step into one CUDA graph and replay it; the host part
/// (counters, after_step, on_step_end) then runs beside the replay. Every hook inside the captured part must be
/// graph-safe (core/hooks.hpp), checked at compile time.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <policytrain/accumulation/none.hpp>
#include <policytrain/checkpoint/none.hpp>
#include <policytrain/core/batch.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/context.hpp>
#include <policytrain/core/hooks.hpp>
#include <policytrain/core/metric.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/parallel_services.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/core/state.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/single.hpp>
#include <policytrain/precision/fp32.hpp>
#include <policytrain/schedule/constant.hpp>

namespace policytrain {

namespace detail {

template <Category C, class... Ps>
inline constexpr int count_category = ((category_of<Ps> == C ? 1 : 0) + ... + 0);

/// The policy of category C among Ps, or Default. Instantiated with the whole pack so that the compiler's
/// message names every policy involved.
template <Category C, class Default, class... Ps>
struct PickCategory {
  static_assert(C != Category::parallel || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one parallel policy given; keep exactly one of them "
                "(parallel::Single or parallel::DataParallel)");
  static_assert(C != Category::accumulation || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one accumulation policy given; keep exactly one accumulate:: policy");
  static_assert(C != Category::precision || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one precision policy given; keep exactly one precision:: policy "
                "(its dtype is a run-time option)");
  static_assert(C != Category::schedule || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one schedule policy given; keep exactly one schedule:: policy "
                "(warmup is an option of every schedule)");
  static_assert(C != Category::checkpoint || count_category<C, Ps...> <= 1,
                "policytrain::Trainer: more than one checkpoint policy given; keep exactly one checkpoint:: policy");
  template <class P, class... Rest>
  static auto pick() {
    if constexpr (category_of<P> == C) return std::type_identity<P>{};
    else if constexpr (sizeof...(Rest) == 0) return std::type_identity<Default>{};
    else return pick<Rest...>();
  }
  static auto pick_any() {
    if constexpr (sizeof...(Ps) == 0) return std::type_identity<Default>{};
    else return pick<Ps...>();
  }
  using type = typename decltype(pick_any())::type;
};

template <class T, class... Ps>
inline constexpr int count_type = ((std::is_same_v<T, Ps> ? 1 : 0) + ... + 0);

template <class... Ps>
struct UniqueCallbacks {
  static_assert(((category_of<Ps> != Category::callback || count_type<Ps, Ps...> == 1) && ...),
                "policytrain::Trainer: the same callback type is given twice; give each callback once "
                "(one callback can hold several settings)");
  static constexpr bool ok = true;
};

template <class... Ps>
using CallbackTuple = decltype(std::tuple_cat(
    std::declval<std::conditional_t<category_of<Ps> == Category::callback, std::tuple<Ps>, std::tuple<>>>()...));

template <class T, class... Args>
constexpr size_t index_of() {
  size_t i = 0, found = sizeof...(Args);
  ((found = (found == sizeof...(Args) && std::is_same_v<T, std::remove_cvref_t<Args>>) ? i : found, ++i), ...);
  return found;
}

/// The argument of type T, forwarded (moved when it was passed as an rvalue), or a default-constructed T.
template <class T, class... Args>
T take_or_default(std::tuple<Args...>& args) {
  constexpr size_t idx = index_of<T, Args...>();
  if constexpr (idx == sizeof...(Args)) return T{};
  else return T(static_cast<std::tuple_element_t<idx, std::tuple<Args...>>&&>(std::get<idx>(args)));
}

/// Tags the Trainer's private constructor, so that the public variadic one never takes its place.
struct FromTuple {};

template <class C>
int64_t size_or_unknown(C& c) {
  if constexpr (requires { { c.batches_per_epoch() } -> std::convertible_to<int64_t>; }) return c.batches_per_epoch();
  else if constexpr (requires { std::size(c); }) return static_cast<int64_t>(std::size(c));
  else return -1;
}

/// Refuses LibTorch's DataLoader passed as it is (its sampler is out of reach: no set_epoch, no mid-epoch resume,
/// and a pass left early makes its next begin() throw).
template <class Data>
constexpr bool not_a_raw_torch_loader() {
  static_assert(!requires(Data& d) { typename Data::BatchRequestType; d.join(); d.options().workers; },
                "policytrain::Trainer: a torch::data DataLoader is passed as it is, so the Trainer can neither give its "
                "sampler the epoch (set_epoch) nor resume it mid-epoch, and a pass left early makes its next begin() "
                "throw; build it with policytrain::data::from_torch(dataset, sampler, options) "
                "(<policytrain/data/from_torch.hpp>), which takes make_data_loader's arguments");
  return true;
}

}  // namespace detail

template <class Task, class... Policies>
class Trainer;

/// The Trainer. `Task` provides `torch::Tensor training_step(const Batch&)` (the mean loss of the batch) and
/// `torch::nn::Module& module()`; `Prediction validation_step(const Batch&)` when it is evaluated.
template <class Task, class... Policies>
class Trainer {
  static_assert(TrainableTask<Task>,
                "policytrain::Trainer: the Task lacks `torch::Tensor training_step(const policytrain::Batch&)` "
                "or `torch::nn::Module& module()`; add both (training_step returns the batch's mean loss)");
  static_assert(detail::UniqueCallbacks<Policies...>::ok);

 public:
  /// The policy chosen for each category (its default when none was given), the callbacks, and the context type.
  ///@{
  using parallel_type = typename detail::PickCategory<Category::parallel, parallel::Single, Policies...>::type;
  using accumulation_type = typename detail::PickCategory<Category::accumulation, accumulate::None, Policies...>::type;
  using precision_type = typename detail::PickCategory<Category::precision, precision::Fp32, Policies...>::type;
  using schedule_type = typename detail::PickCategory<Category::schedule, schedule::Constant, Policies...>::type;
  using checkpoint_type = typename detail::PickCategory<Category::checkpoint, checkpoint::None, Policies...>::type;
  using callbacks_type = detail::CallbackTuple<Policies...>;
  using context_type = Context<Trainer>;
  ///@}
  /// Every policy the Trainer holds, in hook order.
  using policies_type = decltype(std::tuple_cat(
      std::declval<std::tuple<parallel_type, accumulation_type, precision_type, schedule_type, checkpoint_type>>(),
      std::declval<callbacks_type>()));

  /// Builds the Trainer; each policy given is moved in, every other one is default-constructed.
  /// `policies` may be any subset of the Trainer's policies, in any order.
  /// Policies passed as lvalues are copied, rvalues moved.
  template <class... Given>
  Trainer(Task& task, torch::optim::Optimizer& optimizer, Given&&... policies)
      : Trainer(detail::FromTuple{}, task, optimizer, std::forward_as_tuple(std::forward<Given>(policies)...)) {
    static_assert(((detail::count_type<std::remove_cvref_t<Given>, Policies...> == 1) && ...),
                  "policytrain::Trainer: a constructor argument is not one of the Trainer's policies; "
                  "name its type among the Trainer's template arguments");
  }

  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

 private:
  template <class... Refs>
  Trainer(detail::FromTuple, Task& task, torch::optim::Optimizer& optimizer, std::tuple<Refs...> args)
      : task_(task),
        optimizer_(optimizer),
        ctx_(*this),
        policies_([&]<size_t... I>(std::index_sequence<I...>) {
          return policies_type{detail::take_or_default<std::tuple_element_t<I, policies_type>>(args)...};
        }(std::make_index_sequence<std::tuple_size_v<policies_type>>{})) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      (void)(detail::HookCheck<std::tuple_element_t<I, policies_type>, context_type>::ok && ...);
    }(std::make_index_sequence<std::tuple_size_v<policies_type>>{});
    static_assert(count_hook_step() <= 1,
                  "policytrain::Trainer: more than one policy defines step(ctx); only the precision policy may "
                  "replace the optimizer step");
    static_assert(count_hook<RunStepOf>() <= 1,
                  "policytrain::Trainer: more than one step policy (a run_step hook: step::CudaGraph) given; keep one");
    if constexpr (has_step_policy())
      [&]<size_t... I>(std::index_sequence<I...>) {
        (void)(detail::GraphSafeCheck<std::tuple_element_t<I, policies_type>, context_type>::ok && ...);
      }(std::make_index_sequence<std::tuple_size_v<policies_type>>{});
    auto params = module().parameters();
    if (!params.empty()) device_ = params.front().device();
  }

 public:

  // --- what the context exposes ---
  /// The user's task.
  Task& task() { return task_; }
  /// The task's module.
  torch::nn::Module& module() { return task_.module(); }
  /// The optimizer being stepped.
  torch::optim::Optimizer& optimizer() { return optimizer_; }
  /// The run's counters.
  TrainState& state() { return state_; }
  /// The run's counters.
  const TrainState& state() const { return state_; }
  /// The options of the current (or last) fit.
  const FitOptions& options() const { return options_; }
  /// The device of the module's parameters at construction (batches are moved there).
  torch::Device device() const { return device_; }
  /// The context hooks receive.
  context_type& context() { return ctx_; }

  /// The policy of category C (its default when none was given).
  template <Category C>
  auto& policy() {
    if constexpr (C == Category::parallel) return std::get<0>(policies_);
    else if constexpr (C == Category::accumulation) return std::get<1>(policies_);
    else if constexpr (C == Category::precision) return std::get<2>(policies_);
    else if constexpr (C == Category::schedule) return std::get<3>(policies_);
    else if constexpr (C == Category::checkpoint) return std::get<4>(policies_);
    else static_assert(C != Category::callback, "policytrain::Trainer::policy<C>: callbacks have no category; use get<T>()");
  }
  /// Whether the Trainer holds a policy or callback of type P (the defaults included).
  template <class P>
  static constexpr bool has() {
    return []<size_t... I>(std::index_sequence<I...>) {
      return (std::is_same_v<P, std::tuple_element_t<I, policies_type>> || ...);
    }(std::make_index_sequence<std::tuple_size_v<policies_type>>{});
  }
  /// The policy or callback of type P (a compile error when the Trainer has none).
  template <class P>
  P& get() {
    static_assert(has<P>(), "policytrain::Trainer::get<P>: the Trainer has no policy of type P; add P to its template arguments");
    return std::get<P>(policies_);
  }
  /// Calls `f(policy)` for every policy, in hook order.
  template <class F>
  void for_each_policy(F&& f) {
    std::apply([&](auto&... p) { (f(p), ...); }, policies_);
  }

  /// The Trainer's counters and every stateful policy's state, each under "trainer/" or "<policy name>/".
  /// Model, optimizer and RNG are not included: the checkpoint policy saves those beside it.
  StateDict state_dict() const {
    StateDict d{{"trainer/epoch", scalar_tensor(state_.epoch)},
                {"trainer/global_step", scalar_tensor(state_.global_step)},
                {"trainer/skipped_steps", scalar_tensor(state_.skipped_steps)},
                {"trainer/batch_in_epoch", scalar_tensor(state_.batch_in_epoch)},
                {"trainer/samples_seen", scalar_tensor(state_.samples_seen)},
                {"trainer/best_metric", scalar_tensor(state_.best_metric)},
                {"trainer/best_epoch", scalar_tensor(state_.best_epoch)}};
    std::apply([&](const auto&... p) { (add_state(d, p), ...); }, policies_);
    return d;
  }
  /// Restores what state_dict() returned. Throws std::invalid_argument naming a missing entry.
  /// A state taken mid-epoch (batch_in_epoch > 0) makes the next fit skip that many micro-batches of its first
  /// epoch, so that a resumed run sees exactly the batches the interrupted one had not yet consumed.
  void load_state_dict(const StateDict& d) {
    state_.epoch = state_int(d, "trainer/epoch");
    state_.global_step = state_int(d, "trainer/global_step");
    state_.skipped_steps = state_int(d, "trainer/skipped_steps");
    state_.batch_in_epoch = state_int(d, "trainer/batch_in_epoch");
    resume_batches_ = state_.batch_in_epoch;
    state_.samples_seen = state_int(d, "trainer/samples_seen");
    state_.best_metric = state_double(d, "trainer/best_metric");
    state_.best_epoch = state_int(d, "trainer/best_epoch");
    std::apply([&](auto&... p) { (load_state(d, p), ...); }, policies_);
  }

  // The parallel services (core/parallel_services.hpp): required of the parallel policy, each checked with a
  // static_assert naming the member and its signature; no fallback to one process's behaviour.
  static_assert(detail::ParallelServicesCheck<parallel_type, context_type>::ok);
  /// Whether this process logs, prints and writes files (rank 0 under data parallelism).
  bool is_main() { return policy<Category::parallel>().is_main(); }
  /// True on every rank when `b` is true on any rank (the parallel policy decides; identity on one process).
  bool agree_any(bool b) { return policy<Category::parallel>().agree_any(ctx_, b); }

  /// Whether each rank keeps only its own partition's gradients after the backward (ZeRO-2: the parallel policy's
  /// gradients_sharded()); then a statistic over every gradient (a norm, an inf flag) needs
  /// reduce_gradient_statistic.
  bool gradients_sharded() { return policy<Category::parallel>().gradients_sharded(); }
  /// Reduces `t` in place over the ranks that hold the gradient shards (identity when gradients are not sharded).
  void reduce_gradient_statistic(torch::Tensor& t, GradientReduce op) {
    policy<Category::parallel>().reduce_gradient_statistic(ctx_, t, op);
  }

  /// Runs `f()` with the weights the evaluation uses swapped into the module (Context::with_evaluated_weights)
  /// and returns their name ("model": the live weights).
  template <class F>
  std::string with_evaluated_weights(F&& f) {
    std::string names;
    nest_evaluated_weights<0>(f, names);
    return names.empty() ? std::string("model") : names;
  }
  /// After evaluated weights were loaded into the module: every on_weights_loaded hook (callbacks::Ema evaluates
  /// them from now on instead of its old average).
  void weights_loaded() {
    each([&](auto& p) { if constexpr (HasOnWeightsLoaded<std::remove_cvref_t<decltype(p)>, context_type>) p.on_weights_loaded(ctx_); });
  }

  /// Trains for `options.epochs` epochs (from the current state's epoch, so a resumed run continues).
  template <class TrainData>
  FitResult fit(TrainData& train, const FitOptions& options = {}) {
    return fit_impl(train, nullptr, options);
  }
  /// Trains, and evaluates on `val` after each epoch.
  template <class TrainData, class ValData>
  FitResult fit(TrainData& train, ValData& val, const FitOptions& options = {}) {
    return fit_impl(train, &val, options);
  }

  /// Evaluates the task on `data` in eval mode without gradients (under the precision policy's autocast,
  /// with the weights a callback such as EMA chooses); metrics are reduced across ranks.
  template <class Data>
  Metrics evaluate(Data& data, int64_t limit_batches = -1) {
    static_assert(detail::not_a_raw_torch_loader<Data>());
    static_assert(EvaluableTask<Task>,
                  "policytrain::Trainer::evaluate: the Task lacks `policytrain::Prediction validation_step(const "
                  "policytrain::Batch&)`; add it (return the batch's mean loss and the model's output)");
    const bool was_training = module().is_training();
    module().eval();
    torch::NoGradGuard no_grad;
    MetricCollection* epoch = epoch_metrics();
    auto run = [&]() -> Metrics {
      MetricsAccumulator acc;
      if (epoch) epoch->reset();
      int64_t i = 0;
      // A sharded loader pads the end of a rank's shard with repeated samples: they are not counted.
      int64_t keep = -1;
      if constexpr (requires { data.num_samples(); data.padding(); }) keep = data.num_samples() - data.padding();
      for (auto&& item : data) {
        if (limit_batches >= 0 && i++ >= limit_batches) break;
        Batch b = to_device(item);
        if (keep >= 0) {
          if (b.size() > keep) b = Batch{b.x.slice(0, 0, keep), b.y.slice(0, 0, keep)};
          keep -= b.size();
          if (b.size() == 0) continue;
        }
        Prediction p = wrap_forward<0>([&] { return task_.validation_step(b); });
        acc.add(p.loss, p.output, b.y, p.metrics);
        if (epoch) epoch->update(p.output, b.y);
      }
      policy<Category::parallel>().reduce_metrics(ctx_, acc);
      Metrics m = acc.result();
      if (epoch) {
        policy<Category::parallel>().reduce_metric_states(ctx_, epoch->states());
        // Every rank computes the epoch's values from the reduced states; one without a batch too.
        for (const auto& kv : epoch->compute()) {
          const std::string& name = kv.first;
          const torch::Tensor& value = kv.second;
          if (!contains(epoch->scalar_names(), name)) m.tensors[name] = value;
          else if (value.numel() != 1)
            throw std::runtime_error(policytrain::detail::format(
                "policytrain::Trainer: the task's epoch-level metric '{}' computed {} values (shape {}); a scalar "
                "metric computes one (a metric of several declares `bool scalar() const {{ return false; }}`)",
                name, value.numel(), c10::str(value.sizes())));
          else if (name == "accuracy") m.accuracy = value.item<double>();
          else m.extra[name] = value.item<double>();
        }
      }
      return m;
    };
    Metrics m = wrap_evaluate<0>(run);
    module().train(was_training);
    check_reported(m);
    return m;
  }

  /// The lr of param group `g` in the latest optimizer step (its current lr before the first).
  double step_lr(size_t g = 0) {
    return g < step_lrs_.size() ? step_lrs_[g] : optimizer_.param_groups().at(g).options().get_lr();
  }

  /// The metrics a validation of the task reports: "loss" and the task's metric_names() when it declares them,
  /// else "loss" and "accuracy" (built in for classification outputs).
  std::vector<std::string> metric_names() {
    std::vector<std::string> n{"loss"};
    if constexpr (DeclaresMetrics<Task>) {
      for (auto& k : std::vector<std::string>(task_.metric_names()))
        if (k != "loss") n.push_back(std::move(k));
    } else if constexpr (!DeclaresEpochMetrics<Task>) {
      n.push_back("accuracy");
    }
    if (MetricCollection* epoch = epoch_metrics())
      for (auto& k : epoch->names())
        if (!contains(n, k)) n.push_back(std::move(k));
    return n;
  }

  /// The names of metric_names() whose values are single numbers: what a monitor may watch and a log has a column
  /// for (all but the task's non-scalar epoch-level metrics, a confusion matrix).
  std::vector<std::string> scalar_metric_names() {
    std::vector<std::string> n;
    MetricCollection* epoch = epoch_metrics();
    for (auto& k : metric_names())
      if (!epoch || contains(epoch->scalar_names(), k) || !contains(epoch->names(), k)) n.push_back(std::move(k));
    return n;
  }

  /// The task's epoch-level metrics (its `MetricCollection metrics()`, asked once), or nullptr when it declares none.
  MetricCollection* epoch_metrics() {
    if constexpr (DeclaresEpochMetrics<Task>) {
      if (!epoch_metrics_) epoch_metrics_.emplace(task_.metrics());
      return &*epoch_metrics_;
    } else {
      return nullptr;
    }
  }

 private:
  friend class Context<Trainer>;

  static constexpr int count_hook_step() {
    return []<size_t... I>(std::index_sequence<I...>) {
      return ((HasStep<std::tuple_element_t<I, policies_type>, context_type> ? 1 : 0) + ... + 0);
    }(std::make_index_sequence<std::tuple_size_v<policies_type>>{});
  }
  template <class P>
  struct RunStepOf : std::bool_constant<HasRunStep<P, context_type>> {};
  template <template <class> class Has>
  static constexpr int count_hook() {
    return []<size_t... I>(std::index_sequence<I...>) {
      return ((Has<std::tuple_element_t<I, policies_type>>::value ? 1 : 0) + ... + 0);
    }(std::make_index_sequence<std::tuple_size_v<policies_type>>{});
  }
  static constexpr size_t step_policy_index() {
    return []<size_t... I>(std::index_sequence<I...>) {
      size_t found = sizeof...(I);
      ((found = (found == sizeof...(I) && RunStepOf<std::tuple_element_t<I, policies_type>>::value) ? I : found), ...);
      return found;
    }(std::make_index_sequence<std::tuple_size_v<policies_type>>{});
  }
  static std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& k : v) s += (s.empty() ? "" : ", ") + k;
    return s;
  }
  static bool contains(const std::vector<std::string>& v, const std::string& k) {
    return std::find(v.begin(), v.end(), k) != v.end();
  }

  /// Refuses, before anything is trained, a policy whose monitor (its monitored_metric(): checkpoint::Disk's best,
  /// EarlyStopping, schedule::Lr's plateau) names a metric the validation will not report.
  void check_monitors() {
    const std::vector<std::string> known = scalar_metric_names();
    each([&](auto& p) {
      using P = std::remove_cvref_t<decltype(p)>;
      if constexpr (requires { { p.monitored_metric() } -> std::convertible_to<std::string>; }) {
        const std::string metric = p.monitored_metric();
        if (metric.empty() || contains(known, metric)) return;
        throw std::invalid_argument(policytrain::detail::format(
            "policytrain::Trainer: {} monitors the metric '{}', which the validation does not report; it reports: "
            "{}{}; monitor one of these",
            policy_name<P>(), metric, joined(known),
            DeclaresMetrics<Task> || DeclaresEpochMetrics<Task>
                ? " (loss, the task's metric_names() and the scalar ones of its metrics())"
                                  : " (built in; a task that reports its own metrics in Prediction::metrics lists "
                                    "them in `std::vector<std::string> metric_names()`)"));
      }
    });
  }

  /// Refuses an evaluation whose metrics differ from what the task declares (a declared metric missing, or one
  /// reported but not declared), since a monitor was checked against the declaration.
  void check_reported(const Metrics& m) {
    if (m.samples == 0) return;
    if constexpr (DeclaresMetrics<Task>) {
      for (const auto& k : metric_names())
        if (!m.has(k) && !m.tensors.count(k))
          throw std::runtime_error("policytrain::Trainer: the task declares the metric '" + k + "' in metric_names(), "
                                   "but its validation reports: " + joined(m.names()) + "; report it in "
                                   "Prediction::metrics (accuracy is built in only for [batch, classes] scores with "
                                   "integer targets)");
      const auto declared = metric_names();
      for (const auto& [k, v] : m.extra)
        if (!contains(declared, k))
          throw std::runtime_error("policytrain::Trainer: the task's validation_step reports the metric '" + k +
                                   "' (Prediction::metrics), which its metric_names() does not list (" +
                                   joined(declared) + "); add it there");
    } else {
      const auto declared = metric_names();
      for (const auto& [k, v] : m.extra)
        if (!contains(declared, k))
        throw std::runtime_error("policytrain::Trainer: the task's validation_step reports the metric '" +
                                 k + "' (Prediction::metrics) but the task declares no "
                                 "metric_names(); add `std::vector<std::string> metric_names()` listing every metric "
                                 "it reports, so that a monitor of one is checked when fit begins");
    }
  }

  static constexpr bool has_step_policy() { return step_policy_index() < std::tuple_size_v<policies_type>; }
  auto& step_policy() { return std::get<step_policy_index()>(policies_); }

  bool capturing() {
    if constexpr (has_step_policy()) return step_policy().capturing();
    else return false;
  }
  const torch::Tensor& step_tensor() {
    if constexpr (has_step_policy()) return step_policy().step_tensor();
    else {
      static const torch::Tensor none;
      return none;
    }
  }
  void prepare_capture() {
    each([&](auto& p) { if constexpr (HasPrepareCapture<std::remove_cvref_t<decltype(p)>, context_type>) p.prepare_capture(ctx_); });
  }
  void on_replay() {
    each([&](auto& p) { if constexpr (HasOnReplay<std::remove_cvref_t<decltype(p)>, context_type>) p.on_replay(ctx_); });
  }
  std::vector<std::string> graph_refusals() {
    std::vector<std::string> r;
    each([&](auto& p) {
      if constexpr (HasGraphRefusal<std::remove_cvref_t<decltype(p)>, context_type>) {
        std::string why = p.graph_refusal(ctx_);
        if (!why.empty()) r.push_back(std::move(why));
      }
    });
    return r;
  }

  template <class P>
  static std::string state_prefix() {
    // Built in place: `std::string(name) + "/"` made GCC 12 warn at -O1 (-Warray-bounds, a false positive in its
    // inlined concatenation) in files that instantiate a Trainer with a stateful policy.
    const std::string_view name = policy_name<P>();
    std::string prefix;
    prefix.reserve(name.size() + 1);
    prefix.append(name.data(), name.size());
    prefix.push_back('/');
    return prefix;
  }
  template <class P>
  static void add_state(StateDict& d, const P& p) {
    if constexpr (Stateful<P>) {
      const std::string prefix = state_prefix<P>();
      for (auto& [k, v] : p.state_dict()) {
        // Appended in place: `prefix + k` made GCC 12 warn (-Warray-bounds, a false positive in its inlined
        // std::string concatenation) in every file that instantiates a Trainer.
        std::string key;
        key.reserve(prefix.size() + k.size());
        key.append(prefix).append(k);
        d.emplace(std::move(key), v);
      }
    }
  }
  template <class P>
  static void load_state(const StateDict& d, P& p) {
    if constexpr (Stateful<P>) p.load_state_dict(sub_state(d, state_prefix<P>()));
  }

  template <class Item>
  Batch to_device(Item&& item) {
    Batch b = [&]() -> Batch {
      if constexpr (std::is_convertible_v<Item, Batch>) {
        return Batch(std::forward<Item>(item));
      } else {
        static_assert(requires { Batch{item.data, item.target}; },
                      "policytrain::Trainer: the loader yields neither a policytrain::Batch nor one stacked "
                      "torch::data::Example (a std::vector of separate examples: the dataset is not mapped with "
                      "Stack<>); map the dataset with `.map(torch::data::transforms::Stack<>())`");
        return Batch{item.data, item.target};  // torch::data::Example<>
      }
    }();
    if (b.x.device() != device_) b = b.to(device_, /*non_blocking=*/true);
    return b;
  }

  // --- hook dispatch: one function per hook, each a fold over the policies ---
  template <class F>
  void each(F&& f) { std::apply([&](auto&... p) { (f(p), ...); }, policies_); }

  void on_fit_begin() { each([&](auto& p) { if constexpr (HasOnFitBegin<std::remove_cvref_t<decltype(p)>, context_type>) p.on_fit_begin(ctx_); }); }
  void on_fit_end() { each([&](auto& p) { if constexpr (HasOnFitEnd<std::remove_cvref_t<decltype(p)>, context_type>) p.on_fit_end(ctx_); }); }
  void on_epoch_begin() { each([&](auto& p) { if constexpr (HasOnEpochBegin<std::remove_cvref_t<decltype(p)>, context_type>) p.on_epoch_begin(ctx_); }); }
  bool on_epoch_end() {
    bool stop = false;
    each([&](auto& p) {
      using P = std::remove_cvref_t<decltype(p)>;
      if constexpr (HasOnEpochEnd<P, context_type>) {
        if constexpr (std::is_void_v<decltype(p.on_epoch_end(ctx_))>) p.on_epoch_end(ctx_);
        else stop = p.on_epoch_end(ctx_) || stop;
      }
    });
    return stop;
  }
  bool on_validation_end(const Metrics& m) {
    bool stop = false;
    each([&](auto& p) {
      using P = std::remove_cvref_t<decltype(p)>;
      if constexpr (HasOnValidationEnd<P, context_type>) {
        if constexpr (std::is_void_v<decltype(p.on_validation_end(ctx_, m))>) p.on_validation_end(ctx_, m);
        else stop = p.on_validation_end(ctx_, m) || stop;
      }
    });
    return stop;
  }
  torch::Tensor transform_loss(torch::Tensor loss) {
    each([&](auto& p) {
      if constexpr (HasTransformLoss<std::remove_cvref_t<decltype(p)>, context_type>) loss = p.transform_loss(ctx_, std::move(loss));
    });
    return loss;
  }
  bool should_step() {
    bool step = true;
    each([&](auto& p) {
      if constexpr (HasShouldStep<std::remove_cvref_t<decltype(p)>, context_type>) step = p.should_step(ctx_) && step;
    });
    return step;
  }
  void before_step() { each([&](auto& p) { if constexpr (HasBeforeStep<std::remove_cvref_t<decltype(p)>, context_type>) p.before_step(ctx_); }); }
  /// The optimizer step, inside every around_step hook (the parallel policy's outermost).
  bool do_step() { return wrap_step<0>([&] { return do_step_inner(); }); }
  template <size_t I, class F>
  bool wrap_step(F&& f) {
    if constexpr (I == std::tuple_size_v<policies_type>) {
      return f();
    } else {
      auto& p = std::get<I>(policies_);
      if constexpr (HasAroundStep<std::remove_cvref_t<decltype(p)>, context_type>)
        return p.around_step(ctx_, [&]() -> bool { return wrap_step<I + 1>(f); });
      else return wrap_step<I + 1>(f);
    }
  }
  void before_save() { each([&](auto& p) { if constexpr (HasBeforeSave<std::remove_cvref_t<decltype(p)>, context_type>) p.before_save(ctx_); }); }
  void after_save() { each([&](auto& p) { if constexpr (HasAfterSave<std::remove_cvref_t<decltype(p)>, context_type>) p.after_save(ctx_); }); }
  bool do_step_inner() {
    if constexpr (count_hook_step() == 0) {
      optimizer_.step();
      return true;
    } else {
      bool stepped = true;
      each([&](auto& p) { if constexpr (HasStep<std::remove_cvref_t<decltype(p)>, context_type>) stepped = p.step(ctx_); });
      return stepped;
    }
  }
  void after_step(bool stepped) {
    each([&](auto& p) { if constexpr (HasAfterStep<std::remove_cvref_t<decltype(p)>, context_type>) p.after_step(ctx_, stepped); });
  }
  void flush_checks() { each([&](auto& p) { if constexpr (HasFlushChecks<std::remove_cvref_t<decltype(p)>, context_type>) p.flush_checks(ctx_); }); }
  void before_checkpoint(bool epoch_end) {
    each([&](auto& p) { if constexpr (HasBeforeCheckpoint<std::remove_cvref_t<decltype(p)>, context_type>) p.before_checkpoint(ctx_, epoch_end); });
  }
  void on_step_end() { each([&](auto& p) { if constexpr (HasOnStepEnd<std::remove_cvref_t<decltype(p)>, context_type>) p.on_step_end(ctx_); }); }

  /// Nests the around_forward hooks, the first policy outermost.
  template <size_t I, class F>
  decltype(auto) wrap_forward(F&& f) {
    if constexpr (I == std::tuple_size_v<policies_type>) {
      return f();
    } else {
      auto& p = std::get<I>(policies_);
      if constexpr (HasAroundForward<std::remove_cvref_t<decltype(p)>, context_type>)
        return p.around_forward(ctx_, [&]() -> decltype(auto) { return wrap_forward<I + 1>(f); });
      else return wrap_forward<I + 1>(f);
    }
  }
  template <size_t I, class F>
  void wrap_backward(F&& f) {
    if constexpr (I == std::tuple_size_v<policies_type>) {
      f();
    } else {
      auto& p = std::get<I>(policies_);
      if constexpr (HasAroundBackward<std::remove_cvref_t<decltype(p)>, context_type>)
        p.around_backward(ctx_, [&] { wrap_backward<I + 1>(f); });
      else wrap_backward<I + 1>(f);
    }
  }
  template <size_t I, class F>
  void nest_evaluated_weights(F& f, std::string& names) {
    if constexpr (I == std::tuple_size_v<policies_type>) {
      f();
    } else {
      auto& p = std::get<I>(policies_);
      if constexpr (HasAroundEvaluatedWeights<std::remove_cvref_t<decltype(p)>, context_type>) {
        std::string inner;
        const std::string name = p.around_evaluated_weights(ctx_, [&] { nest_evaluated_weights<I + 1>(f, inner); });
        names = name.empty() ? inner : inner.empty() ? name : name + "+" + inner;
      } else {
        nest_evaluated_weights<I + 1>(f, names);
      }
    }
  }
  template <size_t I, class F>
  Metrics wrap_evaluate(F&& f) {
    if constexpr (I == std::tuple_size_v<policies_type>) {
      return f();
    } else {
      auto& p = std::get<I>(policies_);
      if constexpr (HasAroundEvaluate<std::remove_cvref_t<decltype(p)>, context_type>)
        return p.around_evaluate(ctx_, [&] { return wrap_evaluate<I + 1>(f); });
      else return wrap_evaluate<I + 1>(f);
    }
  }

  /// One micro-batch: forward, loss, backward, and the optimizer step when it ends a window. Under a step policy
  /// (step::CudaGraph) every micro-batch is a step, and the policy runs (or captures, or replays) the device part:
  /// forward, backward, before_step and step; the host part (counters, after_step, on_step_end) runs here.
  void train_micro_step(Batch b) {
    const int64_t n = b.size();
    ++state_.micro_step;
    ++state_.batch_in_epoch;
    state_.window_samples += n;
    state_.samples_seen += n;
    if constexpr (has_step_policy()) {
      last_micro_step_ = true;
      const bool stepped = step_policy().run_step(ctx_, b, [this](const Batch& sb) -> bool {
        forward_backward(sb);
        before_step();
        return do_step();
      });
      finish_step(stepped);
    } else {
      forward_backward(b);
      if (last_micro_step_) optimizer_step();
    }
  }

  void forward_backward(const Batch& b) {
    torch::Tensor loss = wrap_forward<0>([&]() -> torch::Tensor { return task_.training_step(b); });
    state_.last_loss = loss.detach();
    loss = transform_loss(std::move(loss));
    last_micro_step_ = should_step() || state_.batch_in_epoch == epoch_batches_;
    wrap_backward<0>([&] { loss.backward(); });
  }

  void optimizer_step() {
    before_step();
    finish_step(do_step());
  }

  void finish_step(bool stepped) {
    // The lrs this step used, before a schedule's after_step sets the next step's (Context::step_lr).
    const auto& groups = optimizer_.param_groups();
    step_lrs_.resize(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) step_lrs_[g] = groups[g].options().get_lr();
    ++state_.global_step;
    if (!stepped) ++state_.skipped_steps;
    after_step(stepped);
    // A step policy that replays a graph keeps the gradients where the graph writes them.
    if constexpr (has_step_policy()) {
      if (!step_policy().keeps_grads()) detail::release_grads(optimizer_);
    } else {
      detail::release_grads(optimizer_);
    }
    state_.micro_step = 0;
    state_.window_samples = 0;
    on_step_end();
  }

  /// A tensor listed twice in the optimizer (tied weights: Module::parameters() repeats a shared tensor) would be
  /// updated twice per step: refuse it.
  void check_unique_parameters() {
    std::unordered_set<const void*> seen;
    for (auto& g : optimizer_.param_groups())
      for (auto& p : g.params())
        if (!seen.insert(p.unsafeGetTensorImpl()).second) {
          std::string name = "(a tensor not in the module)";
          for (const auto& q : module().named_parameters(true))
            if (q.value().unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) { name = q.key(); break; }
          throw std::invalid_argument(
              "policytrain::Trainer: the optimizer holds the parameter '" + name + "' more than once (tied weights: "
              "torch::nn::Module::parameters() lists a shared tensor once per module that registers it), so every "
              "step would update it twice; build the optimizer from policytrain::unique_parameters(module)");
        }
  }

  template <class TrainData, class ValData>
  FitResult fit_impl(TrainData& train, ValData val, const FitOptions& options) {
    static_assert(detail::not_a_raw_torch_loader<TrainData>());
    options_ = options;
    check_unique_parameters();
    FitResult result;
    state_.stop_requested = false;
    state_.stop_at_step = false;
    module().train();
    if constexpr (!std::is_same_v<ValData, std::nullptr_t>) check_monitors();
    on_fit_begin();
    const int64_t start_epoch = state_.epoch;
    // A finished epoch leaves batch_in_epoch at 0: a state taken between epochs resumes at the next one's start.
    for (; state_.epoch < options.epochs && !state_.stop_requested; ++state_.epoch, state_.batch_in_epoch = 0) {
      if constexpr (requires { train.set_epoch(state_.epoch); }) train.set_epoch(state_.epoch);
      const int64_t n = detail::size_or_unknown(train);
      epoch_batches_ = options.limit_train_batches >= 0 && (n < 0 || options.limit_train_batches < n)
                           ? options.limit_train_batches : n;
      state_.batch_in_epoch = std::exchange(resume_batches_, 0);
      module().train();
      on_epoch_begin();
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t seen0 = state_.samples_seen;
      // A resumed epoch passes over the batches already consumed: a loader with begin_at(k) (data::from_torch)
      // skips them before loading any; otherwise the iterator is advanced without dereferencing (TensorLoader
      // assembles a batch only on dereference).
      constexpr bool skips = requires {
        { train.begin_at(int64_t{}) } -> std::same_as<decltype(std::begin(train))>;
      };
      auto it = [&] {
        if constexpr (skips) {
          if (state_.batch_in_epoch > 0) return train.begin_at(state_.batch_in_epoch);
        }
        return std::begin(train);
      }();
      const auto end = std::end(train);
      if constexpr (!skips)
        for (int64_t i = 0; i < state_.batch_in_epoch && it != end; ++i) ++it;
      bool cut = false;
      epoch_cut_ = false;
      for (; it != end; ++it) {
        if (epoch_batches_ >= 0 && state_.batch_in_epoch >= epoch_batches_) break;
        auto&& item = *it;
        train_micro_step(to_device(item));
        if (state_.stop_at_step && state_.micro_step == 0) break;  // after the step: handled below the loop
        if (options.max_steps >= 0 && state_.global_step >= options.max_steps) {
          state_.stop_requested = true;
          // Cut before the epoch's last batch: the epoch is not finished, and the next fit resumes it.
          if (epoch_batches_ >= 0) {
            cut = state_.batch_in_epoch < epoch_batches_;
          } else {
            ++it;
            cut = it != end;
          }
          epoch_cut_ = cut;
          break;
        }
      }
      // A stop at a step boundary (callbacks::Preemption): the epoch ends here, unvalidated, and resumes at the
      // next batch (the checkpoint policy's fit end saves it mid-epoch); no epoch-end hook runs, so a resumed run
      // validates and ends this epoch once, as the uninterrupted one does.
      if (state_.stop_at_step) {
        state_.stop_requested = true;
        epoch_cut_ = true;
        result.stopped_at_step = true;
        result.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        result.samples_seen += state_.samples_seen - seen0;
        result.epochs_run = state_.epoch - start_epoch;
        resume_batches_ = state_.batch_in_epoch;
        break;
      }
      // A window left open at the end of an epoch (unknown epoch length, or max_steps mid-window) is
      // stepped with the samples it has, normalised by their count.
      if (state_.micro_step > 0) {
        last_micro_step_ = true;
        optimizer_step();
      }
      result.train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      result.samples_seen += state_.samples_seen - seen0;
      bool stop = false;
      if constexpr (!std::is_same_v<ValData, std::nullptr_t>) {
        Metrics m = evaluate(*val, options.limit_val_batches);
        stop = on_validation_end(m) || stop;
        result.validation.push_back(std::move(m));
      }
      stop = on_epoch_end() || stop;
      if (agree_any(stop)) {
        state_.stop_requested = true;
        result.stopped_early = state_.epoch + 1 < options.epochs;
      }
      result.epochs_run = state_.epoch + 1 - start_epoch;
      if (cut) {
        // The state stays inside the epoch (epoch, batch_in_epoch), as a mid-epoch checkpoint records it, so
        // that the next fit continues with the batch after the last one trained.
        resume_batches_ = state_.batch_in_epoch;
        break;
      }
    }
    on_fit_end();
    result.global_steps = state_.global_step;
    result.skipped_steps = state_.skipped_steps;
    return result;
  }

  Task& task_;
  std::optional<MetricCollection> epoch_metrics_;  ///< the task's metrics(), once asked (epoch_metrics())
  torch::optim::Optimizer& optimizer_;
  context_type ctx_;
  policies_type policies_;
  TrainState state_;
  FitOptions options_;
  torch::Device device_{torch::kCPU};
  int64_t epoch_batches_ = -1;
  int64_t resume_batches_ = 0;  ///< micro-batches the next epoch skips (set by load_state_dict)
  bool epoch_cut_ = false;      ///< the current epoch ends early (max_steps) before its last batch
  bool last_micro_step_ = true;
  std::vector<double> step_lrs_;  ///< each group's lr in the latest optimizer step (Context::step_lr)
};

/// Deduces the policies from the constructor's arguments: `Trainer trainer(task, opt, Ema{...}, ProgressBar{})`.
template <class Task, class... Ps>
Trainer(Task&, torch::optim::Optimizer&, Ps&&...) -> Trainer<Task, std::remove_cvref_t<Ps>...>;

}  // namespace policytrain
