#pragma once
/// \file
/// The Trainer class: its policies (composition.hpp), its hooks called over them (dispatch.hpp), its state
/// (state.hpp), its metric contract (metric_contract.hpp), and the loops: fit's epochs and micro-steps, evaluate.
/// The pipeline and the hook order: <policytrain/trainer.hpp>, which is what a user includes.
#include <concepts>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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
#include <policytrain/trainer/composition.hpp>
#include <policytrain/trainer/dispatch.hpp>
#include <policytrain/trainer/loops.hpp>
#include <policytrain/trainer/metric_contract.hpp>
#include <policytrain/trainer/state.hpp>

namespace policytrain {

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
    static_assert(detail::count_with<hook::step, context_type, policies_type>() <= 1,
                  "policytrain::Trainer: more than one policy defines step(ctx); only the precision policy may "
                  "replace the optimizer step");
    static_assert(detail::count_with<hook::run_step, context_type, policies_type>() <= 1,
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
  /// Whether the current (or last) fit counts tokens: the task declares tokens(batch), or FitOptions::items_per_sample
  /// is set (Context::counts_tokens).
  bool counts_tokens() const { return DeclaresTokens<Task> || options_.items_per_sample > 0; }
  /// The task's flops_per_token(), or 0 when it declares none (Context::flops_per_token).
  double flops_per_token() {
    if constexpr (DeclaresFlopsPerToken<Task>) return static_cast<double>(task_.flops_per_token());
    else return 0.0;
  }

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
    StateDict d = detail::counters_state_dict(state_);
    detail::add_policies_state(d, policies_);
    return d;
  }
  /// Restores what state_dict() returned. Throws std::invalid_argument naming a missing entry.
  /// A state taken mid-epoch (batch_in_epoch > 0) makes the next fit skip that many micro-batches of its first
  /// epoch, so that a resumed run sees exactly the batches the interrupted one had not yet consumed.
  void load_state_dict(const StateDict& d) {
    detail::load_counters(d, state_);
    resume_batches_ = state_.batch_in_epoch;
    detail::load_policies_state(d, policies_);
  }

  // --- the parallel policy's services (core/parallel_services.hpp): required of the parallel policy, each checked
  // with a static_assert naming the member and its signature; no fallback to one process's behaviour ---
  static_assert(detail::ParallelServicesCheck<parallel_type, context_type>::ok);
  /// Whether this process logs, prints and writes files (rank 0 under data parallelism).
  bool is_main() { return policy<Category::parallel>().is_main(); }
  /// True on every rank when `b` is true on any rank (the parallel policy decides; identity on one process).
  bool agree_any(bool b) { return policy<Category::parallel>().agree_any(ctx_, b); }
  /// The smallest `v` over the ranks (the parallel policy decides; identity on one process).
  int64_t agree_min(int64_t v) { return policy<Category::parallel>().agree_min(ctx_, v); }
  /// Whether each rank keeps only its own partition's gradients after the backward (ZeRO-2: the parallel policy's
  /// gradients_sharded()); then a statistic over every gradient (a norm, an inf flag) needs
  /// reduce_gradient_statistic.
  bool gradients_sharded() { return policy<Category::parallel>().gradients_sharded(); }
  /// Whether the optimizer steps shards of the parameters (parallel::ShardedDataParallel at stage 3, the parallel
  /// policy's optional parameters_sharded()): the gradients to read are the optimizer's, not the module's.
  bool parameters_sharded() {
    if constexpr (requires { policy<Category::parallel>().parameters_sharded(); })
      return policy<Category::parallel>().parameters_sharded();
    else
      return false;
  }
  /// Whether each rank holds a part of every gradient (ZeRO-2 with the dim-0 partition: the parallel policy's
  /// gradients_split(), false where it has none): a per-parameter statistic is then itself reduced over the ranks.
  bool gradients_split() {
    if constexpr (requires { policy<Category::parallel>().gradients_split(); })
      return policy<Category::parallel>().gradients_split();
    else
      return false;
  }
  /// Reduces `t` in place over the ranks that hold the gradient shards (identity when gradients are not sharded).
  void reduce_gradient_statistic(torch::Tensor& t, GradientReduce op) {
    policy<Category::parallel>().reduce_gradient_statistic(ctx_, t, op);
  }
  // --- end of the parallel policy's services ---

  /// Runs `f()` with the weights the evaluation uses swapped into the module (Context::with_evaluated_weights)
  /// and returns their name ("model": the live weights).
  template <class F>
  std::string with_evaluated_weights(F&& f) {
    // Each level's name joined to its inner levels' with '+' (the first policy's outermost); none: the live weights.
    auto around = [&](auto& p, auto&& inner) -> std::string {
      std::string in;
      const std::string name = p.around_evaluated_weights(ctx_, [&] { in = inner(); });
      return name.empty() ? in : in.empty() ? name : name + "+" + in;
    };
    auto innermost = [&] {
      f();
      return std::string();
    };
    const std::string names = detail::nest<hook::around_evaluated_weights, context_type>(policies_, around, innermost);
    return names.empty() ? std::string("model") : names;
  }
  /// After evaluated weights were loaded into the module: every on_weights_loaded hook (callbacks::Ema evaluates
  /// them from now on instead of its old average).
  void weights_loaded() {
    each_with<hook::on_weights_loaded>([&](auto& p) { p.on_weights_loaded(ctx_); });
  }

