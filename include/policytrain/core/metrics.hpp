#pragma once
/// \file
/// Metrics of an evaluation: mean loss, the task's own metrics, and for a classification output ([batch, classes]
/// scores, at least two classes, integer targets) accuracy and the confusion matrix, from which
/// ClassificationReport derives per-class precision, recall, F1 and support (as scikit-learn's
/// `classification_report` defines them, zero where a denominator is zero).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain {

/// One row of a classification report.
struct ClassScores {
  /// The class's name (its index when no labels were given).
  std::string label;
  /// Precision, recall and F1 score of the class (zero where a denominator is zero).
  ///@{
  double precision = 0, recall = 0, f1 = 0;
  ///@}
  /// Samples of this class (in the averages: all samples).
  int64_t support = 0;
};

/// Per-class and averaged scores from a confusion matrix (rows: true class, columns: predicted).
struct ClassificationReport {
  /// One row per class, in class order.
  std::vector<ClassScores> classes;
  /// Correct predictions over all samples.
  double accuracy = 0;
  /// Unweighted and support-weighted means of the per-class scores.
  ///@{
  ClassScores macro_avg{"macro avg"}, weighted_avg{"weighted avg"};
  ///@}
  /// Samples in the confusion matrix.
  int64_t total = 0;

  /// `confusion[t][p]` counts samples of true class t predicted as p.
  static ClassificationReport from_confusion(const std::vector<std::vector<int64_t>>& confusion,
                                             std::vector<std::string> labels = {}) {
    ClassificationReport r;
    const size_t k = confusion.size();
    std::vector<int64_t> col(k, 0);
    int64_t correct = 0;
    for (size_t t = 0; t < k; ++t)
      for (size_t p = 0; p < k; ++p) col[p] += confusion[t][p];
    for (size_t c = 0; c < k; ++c) {
      ClassScores s;
      s.label = c < labels.size() ? labels[c] : std::to_string(c);
      int64_t row = 0;
      for (size_t p = 0; p < k; ++p) row += confusion[c][p];
      const double tp = static_cast<double>(confusion[c][c]);
      correct += confusion[c][c];
      s.support = row;
      s.precision = col[c] ? tp / col[c] : 0.0;
      s.recall = row ? tp / row : 0.0;
      s.f1 = (s.precision + s.recall) > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0.0;
      r.total += row;
      r.classes.push_back(s);
    }
    r.accuracy = r.total ? static_cast<double>(correct) / r.total : 0.0;
    for (const auto& s : r.classes) {
      const double w = r.total ? static_cast<double>(s.support) / r.total : 0.0;
      r.macro_avg.precision += s.precision / k;
      r.macro_avg.recall += s.recall / k;
      r.macro_avg.f1 += s.f1 / k;
      r.weighted_avg.precision += s.precision * w;
      r.weighted_avg.recall += s.recall * w;
      r.weighted_avg.f1 += s.f1 * w;
    }
    r.macro_avg.support = r.weighted_avg.support = r.total;
    return r;
  }

  /// The report laid out exactly like scikit-learn's `classification_report(digits=digits)`.
  std::string to_string(int digits = 4) const {
    size_t width = std::string("weighted avg").size();
    for (const auto& c : classes) width = std::max(width, c.label.size());
    width = std::max(width, static_cast<size_t>(digits));
    std::string out = policytrain::detail::format("{:>{}} ", "", width);
    for (const char* h : {"precision", "recall", "f1-score", "support"}) out += policytrain::detail::format(" {:>9}", h);
    out += "\n\n";
    auto row = [&](const ClassScores& s) {
      return policytrain::detail::format("{:>{}}  {:>9.{}f} {:>9.{}f} {:>9.{}f} {:>9}\n", s.label, width, s.precision, digits, s.recall,
                         digits, s.f1, digits, s.support);
    };
    for (const auto& c : classes) out += row(c);
    out += "\n";
    out += policytrain::detail::format("{:>{}}  {:>9} {:>9} {:>9.{}f} {:>9}\n", "accuracy", width, "", "", accuracy, digits, total);
    out += row(macro_avg);
    out += row(weighted_avg);
    return out;
  }

