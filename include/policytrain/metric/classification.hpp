#pragma once
/// \file
/// Classification metrics over an epoch, as torchmetrics computes them: metric::Accuracy (top-k too),
/// metric::Precision, metric::Recall, metric::F1Score (micro, macro or weighted averages over classes),
/// metric::ConfusionMatrix, and metric::BinaryAUROC. The multi-class ones take [batch, classes] scores (the top-k
/// classes are the prediction) or [batch] predicted labels, against [batch] integer class indices, and keep
/// per-class counts (true positives, false positives, false negatives) summed over batches and ranks;
/// BinaryAUROC keeps every score and label (concatenated over ranks) and ranks them once. Declared in a task's
/// `metrics()` (core/metric.hpp, docs/metrics.md).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/types.h>

#include <policytrain/core/metric.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::metric {

/// How per-class scores combine into one (torchmetrics' `average`).
enum class Average {
  micro,     ///< from the counts summed over classes (top-1: the accuracy)
  macro,     ///< the unweighted mean over the classes that occur (in targets or predictions; top-k: in targets)
  weighted,  ///< the mean weighted by each class's support (its samples)
};

/// The options of a multi-class metric.
struct ClassOptions {
  int64_t num_classes = 0;  ///< required (at least 2)
  /// How the per-class scores combine.
  Average average = Average::macro;
  /// A sample whose target is among its top_k scored classes counts as predicting its target, another as
  /// predicting its top-1 class (torchmetrics' top_k since 1.6).
  int64_t top_k = 1;
  std::string name{};       ///< empty: the metric's own ("accuracy", "top5_accuracy", "precision", "recall", "f1")
};

