#pragma once
// A policy written outside the library: the learning-rate range test ("LR finder", Smith 2017, as in
// fastai's lr_find). docs/writing-a-policy.md quotes the marked regions of this file.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include <torch/optim/optimizer.h>

namespace example {

// [snippet:class]
/// Sweeps the learning rate exponentially from `min_lr` to `max_lr`, one value per optimizer step, records
/// the smoothed training loss at each, and suggests the rate at which the loss fell fastest.
/// Hooks: on_fit_begin (first rate), after_step (record, next rate), on_epoch_end (stop when done).
/// A callback: it declares no category, so it composes with any precision, schedule or parallel policy
/// (compose it without a schedule: a schedule would overwrite the rates it sets).
class LrFinder {
 public:
  static constexpr std::string_view name = "example::LrFinder";
  struct Options {
    double min_lr = 1e-6;
    double max_lr = 1.0;
    int64_t steps = 100;      ///< rates tried (optimizer steps)
    double smoothing = 0.05;  ///< weight of the newest loss in the moving average
    double diverge = 4.0;     ///< stop once the smoothed loss exceeds this multiple of its minimum
  };
  LrFinder() = default;
  explicit LrFinder(Options o) : o_(o) {}
  // [/snippet:class]

  // [snippet:hooks]
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    set_lr(ctx.optimizer(), rate(0));
  }

  template <class Ctx>
  void after_step(Ctx& ctx, bool stepped) {
    if (done_ || !stepped) return;  // a skipped step (non-finite loss) tells nothing about this rate
    const double loss = ctx.state().loss_value();
    const auto k = static_cast<int64_t>(rates_.size());
    avg_ = o_.smoothing * loss + (1 - o_.smoothing) * avg_;
    const double smoothed = avg_ / (1 - std::pow(1 - o_.smoothing, k + 1));  // bias-corrected, as Adam's moments
    rates_.push_back(rate(k));
    losses_.push_back(smoothed);
    best_ = k == 0 ? smoothed : std::min(best_, smoothed);
    done_ = k + 1 >= o_.steps || !std::isfinite(smoothed) || smoothed > o_.diverge * best_;
    if (!done_) set_lr(ctx.optimizer(), rate(k + 1));
  }

  template <class Ctx>
  bool on_epoch_end(Ctx&) {
    return done_;  // true stops training (after every rank agrees)
  }
  // [/snippet:hooks]

  /// The rate at which the smoothed loss fell fastest per unit of log(rate), or NaN with fewer than 3 points.
  double suggestion() const {
    double best_slope = 0, best_rate = std::nan("");
    for (size_t i = 1; i + 1 < rates_.size(); ++i) {
      const double slope = (losses_[i + 1] - losses_[i - 1]) / std::log(rates_[i + 1] / rates_[i - 1]);
      if (slope < best_slope) best_slope = slope, best_rate = rates_[i];
    }
    return best_rate;
  }
  const std::vector<double>& rates() const { return rates_; }
  const std::vector<double>& losses() const { return losses_; }

 private:
  double rate(int64_t k) const {
    const double t = o_.steps > 1 ? static_cast<double>(k) / static_cast<double>(o_.steps - 1) : 0.0;
    return o_.min_lr * std::pow(o_.max_lr / o_.min_lr, t);
  }
  static void set_lr(torch::optim::Optimizer& opt, double lr) {
    for (auto& group : opt.param_groups()) group.options().set_lr(lr);
  }

  Options o_;
  std::vector<double> rates_, losses_;
  double avg_ = 0, best_ = 0;
  bool done_ = false;
};

}  // namespace example