  /// The report as JSON: {"classes": {label: scores}, "accuracy", "macro_avg", "weighted_avg"}.
  /// A template so that this header needs only <nlohmann/json_fwd.hpp>: include <nlohmann/json.hpp> to call it.
  template <class Json = nlohmann::json>
  Json to_json() const {
    Json j;
    auto scores = [](const ClassScores& s) {
      return Json{{"precision", s.precision}, {"recall", s.recall}, {"f1", s.f1}, {"support", s.support}};
    };
    for (const auto& c : classes) j["classes"][c.label] = scores(c);
    j["accuracy"] = accuracy;
    j["macro_avg"] = scores(macro_avg);
    j["weighted_avg"] = scores(weighted_avg);
    return j;
  }
};

/// Result of an evaluation: mean loss over samples, accuracy, confusion matrix, the task's own metrics.
struct Metrics {
  /// Mean loss over the evaluated samples.
  double loss = 0;
  /// Fraction of samples whose highest score is the target class (a classification output: [batch, classes]
  /// scores with at least two classes and integer targets), or the task's own "accuracy" (Prediction::metrics);
  /// NaN when neither applies (a regression): see has_accuracy().
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  /// Samples evaluated.
  int64_t samples = 0;
  std::vector<std::vector<int64_t>> confusion;  ///< [true][predicted] (empty unless the output is classification)
  std::map<std::string, double> extra;          ///< the task's own metrics (Prediction::metrics and the scalar
                                                ///< epoch-level ones of its metrics()), but "accuracy"
  /// The task's epoch-level metrics whose value is not one number (metric::ConfusionMatrix), by name.
  std::map<std::string, torch::Tensor> tensors;

  /// Whether this evaluation has an accuracy (built-in for classification outputs, or the task's own).
  bool has_accuracy() const { return !std::isnan(accuracy); }
  /// Whether `key` names a metric of this evaluation.
  bool has(const std::string& key) const { return key == "loss" || (key == "accuracy" && has_accuracy()) || extra.count(key) > 0; }
  /// The names of this evaluation's metrics: "loss", "accuracy" when it has one, then the task's own.
  std::vector<std::string> names() const {
    std::vector<std::string> n{"loss"};
    if (has_accuracy()) n.push_back("accuracy");
    for (const auto& [k, v] : extra) n.push_back(k);
    return n;
  }

  /// A named value: "loss", "accuracy" (when it has one), or one of `extra`. Throws std::out_of_range naming the
  /// key and the metrics this evaluation has.
  double get(const std::string& key) const;

  /// Per-class precision, recall and F1 from the confusion matrix, the classes named by `labels`.
  ClassificationReport report(std::vector<std::string> labels = {}) const {
    return ClassificationReport::from_confusion(confusion, std::move(labels));
  }
};

// Metrics's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL double Metrics::get(const std::string& key) const {
  if (key == "loss") return loss;
  if (key == "accuracy" && has_accuracy()) return accuracy;
  if (auto it = extra.find(key); it != extra.end()) return it->second;
  std::string known;
  for (const auto& k : names()) known += (known.empty() ? "" : ", ") + k;
  throw std::out_of_range(detail::error_message(
      "policytrain::Metrics",
      detail::format("no metric named '{}'; this evaluation has: {}{}", key, known,
                     key == "accuracy" ? " (accuracy is built in only for [batch, classes] scores with integer "
                                         "targets; a task reports its own in Prediction::metrics)"
                                       : "")));
}
#endif

/// Accumulates Metrics over batches; loss is weighted by batch size so the mean is over samples.
class MetricsAccumulator {
 public:
  /// Whether `output` and `target` are a classification's: [batch, classes] scores (classes >= 2) and [batch]
  /// integer class indices. Only then are accuracy and the confusion matrix built in.
  static bool is_classification(const torch::Tensor& output, const torch::Tensor& target) {
    return output.defined() && target.defined() && output.dim() == 2 && target.dim() == 1 && output.size(1) >= 2 &&
           output.size(0) == target.size(0) && !at::isFloatingType(target.scalar_type()) &&
           !at::isComplexType(target.scalar_type()) && target.scalar_type() != torch::kBool;
  }

