#pragma once
/// \file
/// Metrics of an evaluation: mean loss, accuracy and the confusion matrix, from which
/// ClassificationReport derives per-class precision, recall, F1 and support (as scikit-learn's
/// `classification_report` defines them, zero where a denominator is zero).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/types.h>

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
    std::string out = fmt::format("{:>{}} ", "", width);
    for (const char* h : {"precision", "recall", "f1-score", "support"}) out += fmt::format(" {:>9}", h);
    out += "\n\n";
    auto row = [&](const ClassScores& s) {
      return fmt::format("{:>{}}  {:>9.{}f} {:>9.{}f} {:>9.{}f} {:>9}\n", s.label, width, s.precision, digits, s.recall,
                         digits, s.f1, digits, s.support);
    };
    for (const auto& c : classes) out += row(c);
    out += "\n";
    out += fmt::format("{:>{}}  {:>9} {:>9} {:>9.{}f} {:>9}\n", "accuracy", width, "", "", accuracy, digits, total);
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

/// Result of an evaluation: mean loss over samples, accuracy, confusion matrix.
struct Metrics {
  /// Mean loss over the evaluated samples.
  double loss = 0;
  /// Fraction of samples whose highest score is the target class (0 when the output is not [batch, classes]).
  double accuracy = 0;
  /// Samples evaluated.
  int64_t samples = 0;
  std::vector<std::vector<int64_t>> confusion;  ///< [true][predicted]
  std::map<std::string, double> extra;          ///< further named scalars a task or policy adds

  /// A named value: "loss", "accuracy", or one of `extra`. Throws std::out_of_range naming the key.
  double get(const std::string& key) const {
    if (key == "loss") return loss;
    if (key == "accuracy") return accuracy;
    if (auto it = extra.find(key); it != extra.end()) return it->second;
    throw std::out_of_range("policytrain::Metrics: no metric named '" + key +
                            "'; known: loss, accuracy" + (extra.empty() ? "" : " and the task's extra metrics"));
  }

  /// Per-class precision, recall and F1 from the confusion matrix, the classes named by `labels`.
  ClassificationReport report(std::vector<std::string> labels = {}) const {
    return ClassificationReport::from_confusion(confusion, std::move(labels));
  }
};

/// Accumulates Metrics over batches; loss is weighted by batch size so the mean is over samples.
class MetricsAccumulator {
 public:
  /// Adds one batch: its mean loss, the model's output and the targets.
  void add(const torch::Tensor& mean_loss, const torch::Tensor& output, const torch::Tensor& target) {
    const int64_t n = target.size(0);
    loss_sum_ += mean_loss.detach().to(torch::kDouble).item<double>() * n;
    samples_ += n;
    if (output.dim() == 2 && target.dim() == 1) {
      const int64_t k = output.size(1);
      auto pred = output.detach().argmax(1).to(torch::kCPU);
      auto t = target.to(torch::kCPU, torch::kLong);
      auto counts = torch::bincount(t * k + pred, /*weights=*/{}, k * k).view({k, k});
      confusion_ = confusion_.defined() ? confusion_ + counts : counts;
    }
  }

  /// The running sums behind result(), for reducing them across data-parallel ranks.
  struct Sums {
    double loss_sum = 0;       ///< batch mean loss times batch size, summed
    /// Samples added.
    int64_t samples = 0;
    torch::Tensor confusion;   ///< [true][predicted] counts (int64), undefined before a classification batch
  };
  /// The running sums.
  Sums sums() const { return {loss_sum_, samples_, confusion_}; }
  /// Replaces the running sums (with the ranks' reduced ones).
  void set_sums(Sums s) {
    loss_sum_ = s.loss_sum;
    samples_ = s.samples;
    confusion_ = std::move(s.confusion);
  }

  /// The metrics of every batch added so far.
  Metrics result() const {
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
    return m;
  }

 private:
  double loss_sum_ = 0;
  int64_t samples_ = 0;
  torch::Tensor confusion_;
};

}  // namespace policytrain
