#pragma once
/// \file
/// callbacks::ProgressBar — progress of each epoch (optimizer steps per second, ETA, loss, lr, and the loss scale when a precision
/// policy scales), and one summary line per epoch with the validation metrics. In a run by steps
/// (FitOptions::by_steps) the bar counts optimizer steps to max_steps (steps/s); when the fit counts tokens
/// (Context::counts_tokens) the line adds this rank's tokens/s ("tok/s") and, with the task's flops_per_token() and
/// FitOptions::peak_flops, its MFU against one device's peak; a validation every
/// val_every_steps steps (or eval_on_start's) prints a line of its own, "step S/M  loss ...  val_loss ...".
/// On a terminal it redraws one line; otherwise (CI logs, files) it prints plain lines every `every` steps
/// (default: about ten per epoch). Prints on the main rank only. Each line ends with the peak memory: the peak
/// RSS (VmHWM; per step when a MetricsLog resets it each step, else since the start) and with CUDA the caching
/// allocator's peak (see memory/peak.hpp).
/// Hooks: on_fit_begin, on_epoch_begin, after_step, on_validation_end, on_epoch_end. Cost: a clock read per
/// step, and one loss read (a device sync) per printed line.
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/memory/peak.hpp>

namespace policytrain::callbacks {

/// Prints training progress and one line of results per epoch; see the file's description.
class ProgressBar {
 public:
  /// The name in logs and checkpoints.
  static constexpr std::string_view name = "ProgressBar";
  /// Runtime options.
  struct Options {
    int64_t every = 0;        ///< plain mode: print every N optimizer steps (0: about ten lines per epoch)
    double refresh_hz = 10;   ///< terminal mode: redraws per second at most
    int force_tty = -1;       ///< -1: detect (own_terminal); 0: plain lines; 1: terminal mode
    /// where to print
    std::FILE* out = stdout;
  };
  ProgressBar() = default;
  /// A progress bar with options `o`.
  explicit ProgressBar(Options o) : o_(o) {}