/// Per-class true positives, false positives and false negatives of a multi-class prediction (torchmetrics'
/// multiclass stat scores), the state every multi-class metric but the confusion matrix shares.
class StatScores {
 public:
  /// Counts for `o`; `who` names the metric in errors. Throws std::invalid_argument on bad options.
  StatScores(ClassOptions o, std::string who) : o_(std::move(o)), who_(std::move(who)) {
    if (o_.num_classes < 2)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::" + who_, policytrain::detail::format("num_classes is {}", o_.num_classes), {},
          "set ClassOptions::num_classes to the number of "
          "classes (at least 2)"));
    if (o_.top_k < 1 || o_.top_k > o_.num_classes)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::" + who_, policytrain::detail::format("top_k is {}", o_.top_k),
          policytrain::detail::format("1 to num_classes ({})", o_.num_classes)));
    reset();
  }
  /// Adds a batch: [batch, classes] scores or [batch] labels against [batch] class indices.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) {
    const int64_t k = o_.num_classes;
    auto t = labels(who_, target, k, "target");
    if (prediction.dim() >= 1 && prediction.size(0) != t.size(0))
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::" + who_,
          policytrain::detail::format("{} predictions for {} targets", prediction.size(0), t.size(0))));
    torch::Tensor hit;  // [n, k]: the class each sample predicts
    if (prediction.dim() == 2 && prediction.size(1) == k && at::isFloatingType(prediction.scalar_type())) {
      const auto scores = prediction.detach().to(torch::kCPU);
      torch::Tensor chosen;
      if (o_.top_k == 1) {
        // The best class as torchmetrics takes it: argmax, the first of tied scores (topk(1) may pick another).
        chosen = scores.argmax(1);
      } else {
        // With top_k > 1 a sample predicts one class, as torchmetrics (1.6 and later) counts it: its target when
        // the target is among its top k, else its top-1 class. Counting all k classes as predicted made every hit
        // bring k - 1 false positives (top-2 micro precision 0.25 where torchmetrics gives 0.5).
        const auto top = std::get<1>(scores.topk(o_.top_k, 1));
        chosen = torch::where((top == t.unsqueeze(1)).any(1), t, top.select(1, 0));
      }
      hit = torch::one_hot(chosen, k).to(torch::kBool);
    } else if (o_.top_k == 1 && prediction.dim() == 1 && !at::isFloatingType(prediction.scalar_type())) {
      hit = torch::one_hot(labels(who_, prediction, k, "prediction"), k).to(torch::kBool);
    } else {
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::" + who_,
          policytrain::detail::format("the prediction is {} {}", c10::str(prediction.sizes()),
                                      c10::toString(prediction.scalar_type())),
          policytrain::detail::format("[batch, {}] scores{}", k, o_.top_k == 1 ? " or [batch] integer labels" : "")));
    }
    auto truth = torch::one_hot(t, k).to(torch::kBool);
    tp_.value = tp_.value + (hit & truth).sum(0).to(torch::kDouble);
    fp_.value = fp_.value + (hit & ~truth).sum(0).to(torch::kDouble);
    fn_.value = fn_.value + (~hit & truth).sum(0).to(torch::kDouble);
  }
  /// Zeroes the counts.
  void reset() {
    tp_.value = torch::zeros({o_.num_classes}, torch::kDouble);
    fp_.value = torch::zeros({o_.num_classes}, torch::kDouble);
    fn_.value = torch::zeros({o_.num_classes}, torch::kDouble);
  }
  /// The true positive, false positive and false negative states, in that order.
  std::vector<MetricState*> states() { return {&tp_, &fp_, &fn_}; }
  /// The options it was made with.
  const ClassOptions& options() const { return o_; }

  /// `num / den` per class (zero where den is zero), averaged as the options say; `micro_num`/`micro_den` are the
  /// micro average's (the per-class counts summed). torchmetrics' _adjust_weights_safe_divide.
  /// `top1_absence` false: with top_k > 1 a class counts as absent from macro when no target has it (top-k accuracy, precision and
  /// recall in torchmetrics), else when it has no tp, fp nor fn (top-1, and F1 whatever top_k).
  torch::Tensor reduce(const torch::Tensor& num, const torch::Tensor& den, const torch::Tensor& micro_num,
                       const torch::Tensor& micro_den, bool top1_absence = false) const {
    if (o_.average == Average::micro) return safe_divide(micro_num.sum(), micro_den.sum());
    const auto score = safe_divide(num, den);
    torch::Tensor w;
    if (o_.average == Average::weighted) {
      w = tp_.value + fn_.value;
    } else {
      w = torch::ones_like(score);
      const auto absent = o_.top_k == 1 || top1_absence ? (tp_.value + fp_.value + fn_.value) == 0 : (tp_.value + fn_.value) == 0;
      w.masked_fill_(absent, 0.0);
    }
    return safe_divide((w * score).sum(), w.sum());
  }
  /// True positives per class.
  const torch::Tensor& tp() const { return tp_.value; }
  /// False positives per class.
  const torch::Tensor& fp() const { return fp_.value; }
  /// False negatives per class.
  const torch::Tensor& fn() const { return fn_.value; }

  /// `t` as [batch] class indices in [0, k); a std::invalid_argument naming `who` and `what` otherwise.
  static torch::Tensor labels(const std::string& who, const torch::Tensor& t, int64_t k, const char* what) {
    auto l = t.detach().to(torch::kCPU);
    if (l.dim() == 2 && l.size(1) == 1) l = l.squeeze(1);
    if (l.dim() != 1 || at::isFloatingType(l.scalar_type()) || l.scalar_type() == torch::kBool)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::" + who,
          policytrain::detail::format("the {} is {} {}", what, c10::str(t.sizes()), c10::toString(t.scalar_type())),
          "[batch] integer class indices"));
    l = l.to(torch::kLong);
    if (l.numel() && (l.min().item<int64_t>() < 0 || l.max().item<int64_t>() >= k))
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::" + who,
          policytrain::detail::format("a {} class index is {}", what,
                                      l.min().item<int64_t>() < 0 ? l.min().item<int64_t>() : l.max().item<int64_t>()),
          policytrain::detail::format("0 to {} (num_classes {})", k - 1, k)));
    return l;
  }
  /// `num / den` elementwise, zero where den is zero.
  static torch::Tensor safe_divide(const torch::Tensor& num, const torch::Tensor& den) {
    return torch::where(den == 0, torch::zeros_like(num), num / torch::where(den == 0, torch::ones_like(den), den));
  }

 private:
  ClassOptions o_;
  std::string who_;
  MetricState tp_{"true_positives", {}, Reduce::sum};
  MetricState fp_{"false_positives", {}, Reduce::sum};
  MetricState fn_{"false_negatives", {}, Reduce::sum};
};

