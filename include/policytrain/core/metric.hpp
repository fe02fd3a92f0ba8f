#pragma once
/// \file
/// Epoch-level metrics, as torchmetrics defines them: a metric owns state tensors, `update(prediction, target)` adds
/// a batch to them, `compute()` turns them into the value over every batch since `reset()`, and each state says how
/// it combines over data-parallel ranks (sum, max, min, or concatenation along dim 0). A value that is not a mean
/// over samples (a root mean squared error, R², F1 over the set, AUROC) is exact over several batches and ranks only
/// this way: per-batch values cannot be averaged into it.
///
/// A task declares its metrics once, `policytrain::MetricCollection metrics()`: the Trainer updates them with every
/// validation batch (`Prediction::output`, `Batch::y`), reduces their states through the parallel policy and puts
/// each scalar result in `Metrics::extra` (printed, logged and monitorable like the loss), each other one (a
/// confusion matrix) in `Metrics::tensors`. Built-ins: <policytrain/metric/regression.hpp>,
/// <policytrain/metric/classification.hpp>. docs/metrics.md.
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include <policytrain/detail/format.hpp>
namespace policytrain {

/// How a metric's state combines over data-parallel ranks.
enum class Reduce {
  sum,  ///< elementwise sum (counts, sums of errors)
  max,  ///< elementwise maximum
  min,  ///< elementwise minimum
  cat,  ///< concatenation along dim 0, rank 0's rows first (the predictions an AUROC ranks)
};

/// One state tensor of a metric: its name (in errors), its value, and how it reduces over ranks. Every rank's
/// value of a state has the same dtype and, but for a `cat` state's dim 0, the same shape.
struct MetricState {
  std::string name;             ///< the state's name, in error messages
  torch::Tensor value;          ///< its value
  Reduce reduce = Reduce::sum;  ///< how it combines over ranks
};

/// The metric contract (one line of semantics per member):
/// - `std::string name() const`: the name it is declared, printed, logged and monitored under;
/// - `void update(const torch::Tensor& prediction, const torch::Tensor& target)`: adds a batch to the states;
/// - `torch::Tensor compute() const`: the value over every batch since reset() (a 0-dim tensor for a scalar);
/// - `void reset()`: the states of no batch;
/// - `std::vector<MetricState*> states()`: every state, in a fixed order, for the reduction over ranks;
/// - optional `bool scalar() const`: false when compute() is not one number (a confusion matrix: not monitorable,
///   not a log column).
template <class M>
concept Metric = requires(M& m, const M& cm, const torch::Tensor& t) {
  { cm.name() } -> std::convertible_to<std::string>;
  m.update(t, t);
  { cm.compute() } -> std::convertible_to<torch::Tensor>;
  m.reset();
  { m.states() } -> std::convertible_to<std::vector<MetricState*>>;
};

/// Several metrics, each any type that models Metric, under distinct names: what a task's `metrics()` returns.
class MetricCollection {
 public:
  MetricCollection() = default;
  /// The metrics, in order; a name given twice is a std::invalid_argument naming it.
  template <Metric... Ms>
  MetricCollection(Ms... metrics) {  // NOLINT(google-explicit-constructor): `return {metric::R2Score{}, ...};`
    (add(std::move(metrics)), ...);
  }
  /// Moves the metrics of another collection.
  MetricCollection(MetricCollection&&) noexcept = default;
  /// Moves the metrics of another collection into this one.
  MetricCollection& operator=(MetricCollection&&) noexcept = default;

  /// Adds a metric; throws std::invalid_argument when its name is empty, "loss", or already taken.
  template <Metric M>
  MetricCollection& add(M metric) {
    auto item = std::make_unique<Model<M>>(std::move(metric));
    const std::string n = item->name();
    if (n.empty() || n == "loss")
      throw std::invalid_argument(detail::error_message("policytrain::MetricCollection",
                                                        detail::format("a metric named '{}'", n), {},
                                                        "give it a name of its own (not empty, not 'loss')"));
    for (const auto& i : items_)
      if (i->name() == n)
        throw std::invalid_argument(detail::error_message("policytrain::MetricCollection",
                                                          detail::format("two metrics named '{}'", n), {},
                                                          "name one differently (each built-in takes a name)"));
    items_.push_back(std::move(item));
    return *this;
  }