  /// Trains for `options.epochs` epochs, or to `options.max_steps` (from the current state's step and epoch, so a
  /// resumed run continues).
  template <class TrainData>
  FitResult fit(TrainData& train, const FitOptions& options = {}) {
    return detail::Loops<Trainer>::fit(*this, train, nullptr, options);
  }
  /// Trains, and evaluates on `val` after each epoch, or every `options.val_every_steps` optimizer steps.
  template <class TrainData, class ValData>
  FitResult fit(TrainData& train, ValData& val, const FitOptions& options = {}) {
    return detail::Loops<Trainer>::fit(*this, train, &val, options);
  }

  /// Evaluates the task on `data` in eval mode without gradients (under the precision policy's autocast,
  /// with the weights a callback such as EMA chooses); metrics are reduced across ranks.
  template <class Data>
  Metrics evaluate(Data& data, int64_t limit_batches = -1) {
    static_assert(detail::not_a_raw_torch_loader<Data>());
    static_assert(EvaluableTask<Task>,
                  "policytrain::Trainer::evaluate: the Task lacks `policytrain::Prediction validation_step(const "
                  "policytrain::Batch&)`; add it (return the batch's mean loss and the model's output)");
    // A loader whose shards leave samples out, or repeat some where they cannot be left out, is refused (every rank
    // sees the same sampler settings, so every rank refuses): its metrics would silently not be the data set's.
    if constexpr (requires { { data.evaluation_refusal() } -> std::convertible_to<std::string>; })
      if (!data.evaluation_refusal().empty()) throw std::invalid_argument(data.evaluation_refusal());
    const bool was_training = module().is_training();
    module().eval();
    torch::NoGradGuard no_grad;
    MetricCollection* epoch = epoch_metrics();
    auto run = [&]() -> Metrics {
      detail::EvalPass pass(epoch);
      int64_t i = 0;
      // A sharded loader pads the end of a rank's shard with repeated samples (TensorLoader, from_torch with a
      // DistributedSequentialSampler): they are not counted.
      int64_t keep = -1;
      if constexpr (requires { data.num_samples(); data.padding(); }) keep = data.num_samples() - data.padding();
      for (auto&& item : data) {
        if (limit_batches >= 0 && i++ >= limit_batches) break;
        Batch b = to_device(item);
        if (!detail::EvalPass::trim(b, keep)) continue;
        Prediction p = wrap_forward([&] { return task_.validation_step(b); });
        pass.add(p, b);
      }
      policy<Category::parallel>().reduce_metrics(ctx_, pass.accumulator());
      Metrics m = pass.accumulator().result();
      if (epoch) {
        policy<Category::parallel>().reduce_metric_states(ctx_, epoch->states());
        // Every rank computes the epoch's values from the reduced states; one without a batch too.
        detail::add_epoch_metrics(m, *epoch);
      }
      return m;
    };
    auto around = [&](auto& p, auto&& inner) -> Metrics {
      return p.around_evaluate(ctx_, std::forward<decltype(inner)>(inner));
    };
    Metrics m = detail::nest<hook::around_evaluate, context_type>(policies_, around, run);
    module().train(was_training);
    detail::check_reported<Task>(m, metric_names());
    return m;
  }

  /// The lr of param group `g` in the latest optimizer step (its current lr before the first).
  double step_lr(size_t g = 0) {
    return g < step_lrs_.size() ? step_lrs_[g] : optimizer_.param_groups().at(g).options().get_lr();
  }

  /// The metrics a validation of the task reports: "loss" and the task's metric_names() when it declares them,
  /// else "loss" and "accuracy" (built in for classification outputs).
  std::vector<std::string> metric_names() { return detail::reported_metric_names(task_, epoch_metrics()); }