/// The share of samples whose target is among their top_k predicted classes (micro; torchmetrics'
/// MulticlassAccuracy), or the mean over classes of that share (macro), or weighted by support. Note that
/// torchmetrics' MulticlassAccuracy averages `macro` by default, ClassOptions too: the usual accuracy is
/// `{.average = Average::micro}`.
class Accuracy {
 public:
  /// An accuracy with options `o`; throws std::invalid_argument on bad options.
  explicit Accuracy(ClassOptions o) : s_(std::move(o), "Accuracy") {}
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const {
    const auto& o = s_.options();
    return !o.name.empty() ? o.name : o.top_k == 1 ? "accuracy" : "top" + std::to_string(o.top_k) + "_accuracy";
  }
  /// Adds a batch to the states.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) { s_.update(prediction, target); }
  /// The accuracy over every batch since reset().
  torch::Tensor compute() const { return s_.reduce(s_.tp(), s_.tp() + s_.fn(), s_.tp(), s_.tp() + s_.fn()); }
  /// Clears the states: no batch.
  void reset() { s_.reset(); }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return s_.states(); }

 private:
  StatScores s_;
};

/// Precision, tp / (tp + fp), per class and averaged (torchmetrics' MulticlassPrecision; zero where nothing was
/// predicted).
class Precision {
 public:
  /// A precision with options `o`; throws std::invalid_argument on bad options.
  explicit Precision(ClassOptions o) : s_(std::move(o), "Precision") {}
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const { return s_.options().name.empty() ? "precision" : s_.options().name; }
  /// Adds a batch to the states.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) { s_.update(prediction, target); }
  /// The precision over every batch since reset().
  torch::Tensor compute() const { return s_.reduce(s_.tp(), s_.tp() + s_.fp(), s_.tp(), s_.tp() + s_.fp()); }
  /// Clears the states: no batch.
  void reset() { s_.reset(); }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return s_.states(); }

 private:
  StatScores s_;
};

/// Recall, tp / (tp + fn), per class and averaged (torchmetrics' MulticlassRecall).
class Recall {
 public:
  /// A recall with options `o`; throws std::invalid_argument on bad options.
  explicit Recall(ClassOptions o) : s_(std::move(o), "Recall") {}
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const { return s_.options().name.empty() ? "recall" : s_.options().name; }
  /// Adds a batch to the states.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) { s_.update(prediction, target); }
  /// The recall over every batch since reset().
  torch::Tensor compute() const { return s_.reduce(s_.tp(), s_.tp() + s_.fn(), s_.tp(), s_.tp() + s_.fn()); }
  /// Clears the states: no batch.
  void reset() { s_.reset(); }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return s_.states(); }

 private:
  StatScores s_;
};

/// F1 score, 2 tp / (2 tp + fp + fn), per class and averaged (torchmetrics' MulticlassF1Score).
class F1Score {
 public:
  /// An F1 score with options `o`; throws std::invalid_argument on bad options.
  explicit F1Score(ClassOptions o) : s_(std::move(o), "F1Score") {}
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const { return s_.options().name.empty() ? "f1" : s_.options().name; }
  /// Adds a batch to the states.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) { s_.update(prediction, target); }
  /// The F1 score over every batch since reset().
  torch::Tensor compute() const {
    const auto num = 2 * s_.tp();
    const auto den = 2 * s_.tp() + s_.fp() + s_.fn();
    return s_.reduce(num, den, num, den, /*top1_absence=*/true);
  }
  /// Clears the states: no batch.
  void reset() { s_.reset(); }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return s_.states(); }

 private:
  StatScores s_;
};

/// The confusion matrix, [true class][predicted class] counts as int64 (torchmetrics' MulticlassConfusionMatrix):
/// not a scalar, so in Metrics::tensors, neither monitored nor a log column.
class ConfusionMatrix {
 public:
  /// A num_classes x num_classes matrix named `name`; throws std::invalid_argument when num_classes < 2.
  explicit ConfusionMatrix(int64_t num_classes, std::string name = "confusion_matrix")
      : k_(num_classes), name_(std::move(name)) {
    if (k_ < 2)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::ConfusionMatrix", policytrain::detail::format("num_classes is {}", k_),
          "the number of classes (at least 2)"));
    reset();
  }
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const { return name_; }
  /// False: the value is a matrix, not one number.
  bool scalar() const { return false; }
  /// Adds a batch to the states.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) {
    auto t = StatScores::labels("ConfusionMatrix", target, k_, "target");
    torch::Tensor p;
    if (prediction.dim() == 2 && prediction.size(1) == k_ && at::isFloatingType(prediction.scalar_type()))
      p = prediction.detach().to(torch::kCPU).argmax(1);
    else
      p = StatScores::labels("ConfusionMatrix", prediction, k_, "prediction");
    if (p.size(0) != t.size(0))
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::ConfusionMatrix",
          policytrain::detail::format("{} predictions for {} targets", p.size(0), t.size(0))));
    counts_.value = counts_.value + torch::bincount(t * k_ + p, {}, k_ * k_).view({k_, k_}).to(torch::kLong);
  }
  /// The [true class][predicted class] counts over every batch since reset().
  torch::Tensor compute() const { return counts_.value.clone(); }
  /// Clears the states: no batch.
  void reset() { counts_.value = torch::zeros({k_, k_}, torch::kLong); }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return {&counts_}; }

 private:
  int64_t k_;
  std::string name_;
  MetricState counts_{"confusion", {}, Reduce::sum};
};

