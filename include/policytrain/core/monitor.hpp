#pragma once
/// \file
/// Monitor: which validation metric a policy watches ("loss", "accuracy" or a task's extra metric), whether
/// lower or higher is better, and by how much a value must beat the best to count as an improvement.
/// Shared by checkpoint::Disk (best checkpoints) and callbacks::EarlyStopping.
#include <cmath>
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>

#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain {

/// Whether a lower (`min`) or higher (`max`) value of the monitored metric is better.
enum class Mode { min, max };

/// "min" or "max" as a Mode; throws std::invalid_argument naming the text otherwise.
POLICYTRAIN_DECL Mode parse_mode(const std::string& s)
#if POLICYTRAIN_DEFINE
{
  if (s == "min") return Mode::min;
  if (s == "max") return Mode::max;
  throw std::invalid_argument(
      detail::error_message("policytrain", detail::format("mode '{}' is unknown", s), {}, "use 'min' or 'max'"));
}
#else
;
#endif
/// "min" or "max".
inline const char* to_string(Mode m) { return m == Mode::min ? "min" : "max"; }

/// Which validation metric to watch, which direction is better, and the margin an improvement needs.
struct Monitor {
  std::string metric = "loss";  ///< a name Metrics::get knows
  /// Whether lower (min) or higher (max) is better; unset: the metric's own direction (default_mode).
  std::optional<Mode> mode{};
  double min_delta = 0;         ///< an improvement must beat the best by more than this

  /// The direction that suits a metric: max for a score (accuracy, acc, top-k accuracy, f1, precision, recall, auc,
  /// auroc, r2, iou, map, dice and names ending in one of them after '_' or '/', as "val_accuracy" or "macro/f1",
  /// then perhaps an average, as "f1_macro" or "precision/weighted"), min for
  /// everything else (loss, error, perplexity, mse, mae, ...).
  static Mode default_mode(const std::string& metric);
  /// The mode in effect: the one given, else the metric's own (default_mode).
  Mode effective_mode() const { return mode.value_or(default_mode(metric)); }

  /// Whether `v` improves on `best` (any finite value improves on a NaN best, i.e. on no best yet).
  bool improves(double v, double best) const {
    if (!std::isfinite(v)) return false;
    if (std::isnan(best)) return true;
    return effective_mode() == Mode::min ? v < best - min_delta : v > best + min_delta;
  }
  /// Whether `v` is strictly better than `threshold` (no min_delta).
  bool better(double v, double threshold) const { return effective_mode() == Mode::min ? v < threshold : v > threshold; }
  /// Whether `v` is strictly worse than `threshold`.
  bool worse(double v, double threshold) const { return effective_mode() == Mode::min ? v > threshold : v < threshold; }
};


// The definitions: here header-only, in <policytrain/src.hpp> with separate compilation (detail/config.hpp).
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL Mode Monitor::default_mode(const std::string& metric) {
  static constexpr std::string_view scores[] = {"accuracy", "acc", "f1", "precision", "recall", "auc", "auroc",
                                                "r2", "iou", "map", "dice", "top1", "top5"};
  std::string_view m = metric;
  // An average's name after the score ("f1_macro", "precision/weighted") leaves the score's direction.
  for (std::string_view avg : {"micro", "macro", "weighted"})
    if (m.size() > avg.size() + 1 && m.substr(m.size() - avg.size()) == avg &&
        (m[m.size() - avg.size() - 1] == '_' || m[m.size() - avg.size() - 1] == '/'))
      m = m.substr(0, m.size() - avg.size() - 1);
  if (const auto cut = m.find_last_of("_/"); cut != std::string_view::npos) m = m.substr(cut + 1);
  for (auto s : scores)
    if (m == s) return Mode::max;
  return Mode::min;
}
#endif

}  // namespace policytrain