  /// Every metric's name, in order.
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (const auto& i : items_) v.push_back(i->name());
    return v;
  }
  /// The names of the metrics whose value is one number (monitorable, a log column).
  std::vector<std::string> scalar_names() const {
    std::vector<std::string> v;
    for (const auto& i : items_)
      if (i->scalar()) v.push_back(i->name());
    return v;
  }
  /// Adds a batch to every metric.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) {
    for (auto& i : items_) i->update(prediction, target);
  }
  /// Resets every metric.
  void reset() {
    for (auto& i : items_) i->reset();
  }
  /// Every metric's states, metric after metric: the same order on every rank.
  std::vector<MetricState*> states() {
    std::vector<MetricState*> v;
    for (auto& i : items_)
      for (auto* s : i->states()) v.push_back(s);
    return v;
  }
  /// Each metric's value, by name.
  std::map<std::string, torch::Tensor> compute() const {
    std::map<std::string, torch::Tensor> v;
    for (const auto& i : items_) v[i->name()] = i->compute();
    return v;
  }
  /// Number of metrics.
  size_t size() const { return items_.size(); }
  /// Whether there is none.
  bool empty() const { return items_.empty(); }

 private:
  struct Erased {
    virtual ~Erased() = default;
    virtual std::string name() const = 0;
    virtual bool scalar() const = 0;
    virtual void update(const torch::Tensor&, const torch::Tensor&) = 0;
    virtual torch::Tensor compute() const = 0;
    virtual void reset() = 0;
    virtual std::vector<MetricState*> states() = 0;
  };
  template <class M>
  struct Model final : Erased {
    M m;
    explicit Model(M x) : m(std::move(x)) {}
    std::string name() const override { return m.name(); }
    bool scalar() const override {
      if constexpr (requires { { m.scalar() } -> std::convertible_to<bool>; }) return m.scalar();
      else return true;
    }
    void update(const torch::Tensor& p, const torch::Tensor& t) override { m.update(p, t); }
    torch::Tensor compute() const override { return m.compute(); }
    void reset() override { m.reset(); }
    std::vector<MetricState*> states() override { return m.states(); }
  };
  std::vector<std::unique_ptr<Erased>> items_;
};

/// A task that declares epoch-level metrics: `MetricCollection metrics()`.
template <class T>
concept DeclaresEpochMetrics = requires(T& t) {
  { t.metrics() } -> std::convertible_to<MetricCollection>;
};

/// Reduces `states` over `world` ranks, this one being `rank`, in place, with one collective
/// `all_reduce(torch::Tensor& t, Reduce op)` (op: sum, max or min; `t` a CPU double tensor) that every rank calls
/// in the same order: the sums in one call, the maxima in one, the minima in one, and each concatenation as a sum
/// of zero-padded buffers in which each rank fills its own rows (two calls: the row counts, then the rows). Exact:
/// a sum adds each rank's double once, a concatenation adds only zeros to each value. A parallel policy's
/// `reduce_metric_states` calls this with its all-reduce. Throws std::runtime_error when the ranks' cat states have
/// different row shapes.
template <class AllReduce>
void reduce_metric_states(const std::vector<MetricState*>& states, int64_t rank, int64_t world, AllReduce&& all_reduce) {
  auto restore = [](MetricState& s, const torch::Tensor& d) {
    s.value = at::isFloatingType(s.value.scalar_type()) ? d.to(s.value.scalar_type()) : d.round().to(s.value.scalar_type());
  };
  for (Reduce op : {Reduce::sum, Reduce::max, Reduce::min}) {
    std::vector<torch::Tensor> flat;
    for (auto* s : states)
      if (s->reduce == op) flat.push_back(s->value.detach().to(torch::kCPU, torch::kDouble).reshape({-1}));
    if (flat.empty()) continue;
    auto packed = torch::cat(flat);
    all_reduce(packed, op);
    int64_t at = 0;
    for (auto* s : states)
      if (s->reduce == op) {
        const int64_t n = s->value.numel();
        restore(*s, packed.slice(0, at, at + n).view(s->value.sizes()).clone());
        at += n;
      }
  }
  std::vector<MetricState*> cats;
  for (auto* s : states)
    if (s->reduce == Reduce::cat) cats.push_back(s);
  if (cats.empty()) return;
  // Row counts and row sizes of every rank's cat states: [world][cats][2].
  const auto n = static_cast<int64_t>(cats.size());
  auto shape = torch::zeros({world, n, 2}, torch::kDouble);
  for (int64_t c = 0; c < n; ++c) {
    const auto& v = cats[c]->value;
    shape[rank][c][0] = static_cast<double>(v.dim() ? v.size(0) : 0);
    shape[rank][c][1] = static_cast<double>(v.dim() ? v.numel() / std::max<int64_t>(v.size(0), 1) : 0);
  }
  all_reduce(shape, Reduce::sum);
  for (int64_t c = 0; c < n; ++c) {
    auto& s = *cats[c];
    const auto rows = shape.select(2, 0).select(1, c).to(torch::kLong);
    const auto row_size = s.value.dim() ? s.value.numel() / std::max<int64_t>(s.value.size(0), 1) : 0;
    for (int64_t r = 0; r < world; ++r) {
      const auto other = static_cast<int64_t>(shape[r][c][1].item<double>());
      if (rows[r].item<int64_t>() > 0 && s.value.size(0) > 0 && other != row_size)
        throw std::runtime_error(detail::error_message(
            "policytrain::reduce_metric_states",
            detail::format("the state '{}' has rows of {} values on rank {} and of {} on rank {}", s.name, row_size,
                           rank, other, r),
            {}, "a cat state's rows must have one shape on every rank"));
    }
    const int64_t total = rows.sum().item<int64_t>();
    const int64_t offset = rows.slice(0, 0, rank).sum().item<int64_t>();
    std::vector<int64_t> full_shape = s.value.sizes().vec();
    if (full_shape.empty()) full_shape.push_back(0);
    full_shape[0] = total;
    auto buffer = torch::zeros(full_shape, torch::kDouble);
    if (s.value.size(0) > 0) buffer.slice(0, offset, offset + s.value.size(0)).copy_(s.value.to(torch::kCPU, torch::kDouble));
    all_reduce(buffer, Reduce::sum);
    restore(s, buffer);
  }
}

}  // namespace policytrain