  /// The names of metric_names() whose values are single numbers: what a monitor may watch and a log has a column
  /// for (all but the task's non-scalar epoch-level metrics, a confusion matrix).
  std::vector<std::string> scalar_metric_names() {
    std::vector<std::string> n;
    MetricCollection* epoch = epoch_metrics();
    for (auto& k : metric_names())
      if (!epoch || detail::contains(epoch->scalar_names(), k) || !detail::contains(epoch->names(), k))
        n.push_back(std::move(k));
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
  friend struct detail::Loops<Trainer>;

  static constexpr size_t step_policy_index() {
    return detail::index_with<hook::run_step, context_type, policies_type>();
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
  void prepare_capture() { each_with<hook::prepare_capture>([&](auto& p) { p.prepare_capture(ctx_); }); }
  void on_replay() { each_with<hook::on_replay>([&](auto& p) { p.on_replay(ctx_); }); }
  std::vector<std::string> graph_refusals() {
    std::vector<std::string> r;
    each_with<hook::graph_refusal>([&](auto& p) {
      std::string why = p.graph_refusal(ctx_);
      if (!why.empty()) r.push_back(std::move(why));
    });
    return r;
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

  // --- hook dispatch: each hook is one call of detail::each_with (every policy that has it, in hook order) or of
  // detail::nest (the around_* hooks nested, the first policy outermost) ---
  template <class H, class F>
  void each_with(F&& f) { detail::each_with<H, context_type>(policies_, f); }

  void on_fit_begin() { each_with<hook::on_fit_begin>([&](auto& p) { p.on_fit_begin(ctx_); }); }
  void on_fit_end() { each_with<hook::on_fit_end>([&](auto& p) { p.on_fit_end(ctx_); }); }
  void on_epoch_begin() { each_with<hook::on_epoch_begin>([&](auto& p) { p.on_epoch_begin(ctx_); }); }
  /// Whether a hook asks to stop (a void on_epoch_end never does).
  bool on_epoch_end() {
    bool stop = false;
    each_with<hook::on_epoch_end>([&](auto& p) {
      if constexpr (std::is_void_v<decltype(p.on_epoch_end(ctx_))>) p.on_epoch_end(ctx_);
      else stop = p.on_epoch_end(ctx_) || stop;
    });
    return stop;
  }
  bool on_validation_end(const Metrics& m) {
    bool stop = false;
    each_with<hook::on_validation_end>([&](auto& p) {
      if constexpr (std::is_void_v<decltype(p.on_validation_end(ctx_, m))>) p.on_validation_end(ctx_, m);
      else stop = p.on_validation_end(ctx_, m) || stop;
    });
    return stop;
  }
  torch::Tensor transform_loss(torch::Tensor loss) {
    each_with<hook::transform_loss>([&](auto& p) { loss = p.transform_loss(ctx_, std::move(loss)); });
    return loss;
  }
  bool should_step() {
    bool step = true;
    each_with<hook::should_step>([&](auto& p) { step = p.should_step(ctx_) && step; });
    return step;
  }
  void before_step() { each_with<hook::before_step>([&](auto& p) { p.before_step(ctx_); }); }
  /// The optimizer step, inside every around_step hook (the parallel policy's outermost).
  bool do_step() {
    auto around = [&](auto& p, auto&& inner) -> bool {
      return p.around_step(ctx_, std::forward<decltype(inner)>(inner));
    };
    auto step = [&]() -> bool { return do_step_inner(); };
    return detail::nest<hook::around_step, context_type>(policies_, around, step);
  }
  void before_save() { each_with<hook::before_save>([&](auto& p) { p.before_save(ctx_); }); }
  void after_save() { each_with<hook::after_save>([&](auto& p) { p.after_save(ctx_); }); }
  bool do_step_inner() {
    if constexpr (detail::count_with<hook::step, context_type, policies_type>() == 0) {
      optimizer_.step();
      return true;
    } else {
      bool stepped = true;
      each_with<hook::step>([&](auto& p) { stepped = p.step(ctx_); });
      return stepped;
    }
  }
  void after_step(bool stepped) { each_with<hook::after_step>([&](auto& p) { p.after_step(ctx_, stepped); }); }
  void flush_checks() { each_with<hook::flush_checks>([&](auto& p) { p.flush_checks(ctx_); }); }
  void before_checkpoint(bool epoch_end) {
    each_with<hook::before_checkpoint>([&](auto& p) { p.before_checkpoint(ctx_, epoch_end); });
  }
  void on_step_end() { each_with<hook::on_step_end>([&](auto& p) { p.on_step_end(ctx_); }); }

  /// `f()` inside the around_forward hooks (autocast), the first policy outermost.
  template <class F>
  decltype(auto) wrap_forward(F&& f) {
    auto around = [&](auto& p, auto&& inner) -> decltype(auto) {
      return p.around_forward(ctx_, std::forward<decltype(inner)>(inner));
    };
    return detail::nest<hook::around_forward, context_type>(policies_, around, f);
  }
  /// `f()` inside the around_backward hooks (no-sync on non-final micro-steps), the first policy outermost.
  template <class F>
  void wrap_backward(F&& f) {
    auto around = [&](auto& p, auto&& inner) { p.around_backward(ctx_, std::forward<decltype(inner)>(inner)); };
    detail::nest<hook::around_backward, context_type>(policies_, around, f);
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
  bool step_validated_ = false;  ///< the step now ending was validated (Context::step_validated)
  std::vector<double> step_lrs_;  ///< each group's lr in the latest optimizer step (Context::step_lr)
};

/// Deduces the policies from the constructor's arguments: `Trainer trainer(task, opt, Ema{...}, ProgressBar{})`.
template <class Task, class... Ps>
Trainer(Task&, torch::optim::Optimizer&, Ps&&...) -> Trainer<Task, std::remove_cvref_t<Ps>...>;

}  // namespace policytrain
