#pragma once
/// \file
/// callbacks::Profiler — PyTorch's own profiler (Kineto, through torch::autograd::profiler's prepareProfiler /
/// enableProfiler / disableProfiler, as Python's torch.profiler.profile drives it) over a schedule like
/// torch.profiler.schedule(wait, warmup, active, repeat): `wait` steps skipped, `warmup` steps run with the
/// profiler prepared but not recording, `active` steps recorded, `repeat` cycles (0: until the end of fit).
/// Recorded: every operator (aten::...) with its input shapes, memory allocations and frees ("[memory]"
/// events), optionally the C++ stacks; in CUDA builds (POLICYTRAIN_WITH_CUDA) also the CUDA kernels and
/// memory copies. Each recorded step is a user annotation "ProfilerStep#N" (N: the optimizer step, from 1)
/// holding our phases "data", "forward", "backward" and "step" (what each covers: StepPhases) as
/// record_function ranges, so the operators appear inside the phase that ran them.
/// Files (main rank): `<dir>/trace.json` for the first cycle, `<dir>/trace_cycle<k>.json` for cycle k > 0:
/// Chrome trace JSON written by Kineto (ProfilerResult::save); open it in ui.perfetto.dev, chrome://tracing or
/// TensorBoard's profiler plugin. At the end of fit: `<dir>/key_averages.txt` and `.json`, the operators of
/// every recorded step by self CPU time (as Python's `prof.key_averages().table(sort_by="self_cpu_time_total")`),
/// printed with the time by phase and the advice that follows (key_averages_table(), advice()).
/// Every rank runs the schedule (so each stops recording at the window's end); only the main rank writes.
/// Hooks: on_fit_begin, on_epoch_begin, around_forward, around_backward, after_step, on_fit_end.
/// Cost: disabled (empty `dir`), nothing; outside the recorded steps, a comparison per step; recording, the
/// profiler's own cost per operator (see bench/RESULTS.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <policytrain/callbacks/advice.hpp>
#include <policytrain/callbacks/step_phases.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::callbacks {

/// One row of the key-averages table: an operator (or annotation) name over all recorded steps.
struct ProfilerOpStats {
  std::string name;           ///< operator name, e.g. "aten::addmm", or a user annotation
  int64_t calls = 0;          ///< number of calls
  double self_cpu_us = 0;     ///< time in the operator itself, its children's time excluded (microseconds)
  double cpu_total_us = 0;    ///< time including its children (microseconds)
  int64_t self_cpu_mem = 0;   ///< bytes allocated minus freed directly by the operator
  double device_us = 0;       ///< CUDA kernel time under this name (kernels are listed by kernel name)
  bool annotation = false;    ///< a user annotation (record_function range), not an operator
};

/// Profiles a window of training steps with PyTorch's Kineto profiler (see the file comment).
class Profiler {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::Profiler";
  /// Settings of Profiler: the output directory, the schedule and what is recorded.
  struct Options {
    std::filesystem::path dir{};  ///< where trace.json goes (empty: the profiler is off)
    /// Steps skipped before the window.
    int64_t wait = 1;
    /// Steps run but not recorded, after `wait`.
    int64_t warmup = 1;
    /// Steps recorded (>= 1).
    int64_t active = 3;
    /// Cycles of wait + warmup + active (0: repeat until the end of fit, as torch.profiler.schedule).
    int64_t repeat = 1;
    bool record_shapes = true;   ///< operators' input shapes ("Input Dims" in the trace)
    bool profile_memory = true;  ///< allocation and free events ("[memory]")
    bool with_stack = false;     ///< the C++ stack of each operator (costly)
    int64_t table_rows = 15;     ///< rows of the key-averages table
    std::FILE* out = stdout;     ///< where the table and the advice are printed (nullptr: not printed)
  };
  /// What the schedule does in a step, as torch.profiler.ProfilerAction.
  enum class Action {
    none,            ///< not profiling
    warmup,          ///< profiler prepared, nothing recorded
    record,          ///< recording
    record_and_save  ///< recording; the trace is saved when this step ends
  };