  /// Called by the Trainer (the contract: core/hooks.hpp); not meant to be called directly.
  ///@{
  template <class Ctx>
  void on_fit_begin(Ctx&) {
    tty_ = o_.force_tty >= 0 ? o_.force_tty == 1 : own_terminal(::fileno(o_.out));
    in_epoch_ = in_epoch_seen_ = false;
    val_t0_ = Clock::now();
    ival_sum_ = ival_count_ = torch::Tensor();
  }
  /// Whether `fd` is a terminal this process's group holds the foreground of: a user's. mpirun gives rank 0's
  /// output a pseudo-terminal of its own (isatty is true) that no one watches and a batch log keeps: no session
  /// holds it, so tcgetpgrp fails there and the redraws of terminal mode would fill the log.
  static bool own_terminal(int fd) { return ::isatty(fd) == 1 && ::tcgetpgrp(fd) == ::getpgrp(); }
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    t0_ = last_draw_ = Clock::now();
    if (!in_epoch_seen_) val_t0_ = t0_;
    in_epoch_seen_ = in_epoch_ = true;
    steps0_ = ctx.state().global_step;
    tokens0_ = ctx.state().tokens_seen;
    batches_ = ctx.epoch_batches();
    loss_sum_ = loss_count_ = torch::Tensor();
  }
  template <class Ctx>
  void after_step(Ctx& ctx, bool /*stepped*/) {
    if (!ctx.is_main()) return;
    // The epoch line's loss is the mean of the steps' losses (the finite ones, as MetricsLog's train_loss), summed
    // where the loss is, so that no step waits for it.
    if (const auto& l = ctx.state().last_loss; l.defined()) {
      const auto finite = l.detach().isfinite();
      const auto v = torch::where(finite, l.detach().to(torch::kDouble), 0.0);
      loss_sum_ = loss_sum_.defined() ? loss_sum_ + v : v;
      loss_count_ = loss_count_.defined() ? loss_count_ + finite : finite.to(torch::kLong);
      if (ctx.options().val_every_steps > 0) {  // the validation line's loss: the steps' since the last validation
        ival_sum_ = ival_sum_.defined() ? ival_sum_ + v : v;
        ival_count_ = ival_count_.defined() ? ival_count_ + finite : finite.to(torch::kLong);
      }
    }
    const auto now = Clock::now();
    const int64_t done = ctx.state().batch_in_epoch;
    if (tty_) {
      if (std::chrono::duration<double>(now - last_draw_).count() * o_.refresh_hz < 1.0 && done != batches_) return;
      last_draw_ = now;
      std::fprintf(o_.out, "\r%s\033[K", line(ctx, now).c_str());
      std::fflush(o_.out);
    } else if (ctx.options().by_steps()) {
      // A run by steps: about ten lines over the run, at the global steps that are multiples of the interval.
      const int64_t every = o_.every > 0 ? o_.every : std::max<int64_t>(1, ctx.options().max_steps / 10);
      const int64_t s = ctx.state().global_step;
      if (s % every != 0 && s != ctx.options().max_steps) return;
      std::fprintf(o_.out, "%s\n", line(ctx, now).c_str());
      std::fflush(o_.out);
    } else {
      const int64_t every = o_.every > 0 ? o_.every : (batches_ > 0 ? std::max<int64_t>(1, batches_ / 10) : 100);
      const int64_t s = ctx.state().global_step - steps0_;
      if (s % every != 0 && done != batches_) return;
      std::fprintf(o_.out, "%s\n", line(ctx, now).c_str());
      std::fflush(o_.out);
    }
  }
  template <class Ctx>
  void on_validation_end(Ctx& ctx, const Metrics& m) {
    // Only the metrics this validation has: a regression has no accuracy; a task's own metrics follow.
    val_ = policytrain::detail::format("  val_loss {:.4f}", m.loss);
    if (m.has_accuracy()) val_ += policytrain::detail::format("  val_acc {:.4f}", m.accuracy);
    for (const auto& [k, v] : m.extra) val_ += policytrain::detail::format("  val_{} {:.4g}", k, v);
    // A validation that is not an epoch's end (every val_every_steps steps, or eval_on_start before the first
    // epoch) has a line of its own, named by its step.
    if (ctx.options().val_every_steps <= 0 && in_epoch_) return;
    if (ctx.is_main()) {
      if (tty_ && in_epoch_) std::fprintf(o_.out, "\n");
      const auto now = Clock::now();
      std::fprintf(o_.out, "%s%s%s  lr %.3g  %.1fs\n", step_name(ctx).c_str(), loss_part(ival_sum_, ival_count_).c_str(),
                   val_.c_str(), ctx.step_lr(), std::chrono::duration<double>(now - val_t0_).count());
      std::fflush(o_.out);
      val_t0_ = now;
    }
    ival_sum_ = ival_count_ = torch::Tensor();
    val_.clear();
  }
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (!ctx.is_main()) return;
    in_epoch_ = false;
    if (tty_) std::fprintf(o_.out, "\n");
    const double secs = std::chrono::duration<double>(Clock::now() - t0_).count();
    std::fprintf(o_.out, "%s%s%s  lr %.3g  %.1fs\n", epoch_name(ctx).c_str(), loss_part(loss_sum_, loss_count_).c_str(),
                 val_.c_str(), ctx.step_lr(), secs);
    std::fflush(o_.out);
    val_.clear();
  }
  ///@}

 private:
  /// The mean of finite step losses summed in `sum` and counted in `count` (NaN without one).
  static double mean(const torch::Tensor& sum, const torch::Tensor& count) {
    if (!count.defined() || count.item<int64_t>() == 0) return std::numeric_limits<double>::quiet_NaN();
    return sum.item<double>() / static_cast<double>(count.item<int64_t>());
  }
  /// "  loss X", the mean of the steps' losses, or nothing where no step was trained (eval_on_start's line at
  /// step 0: a "nan" there would read as a diverged run).
  static std::string loss_part(const torch::Tensor& sum, const torch::Tensor& count) {
    if (!count.defined()) return {};
    return policytrain::detail::format("  loss {:.4f}", mean(sum, count));
  }
  /// "epoch E/L" (E the 0-based index, L the last); in a run by steps, which has no last epoch, "epoch E".
  template <class Ctx>
  static std::string epoch_name(Ctx& ctx) {
    if (ctx.options().by_steps()) return policytrain::detail::format("epoch {}", ctx.state().epoch);
    return policytrain::detail::format("epoch {}/{}", ctx.state().epoch, ctx.options().epoch_limit() - 1);
  }
  /// "step S/M" (S optimizer steps done of M) in a run by steps; "step S" otherwise.
  template <class Ctx>
  static std::string step_name(Ctx& ctx) {
    if (ctx.options().max_steps >= 0)
      return policytrain::detail::format("step {}/{}", ctx.state().global_step, ctx.options().max_steps);
    return policytrain::detail::format("step {}", ctx.state().global_step);
  }
  torch::Tensor loss_sum_, loss_count_, ival_sum_, ival_count_;
  using Clock = std::chrono::steady_clock;

  template <class Ctx>
  std::string line(Ctx& ctx, Clock::time_point now) const {
    const int64_t done = ctx.state().batch_in_epoch;
    const double secs = std::chrono::duration<double>(now - t0_).count();
    const double rate = secs > 0 ? done / secs : 0.0;  // micro-batches per second: the ETA's
    // The rate shown counts optimizer steps (an accumulation window is one), as a run by steps counts them.
    const double step_rate = secs > 0 ? static_cast<double>(ctx.state().global_step - steps0_) / secs : 0.0;
    std::string s;
    if (ctx.options().by_steps()) {
      // A run by steps: its bar counts optimizer steps to max_steps, at optimizer steps per second (this epoch's).
      const int64_t step = ctx.state().global_step, total = ctx.options().max_steps;
      constexpr int width = 24;
      const int filled = total > 0 ? static_cast<int>(width * std::min(step, total) / total) : width;
      const double eta = step_rate > 0 ? (total - step) / step_rate : 0.0;
      s = policytrain::detail::format("step [{}{}] {}/{} {:.1f} steps/s ETA {}:{:02d} ", std::string(filled, '#'),
                                      std::string(width - filled, '.'), step, total, step_rate,
                                      static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
    } else {
      s = policytrain::detail::format("{} ", epoch_name(ctx));
    }
    if (ctx.options().by_steps()) {
      // the steps' bar above
    } else if (batches_ > 0) {
      constexpr int width = 24;
      const int filled = static_cast<int>(width * done / batches_);
      s += policytrain::detail::format("[{}{}] {}/{} ", std::string(filled, '#'), std::string(width - filled, '.'), done, batches_);
      const double eta = rate > 0 ? (batches_ - done) / rate : 0.0;
      s += policytrain::detail::format("{:.1f} steps/s ETA {}:{:02d} ", step_rate, static_cast<int>(eta) / 60,
                                       static_cast<int>(eta) % 60);
    } else {
      s += policytrain::detail::format("{} {:.1f} steps/s ", done, step_rate);
    }
    if (ctx.counts_tokens()) {
      // This rank's tokens per second over the same time as the steps' rate (so tokens/s = steps/s x the tokens
      // of a step), and the MFU they give against one device's peak.
      const double tokens_rate = secs > 0 ? static_cast<double>(ctx.state().tokens_seen - tokens0_) / secs : 0.0;
      s += policytrain::detail::format("{:.0f} tok/s ", tokens_rate);
      const double flops = ctx.flops_per_token(), peak = ctx.options().peak_flops;
      if (flops > 0 && peak > 0) s += policytrain::detail::format("mfu {:.2f}% ", 100.0 * flops * tokens_rate / peak);
    }
    s += policytrain::detail::format("loss {:.4f} lr {:.3g}", ctx.state().loss_value(), ctx.step_lr());
    if constexpr (requires { ctx.template policy<Category::precision>().loss_scale(); }) {
      const double scale = ctx.template policy<Category::precision>().loss_scale();
      if (scale > 0) s += policytrain::detail::format(" scale {:g}", scale);
    }
    if (const auto rss = memory::peak_rss_bytes()) s += policytrain::detail::format(" mem {:.0f}MiB", *rss / 1048576.0);
    if (const auto cuda = memory::cuda_peak_allocated_bytes()) s += policytrain::detail::format(" cuda {:.0f}MiB", *cuda / 1048576.0);
    return s;
  }

  Options o_;
  bool tty_ = false;
  bool in_epoch_ = false, in_epoch_seen_ = false;
  Clock::time_point t0_{}, last_draw_{}, val_t0_{};
  int64_t steps0_ = 0, batches_ = -1, tokens0_ = 0;
  std::string val_;
};

}  // namespace policytrain::callbacks