  /// Adds one batch: its mean loss, the model's output, the targets and the task's own metrics (each the batch's
  /// mean; see Prediction::metrics). Throws std::invalid_argument naming a metric that is not a scalar.
  void add(const torch::Tensor& mean_loss, const torch::Tensor& output, const torch::Tensor& target,
           const std::map<std::string, torch::Tensor>& metrics = {});

  /// The running sums behind result(), for reducing them across data-parallel ranks.
  struct Sums {
    double loss_sum = 0;       ///< batch mean loss times batch size, summed
    /// Samples added.
    int64_t samples = 0;
    torch::Tensor confusion;   ///< [true][predicted] counts (int64), undefined before a classification batch
    /// The task's metrics: name -> (value times batch size, summed; samples they cover).
    std::map<std::string, std::pair<double, int64_t>> extra{};
  };
  /// The running sums.
  Sums sums() const { return {loss_sum_, samples_, confusion_, extra_}; }
  /// Replaces the running sums (with the ranks' reduced ones).
  void set_sums(Sums s) {
    loss_sum_ = s.loss_sum;
    samples_ = s.samples;
    confusion_ = std::move(s.confusion);
    extra_ = std::move(s.extra);
  }

  /// The metrics of every batch added so far.
  Metrics result() const;

 private:
  double loss_sum_ = 0;
  int64_t samples_ = 0;
  torch::Tensor confusion_;
  std::map<std::string, std::pair<double, int64_t>> extra_;
};

// MetricsAccumulator's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL void MetricsAccumulator::add(const torch::Tensor& mean_loss, const torch::Tensor& output, const torch::Tensor& target,
         const std::map<std::string, torch::Tensor>& metrics) {
  const int64_t n = target.size(0);
  loss_sum_ += mean_loss.detach().to(torch::kDouble).item<double>() * n;
  samples_ += n;
  for (const auto& [name, value] : metrics) {
    if (!value.defined() || value.numel() != 1)
      throw std::invalid_argument(detail::error_message(
          "policytrain::MetricsAccumulator",
          detail::format("the task's metric '{}' is {}", name,
                         value.defined() ? detail::format("a tensor of {} elements", value.numel())
                                         : std::string("an undefined tensor")),
          "a scalar: the batch's mean (Prediction::metrics)"));
    auto& [sum, count] = extra_[name];
    sum += value.detach().to(torch::kDouble).item<double>() * n;
    count += n;
  }
  if (is_classification(output, target)) {
    const int64_t k = output.size(1);
    auto pred = output.detach().argmax(1).to(torch::kCPU);
    auto t = target.to(torch::kCPU, torch::kLong);
    auto counts = torch::bincount(t * k + pred, /*weights=*/{}, k * k).view({k, k});
    confusion_ = confusion_.defined() ? confusion_ + counts : counts;
  }
}

POLICYTRAIN_DECL Metrics MetricsAccumulator::result() const {
  Metrics m;
  m.samples = samples_;
  m.loss = samples_ ? loss_sum_ / samples_ : 0.0;
  if (confusion_.defined()) {
    const int64_t k = confusion_.size(0);
    auto c = confusion_.contiguous();
    const int64_t* d = c.data_ptr<int64_t>();
    int64_t correct = 0;
    m.confusion.assign(k, std::vector<int64_t>(k, 0));
    for (int64_t t = 0; t < k; ++t)
      for (int64_t p = 0; p < k; ++p) m.confusion[t][p] = d[t * k + p];
    for (int64_t t = 0; t < k; ++t) correct += d[t * k + t];
    m.accuracy = samples_ ? static_cast<double>(correct) / samples_ : 0.0;
  }
  // The task's own accuracy (a one-logit binary classifier's) is the accuracy; its other metrics are extra.
  for (const auto& [name, sc] : extra_) {
    const double v = sc.second ? sc.first / static_cast<double>(sc.second) : std::numeric_limits<double>::quiet_NaN();
    if (name == "accuracy") m.accuracy = v;
    else m.extra[name] = v;
  }
  return m;
}
#endif

}  // namespace policytrain
