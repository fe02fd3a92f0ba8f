#pragma once
/// \file
/// callbacks::Profiler — a Chrome/Perfetto trace (JSON, open it in chrome://tracing or ui.perfetto.dev) of a
/// window of training steps, scheduled as PyTorch's profiler schedule: `wait` steps skipped, `warmup` steps run
/// but not recorded, `active` steps recorded. Each recorded step is a "ProfilerStep#N" range holding its phases
/// "data", "forward", "backward" and "step" (what each covers: StepPhases).
/// The trace is written from this callback's own timing with nlohmann::json: the LibTorch 2.13 CPU wheel is
/// built without a usable Kineto library ("library kineto not found"), so torch::autograd::profiler's Kineto
/// trace export cannot be relied on. The phases are also marked with RECORD_USER_SCOPE ranges, so a
/// Kineto-enabled LibTorch's own profiler, if the user runs one, shows the same names beside the operators.
/// File: `<dir>/trace.json`, written when the window ends (or at the end of fit if it ended first).
/// Hooks: on_fit_begin, on_epoch_begin, around_forward, around_backward, after_step, on_fit_end (main rank only
/// writes). Cost: four clock reads per micro-step, and the events of `active` steps in memory.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <policytrain/callbacks/step_phases.hpp>

namespace policytrain::callbacks {

/// Writes a Chrome/Perfetto trace of a window of training steps (see the file comment).
class Profiler {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::Profiler";
  /// Settings of Profiler: the output directory and the wait / warmup / active schedule.
  struct Options {
    std::filesystem::path dir{};  ///< where trace.json goes (empty: the profiler is off)
    /// Steps skipped before the window.
    int64_t wait = 1;
    /// Steps run but not recorded, after `wait`.
    int64_t warmup = 1;
    /// Steps recorded (>= 1).
    int64_t active = 3;
  };
  Profiler() = default;
  /// Throws std::invalid_argument for wait or warmup < 0, or active < 1.
  explicit Profiler(Options o) : o_(std::move(o)) {
    if (o_.wait < 0 || o_.warmup < 0 || o_.active < 1)
      throw std::invalid_argument(fmt::format(
          "policytrain::callbacks::Profiler: wait {}, warmup {}, active {}; expected wait, warmup >= 0 and active >= 1",
          o_.wait, o_.warmup, o_.active));
  }

  /// Whether the profiler is on (a non-empty `dir`).
  bool enabled() const { return !o_.dir.empty(); }
  /// The trace file (written once the window is complete).
  std::filesystem::path trace_path() const { return o_.dir / "trace.json"; }

  /// Starts the trace clock and clears the events.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    if (!enabled()) return;
    t0_ = StepPhases::Clock::now();
    step_ = 0;
    written_ = false;
    events_ = nlohmann::json::array();
  }
  /// Starts the epoch's phase timing.
  template <class Ctx>
  void on_epoch_begin(Ctx&) {
    if (enabled()) phases_.epoch_begin();
  }
  /// Runs `fn` (the forward), timed, while the window is open.
  template <class Ctx, class F>
  auto around_forward(Ctx&, F&& fn) {
    if (!recording()) return fn();
    RECORD_USER_SCOPE("forward");
    return phases_.forward(fn);
  }
  /// Runs `fn` (the backward), timed, while the window is open.
  template <class Ctx, class F>
  void around_backward(Ctx& ctx, F&& fn) {
    if (!recording()) return fn();
    RECORD_USER_SCOPE("backward");
    phases_.backward(fn, ctx.is_last_micro_step());
  }
  /// Records the step's phases once past wait and warmup; writes the trace when the window ends (main rank).
  template <class Ctx>
  void after_step(Ctx& ctx, bool stepped) {
    if (!recording()) return;
    phases_.step_end();
    const int64_t s = step_++;
    if (s < o_.wait + o_.warmup) return;
    const auto& spans = phases_.last_spans();
    if (!spans.empty()) {
      const int pid = static_cast<int>(::getpid());
      events_.push_back(event(fmt::format("ProfilerStep#{}", ctx.state().global_step), spans.front().begin,
                              spans.back().end, pid, {{"epoch", ctx.state().epoch}, {"stepped", stepped}}));
      for (const auto& sp : spans)
        events_.push_back(event(sp.name, sp.begin, sp.end, pid, {{"step", ctx.state().global_step}}));
    }
    if (s + 1 == o_.wait + o_.warmup + o_.active) {
      if (ctx.is_main()) write();
      else stop();  // other ranks write nothing: stop recording and drop the events
    }
  }
  /// Writes the trace if the window had not ended (main rank).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    if (enabled() && !written_) {
      if (ctx.is_main()) write();
      else stop();
    }
  }

  /// Whether the window is still being recorded (false once it ended, on every rank).
  bool window_open() const { return recording(); }
  /// Events held in memory (steps and their phases of the window so far).
  size_t event_count() const { return events_.size(); }

  /// The settings as JSON, for a run's summary.
  nlohmann::json describe() const {
    if (!enabled()) return {{"name", name}, {"enabled", false}};
    return {{"name", name}, {"enabled", true}, {"trace", trace_path().string()}, {"wait", o_.wait},
            {"warmup", o_.warmup}, {"active", o_.active}};
  }

 private:
  // Times are taken in every step of the window (wait and warm-up included), so the first recorded step's
  // data phase is measured from the previous step, as in the steps after it.
  bool recording() const { return enabled() && !written_; }

  nlohmann::json event(const std::string& n, StepPhases::Clock::time_point a, StepPhases::Clock::time_point b,
                       int pid, nlohmann::json args) const {
    auto us = [&](StepPhases::Clock::time_point t) {
      return std::chrono::duration<double, std::micro>(t - t0_).count();
    };
    return {{"name", n}, {"cat", "policytrain"}, {"ph", "X"}, {"ts", us(a)}, {"dur", us(b) - us(a)},
            {"pid", pid}, {"tid", 0}, {"args", std::move(args)}};
  }
  void stop() {
    events_ = nlohmann::json::array();
    written_ = true;
  }
  void write() {
    std::filesystem::create_directories(o_.dir);
    nlohmann::json trace{{"traceEvents", events_},
                         {"displayTimeUnit", "ms"},
                         {"otherData", {{"producer", "policytrain::callbacks::Profiler"},
                                        {"wait", o_.wait}, {"warmup", o_.warmup}, {"active", o_.active}}}};
    std::ofstream f(trace_path());
    if (!f) throw std::runtime_error(fmt::format("policytrain::callbacks::Profiler: cannot write '{}'; check the "
                                                 "directory is writable", trace_path().string()));
    f << trace.dump() << "\n";
    written_ = true;
  }

  Options o_;
  StepPhases phases_;
  StepPhases::Clock::time_point t0_{};
  int64_t step_ = 0;
  bool written_ = false;
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace policytrain::callbacks