/// Area under the ROC curve of a binary classifier (torchmetrics' BinaryAUROC without thresholds: exact, ties
/// counted half). Predictions: [batch] or [batch, 1] probabilities, or logits; targets 0 or 1. Keeps every
/// prediction (a `cat` state). When a value of the epoch is outside [0, 1] all of them pass through a sigmoid, as
/// torchmetrics' update does with the predictions it is given: decided over the whole validation set, not per
/// batch, so that the value does not depend on the batches and the ranks (torchmetrics updated batch by batch
/// decides per batch; the two agree unless some batches of logits fall in [0, 1]). With no positive or no negative
/// target it is 0, as torchmetrics' (which warns).
class BinaryAUROC {
 public:
  /// An AUROC named `name`.
  explicit BinaryAUROC(std::string name = "auroc") : name_(std::move(name)) { reset(); }
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const { return name_; }
  /// Adds a batch to the states.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) {
    auto p = prediction.detach().to(torch::kCPU, torch::kDouble).reshape({-1});
    auto t = target.detach().to(torch::kCPU, torch::kDouble).reshape({-1});
    if (p.numel() != t.numel())
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::BinaryAUROC",
          policytrain::detail::format("{} predictions {} for {} targets {}", p.numel(), c10::str(prediction.sizes()),
                                      t.numel(), c10::str(target.sizes())),
          "one score per sample"));
    if (t.numel() && ((t != 0) & (t != 1)).any().item<bool>())
      throw std::invalid_argument(
          policytrain::detail::error_message("policytrain::metric::BinaryAUROC", "a target is neither 0 nor 1"));
    preds_.value = torch::cat({preds_.value, p});
    target_.value = torch::cat({target_.value, t});
  }
  /// The AUROC over every batch since reset().
  torch::Tensor compute() const {
    auto p = preds_.value;
    const int64_t n = p.numel();
    if (n == 0) return torch::zeros({}, torch::kDouble);
    if (((p < 0) | (p > 1)).any().item<bool>()) p = p.sigmoid();
    const auto order = p.argsort(/*stable=*/true, /*dim=*/0, /*descending=*/true);
    const auto sp = p.index_select(0, order);
    const auto st = target_.value.index_select(0, order);
    // The last index of each distinct score, in descending order: the ROC curve's points.
    const auto distinct = (sp.slice(0, 1) - sp.slice(0, 0, n - 1)).nonzero().reshape({-1});
    const auto idx = torch::cat({distinct, torch::tensor({n - 1}, torch::kLong)});
    auto tps = st.cumsum(0).index_select(0, idx);
    auto fps = (idx + 1).to(torch::kDouble) - tps;
    tps = torch::cat({torch::zeros({1}, torch::kDouble), tps});
    fps = torch::cat({torch::zeros({1}, torch::kDouble), fps});
    const double pos = tps[-1].item<double>(), neg = fps[-1].item<double>();
    if (pos == 0 || neg == 0) return torch::zeros({}, torch::kDouble);
    const auto tpr = tps / pos, fpr = fps / neg;
    return torch::trapezoid(tpr, fpr);
  }
  /// Clears the states: no batch.
  void reset() {
    preds_.value = torch::zeros({0}, torch::kDouble);
    target_.value = torch::zeros({0}, torch::kDouble);
  }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return {&preds_, &target_}; }

 private:
  std::string name_;
  MetricState preds_{"predictions", {}, Reduce::cat};
  MetricState target_{"targets", {}, Reduce::cat};
};

}  // namespace policytrain::metric