  Profiler() = default;
  /// Throws std::invalid_argument for wait, warmup or repeat < 0, or active < 1.
  explicit Profiler(Options o) : o_(std::move(o)) {
    if (o_.wait < 0 || o_.warmup < 0 || o_.active < 1 || o_.repeat < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::callbacks::Profiler",
          policytrain::detail::format("wait {}, warmup {}, active {}, repeat {}; expected wait, warmup, "
                                      "repeat >= 0 and active >= 1",
                                      o_.wait, o_.warmup, o_.active, o_.repeat)));
  }
  /// Moves the settings and state (the moved-from profiler no longer owns a running session).
  Profiler(Profiler&& o) noexcept { *this = std::move(o); }
  /// Moves the settings and state.
  Profiler& operator=(Profiler&& o) noexcept {
    o_ = std::move(o.o_);
    state_ = std::exchange(o.state_, State::off);
    current_ = o.current_;
    step_ = o.step_, cycle_ = o.cycle_, recorded_steps_ = o.recorded_steps_;
    main_ = o.main_;
    step_rf_ = std::move(o.step_rf_), data_ = std::move(o.data_), opt_ = std::move(o.opt_);
    step_name_ = std::move(o.step_name_);
    stats_ = std::move(o.stats_);
    return *this;
  }
  /// Stops a session still running (an exception left fit).
  ~Profiler() {
    if (state_ != State::off) {
      try {
        stop_rf();
        if (state_ == State::prepared) torch::autograd::profiler::enableProfiler(config(), activities());
        torch::autograd::profiler::disableProfiler();
      } catch (...) {
      }
    }
  }

  /// Whether the profiler is on (a non-empty `dir`).
  bool enabled() const { return !o_.dir.empty(); }
  /// Whether Kineto is recording now (false between windows and after the last one, on every rank).
  bool window_open() const { return recording(); }
  /// The trace file of cycle `k` (written when its active steps end).
  std::filesystem::path trace_path(int64_t k = 0) const {
    return o_.dir / (k == 0 ? std::string("trace.json") : policytrain::detail::format("trace_cycle{}.json", k));
  }

  /// What torch.profiler.schedule(wait, warmup, active, repeat) returns for step `s` (0-based).
  Action action(int64_t s) const {
    const int64_t n = o_.wait + o_.warmup + o_.active;
    if (o_.repeat > 0 && s >= o_.repeat * n) return Action::none;
    const int64_t m = s % n;
    if (m < o_.wait) return Action::none;
    if (m < o_.wait + o_.warmup) return Action::warmup;
    return m < n - 1 ? Action::record : Action::record_and_save;
  }

  /// Starts the schedule at step 0.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    if (!enabled()) return;
    step_ = 0;
    cycle_ = 0;
    stats_.clear();
    main_ = ctx.is_main();
    features_ = run_features(ctx);
    current_ = action(0);
    transit(Action::none, current_, ctx);
  }
  /// Opens the first step's "data" range (the loader's first batch).
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) {
    if (!recording()) return;
    end_range(data_);  // restarted: the evaluation before it is no data wait
    data_ = begin_range("data");
  }
  /// Runs `fn` (the forward) inside a "forward" range while recording (training forwards only).
  template <class Ctx, class F>
  auto around_forward(Ctx&, F&& fn) {
    if (!recording() || !torch::GradMode::is_enabled()) return fn();
    end_range(data_);
    RECORD_USER_SCOPE("forward");
    return fn();
  }
  /// Runs `fn` (the backward) inside a "backward" range while recording; opens "step" after the last one.
  template <class Ctx, class F>
  void around_backward(Ctx& ctx, F&& fn) {
    if (!recording()) return fn();
    {
      RECORD_USER_SCOPE("backward");
      fn();
    }
    if (ctx.is_last_micro_step()) opt_ = begin_range("step");
    else data_ = begin_range("data");
  }
  /// Ends the step's ranges and moves the schedule on (starting, stopping and saving the trace).
  template <class Ctx>
  void after_step(Ctx& ctx, bool) {
    if (!enabled()) return;
    end_range(opt_);
    end_range(step_rf_);
    const Action prev = current_;
    current_ = action(++step_);
    transit(prev, current_, ctx);
  }
  /// Stops a recording window left open, saves it, and prints the key-averages table (main rank).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    if (!enabled()) return;
    stop_rf();
    if (state_ == State::recording) stop_and_save();
    else if (state_ == State::prepared) {  // as torch.profiler for WARMUP -> stop: start and stop, nothing kept
      torch::autograd::profiler::enableProfiler(config(), activities(), scopes());
      torch::autograd::profiler::disableProfiler();
      state_ = State::off;
    }
    current_ = Action::none;
    features_ = run_features(ctx);  // what the run used (a callback converting the model runs after fit begin)
    if (!main_ || stats_.empty()) return;
    std::filesystem::create_directories(o_.dir);
    std::ofstream(o_.dir / "key_averages.txt") << key_averages_table() << "\n" << advice() << "\n";
    std::ofstream(o_.dir / "key_averages.json") << key_averages_json().dump(1) << "\n";
    if (o_.out) std::fprintf(o_.out, "%s\n%s\n", key_averages_table().c_str(), advice().c_str());
  }

  /// The operators of every recorded step, by self CPU time (annotations included), as Python's key_averages().
  std::vector<ProfilerOpStats> key_averages() const {
    std::vector<ProfilerOpStats> v;
    for (const auto& [n, s] : stats_) v.push_back(s);
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.self_cpu_us > b.self_cpu_us; });
    return v;
  }
  /// The key-averages table (top `table_rows` by self CPU time), in the layout of Python's table().
  std::string key_averages_table() const {
    const auto v = key_averages();
    double self_total = 0;
    for (const auto& s : v) self_total += s.self_cpu_us;
    bool device = false;
    for (const auto& s : v) device = device || s.device_us > 0;
    auto t = [](double us) { return us >= 1e6 ? policytrain::detail::format("{:.3f}s", us / 1e6)
                                    : us >= 1e3 ? policytrain::detail::format("{:.3f}ms", us / 1e3) : policytrain::detail::format("{:.3f}us", us); };
    auto mem = [](int64_t b) {
      const double a = std::abs(static_cast<double>(b));
      return a >= 1 << 20 ? policytrain::detail::format("{:.2f} MB", b / 1048576.0)
             : a >= 1 << 10 ? policytrain::detail::format("{:.2f} KB", b / 1024.0) : policytrain::detail::format("{} B", b);
    };
    std::string s = policytrain::detail::format("{:<50} {:>11} {:>11} {:>11} {:>11} {:>12} {:>10} {:>13}{}\n", "Name", "Self CPU %",
                                "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls", "Self CPU Mem",
                                device ? policytrain::detail::format(" {:>12}", "CUDA total") : "");
    s += std::string(s.size() - 1, '-') + "\n";
    const size_t rows = std::min<size_t>(v.size(), static_cast<size_t>(std::max<int64_t>(o_.table_rows, 0)));
    for (size_t i = 0; i < rows; ++i) {
      const auto& r = v[i];
      // Shortened in place, not with `cond ? substr + "..." : r.name`: GCC 12 at -O3 reports that conditional's copy
      // as a memcpy past the string's 32 bytes (-Warray-bounds, a false positive: the copy goes to its heap buffer).
      std::string n = r.name;
      if (n.size() > 50) {
        n.resize(47);
        n += "...";
      }
      s += policytrain::detail::format("{:<50} {:>10.2f}% {:>11} {:>10.2f}% {:>11} {:>12} {:>10} {:>13}{}\n", n,
                       self_total > 0 ? 100 * r.self_cpu_us / self_total : 0.0, t(r.self_cpu_us),
                       self_total > 0 ? 100 * r.cpu_total_us / self_total : 0.0, t(r.cpu_total_us),
                       t(r.calls ? r.cpu_total_us / r.calls : 0.0), r.calls, mem(r.self_cpu_mem),
                       device ? policytrain::detail::format(" {:>12}", t(r.device_us)) : "");
    }
    s += policytrain::detail::format("Self CPU time total: {}; {} recorded steps", t(self_total), recorded_steps_);
    return s;
  }
  /// Where the recorded steps' time went (the phases' share of their steps) and what to try first.
  std::string advice() const {
    auto total = [&](const char* n) { auto it = stats_.find(n); return it == stats_.end() ? 0.0 : it->second.cpu_total_us; };
    const double d = total("data"), f = total("forward"), b = total("backward"), st = total("step");
    const double all = d + f + b + st;
    if (all <= 0) return "Profiler: no step was recorded (the run was shorter than wait + warmup).";
    std::string top;
    for (const auto& r : key_averages())
      if (!r.annotation) { top = r.name; break; }
    std::string s = policytrain::detail::format("Recorded steps: data {:.1f}%, forward {:.1f}%, backward {:.1f}%, step {:.1f}%; "
                                "top operator by self CPU time: {}.\n",
                                100 * d / all, 100 * f / all, 100 * b / all, 100 * st / all, top);
    if (d / all > 0.2)
      s += advice::data_wait();
    else if (st / all > 0.3)
      s += advice::optimizer(features_);
    else if (top.find("conv") != std::string::npos)
      s += "Convolutions dominate: " + advice::compute(features_, /*convolutions=*/true) + ".";
    else if (top.find("mm") != std::string::npos || top.find("linear") != std::string::npos)
      s += "Matrix multiplies dominate: " + advice::compute(features_, /*convolutions=*/false) + ".";
    else if (top.find("copy") != std::string::npos || top.find("contiguous") != std::string::npos ||
             top == "aten::to")
      s += "Copies dominate: look for layout or dtype conversions in the model (Input Dims in the trace show where).";
    else
      s += "The step is compute-bound: the top operators above are where to look first.";
    return s;
  }
  /// The key averages as JSON (name, calls, self_cpu_us, cpu_total_us, self_cpu_mem, device_us, annotation).
  nlohmann::json key_averages_json() const {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : key_averages())
      a.push_back({{"name", r.name}, {"calls", r.calls}, {"self_cpu_us", r.self_cpu_us},
                   {"cpu_total_us", r.cpu_total_us}, {"self_cpu_mem", r.self_cpu_mem}, {"device_us", r.device_us},
                   {"annotation", r.annotation}});
    return {{"recorded_steps", recorded_steps_}, {"ops", a}};
  }

  /// The settings as JSON, for a run's summary.
  nlohmann::json describe() const {
    if (!enabled()) return {{"name", name}, {"enabled", false}};
    return {{"name", name}, {"enabled", true}, {"engine", "kineto"}, {"trace", trace_path().string()},
            {"wait", o_.wait}, {"warmup", o_.warmup}, {"active", o_.active}, {"repeat", o_.repeat},
            {"record_shapes", o_.record_shapes}, {"profile_memory", o_.profile_memory},
            {"with_stack", o_.with_stack}};
  }

 private:
  enum class State { off, prepared, recording };
  using Range = std::unique_ptr<at::RecordFunction>;

  bool recording() const { return state_ == State::recording; }

  torch::profiler::impl::ProfilerConfig config() const {
    return torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO, o_.record_shapes,
                                                 o_.profile_memory, o_.with_stack);
  }
  static std::set<torch::profiler::impl::ActivityType> activities() {
    std::set<torch::profiler::impl::ActivityType> a{torch::profiler::impl::ActivityType::CPU};
#ifdef POLICYTRAIN_WITH_CUDA
    a.insert(torch::profiler::impl::ActivityType::CUDA);
#endif
    return a;
  }
  static std::unordered_set<at::RecordScope> scopes() { return {}; }  // all scopes, as torch.profiler

  static Range begin_range(const char* n) {
    auto r = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
    if (!r->isActive()) return nullptr;
    r->before(n);
    return r;
  }
  static void end_range(Range& r) {
    if (r) r->end();
    r.reset();
  }
  void stop_rf() {
    end_range(data_);
    end_range(opt_);
    end_range(step_rf_);
  }

  // The transitions of torch.profiler.profile's action_map.
  template <class Ctx>
  void transit(Action prev, Action cur, Ctx& ctx) {
    namespace ap = torch::autograd::profiler;
    const bool prev_rec = prev == Action::record || prev == Action::record_and_save;
    const bool cur_rec = cur == Action::record || cur == Action::record_and_save;
    if (prev_rec && (prev == Action::record_and_save || !cur_rec)) stop_and_save();
    if (prev == Action::warmup && cur == Action::none) {
      ap::enableProfiler(config(), activities(), scopes());
      ap::disableProfiler();
      state_ = State::off;
    }
    if (state_ == State::off && (cur == Action::warmup || cur_rec)) {
      ap::prepareProfiler(config(), activities());
      state_ = State::prepared;
    }
    if (state_ == State::prepared && cur_rec) {
      ap::enableProfiler(config(), activities(), scopes());
      state_ = State::recording;
    }
    if (recording()) {
      ++recorded_steps_;
      // RecordFunction keeps a view of the name: it lives in step_name_ while the range is open.
      step_name_ = policytrain::detail::format("ProfilerStep#{}", ctx.state().global_step + 1);
      step_rf_ = begin_range(step_name_.c_str());
      data_ = begin_range("data");
    }
  }

  void stop_and_save() {
    stop_rf();
    auto result = torch::autograd::profiler::disableProfiler();
    state_ = State::off;
    if (!main_ || !result) return;
    std::filesystem::create_directories(o_.dir);
    const auto path = trace_path(cycle_++);
    result->save(path.string());
    if (!std::filesystem::exists(path))
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::callbacks::Profiler", policytrain::detail::format("the trace '{}' was not written; check "
                                                                          "that the directory is writable",
                                                                          path.string())));
    accumulate(*result);
  }

  // Self time as Python's EventList: per thread, events nested by time; an event's self time is its duration
  // minus its direct children's. Memory events are charged to the innermost operator around them.
  void accumulate(const torch::autograd::profiler::ProfilerResult& r) {
    struct E { const torch::autograd::profiler::KinetoEvent* e; uint64_t a, b; int64_t child = 0; };
    std::map<uint64_t, std::vector<E>> by_thread;
    for (const auto& e : r.events()) {
      const std::string n = e.name();
      if (e.deviceType() != c10::DeviceType::CPU) {
        stats_[n].name = n;
        stats_[n].device_us += e.durationNs() / 1e3;
        continue;
      }
      if (e.isAsync() || n.rfind("profiler::_record_function", 0) == 0) continue;
      by_thread[e.startThreadId()].push_back({&e, e.startNs(), e.startNs() + e.durationNs()});
    }
    for (auto& [tid, v] : by_thread) {
      std::stable_sort(v.begin(), v.end(), [](const E& x, const E& y) { return x.a != y.a ? x.a < y.a : x.b > y.b; });
      std::vector<E*> stack;
      auto close = [&](E* x) {
        auto& s = stats_[x->e->name()];
        s.name = x->e->name();
        s.calls += 1;
        s.cpu_total_us += (x->b - x->a) / 1e3;
        s.self_cpu_us += (static_cast<double>(x->b - x->a) - static_cast<double>(x->child)) / 1e3;
        s.annotation = x->e->activityType() != 0;  // libkineto::ActivityType::CPU_OP is 0
      };
      for (auto& x : v) {
        while (!stack.empty() && stack.back()->b <= x.a && !(x.a == x.b && stack.back()->b == x.a)) {
          close(stack.back());
          stack.pop_back();
        }
        const std::string n = x.e->name();
        if (n == "[memory]") {
          if (!stack.empty()) stats_[stack.back()->e->name()].self_cpu_mem += x.e->nBytes();
          continue;
        }
        if (n.rfind("[", 0) == 0) continue;
        if (!stack.empty()) stack.back()->child += static_cast<int64_t>(x.b - x.a);
        stack.push_back(&x);
      }
      while (!stack.empty()) {
        close(stack.back());
        stack.pop_back();
      }
    }
  }

  Options o_;
  RunFeatures features_{};  // what the run uses, so that the advice does not suggest it
  State state_ = State::off;
  Action current_ = Action::none;
  int64_t step_ = 0, cycle_ = 0, recorded_steps_ = 0;
  bool main_ = true;
  Range step_rf_, data_, opt_;
  std::string step_name_;
  std::map<std::string, ProfilerOpStats> stats_;
};

}  // namespace policytrain::callbacks
