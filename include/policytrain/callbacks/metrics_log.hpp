#pragma once
/// \file
/// callbacks::MetricsLog — a metrics log per run, and where the time went.
/// Files in `dir` (main rank only): steps.csv and steps.jsonl, one row per optimizer step (every `every` steps):
/// epoch, step, batch_in_epoch, loss, lr (group 0's, the one the step was taken with), loss_scale (when the precision policy has loss_scale()), grad_norm
/// (when a GradClip callback clips by norm), samples, samples_per_s, step_s and its phases data_s, forward_s,
/// backward_s, optimizer_s, and whether the step was taken; epochs.csv and epochs.jsonl, one row per epoch:
/// train loss (mean over the epoch's logged steps), validation loss and one val_NAME column per metric the validation
/// declares (Context::metric_names: no val_accuracy for a regression), seconds, samples/s and the
/// fraction of the time spent waiting for data. A fit that counts tokens (Context::counts_tokens) adds tokens and
/// tokens_per_s to the step rows and tokens_per_s to the epoch rows (this rank's, as samples_per_s), and mfu to
/// both with the task's flops_per_token() and FitOptions::peak_flops (against one device's peak). A fit that validates every N steps (FitOptions::val_every_steps) or at
/// its start (eval_on_start) also writes validations.csv and validations.jsonl, one row per validation: step, epoch,
/// train loss (the mean of the logged steps since the previous validation), validation loss and val_NAME columns.
/// At the end of fit it prints a summary (data wait vs compute, and the advice that follows) and keeps it for
/// summary.json (`summary()`: data_wait_fraction, step_seconds by phase).
/// A fit that continues a run (its state has steps or epochs done: resumed from a checkpoint, or a second fit)
/// appends to the files in `dir`, keeping the rows up to its state (steps <= global_step, epochs < epoch) and
/// dropping later ones, so a resumed run's logs have every row once; a fit from step 0 truncates them. Rows reach
/// the files at every epoch end and before every checkpoint (before_checkpoint, called by the checkpoint policy), so
/// a run killed after a checkpoint and resumed from it has them all; an epoch resumed in its middle takes the
/// training loss of its kept rows (steps.jsonl, exact) so that its row equals an uninterrupted run's.
/// Phase times come from StepPhases (see its header for what each phase covers).
/// Hooks: on_fit_begin, on_epoch_begin, around_forward, around_backward, before_step, after_step,
/// on_validation_end, before_checkpoint, on_epoch_end, on_fit_end. Cost: four clock reads per micro-step, and per logged step one read of the loss
/// (and of the grad norm), each a device sync on CUDA; an empty `dir` writes no files but still times.
/// Peak memory per step (memory::PeakMemory: peak RSS from VmHWM, reset at each step's first forward; with CUDA
/// also the caching allocator's peak) goes in the step rows (peak_rss_mib, peak_cuda_mib), and its maximum over
/// the fit in the summary ("peak_memory"); a read of /proc/self/status and a write of clear_refs per step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <policytrain/callbacks/advice.hpp>
#include <policytrain/callbacks/grad_clip.hpp>
#include <policytrain/callbacks/step_phases.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/memory/peak.hpp>

namespace policytrain::callbacks {

/// Per-step and per-epoch metric logs, and a summary of where the time went (see the file comment).
class MetricsLog {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::MetricsLog";
  /// Settings of MetricsLog: the directory, the logging interval and the summary.
  struct Options {
    std::filesystem::path dir{};  ///< where the logs go (empty: no files)
    int64_t every = 1;            ///< log every N optimizer steps
    bool print_summary = true;    ///< print the time summary at the end of fit
    /// Where the summary is printed.
    std::FILE* out = stdout;
  };
  MetricsLog() = default;
  /// With the given settings.
  explicit MetricsLog(Options o);
  /// Moved (the Trainer moves it into its policies), not copied (it holds the open logs). Declared here and
  /// defined with the other non-template members: the implicit ones were generated in every file that builds a
  /// Trainer with a MetricsLog (about 4 KB of code each).
  ///@{
  MetricsLog(MetricsLog&&);
  MetricsLog& operator=(MetricsLog&&);
  ~MetricsLog();
  ///@}

  /// Resets the totals and opens the log files (main rank, non-empty `dir`).
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    totals_ = {};
    peak_max_ = {};
    peak_.reset();
    peak_pending_ = false;
    steps_ = 0;
    samples_ = 0;
    val_names_.clear();
    for (auto& k : ctx.metric_names())
      if (k != "loss") val_names_.push_back(std::move(k));
    log_validations_ = ctx.options().val_every_steps > 0 || ctx.options().eval_on_start;
    // Token columns only in a fit that counts tokens: the logs of any other run keep their columns.
    tokens_ = ctx.counts_tokens();
    mfu_flops_ = tokens_ && ctx.options().peak_flops > 0 ? ctx.flops_per_token() : 0.0;
    peak_flops_ = ctx.options().peak_flops;
    if (o_.dir.empty() || !ctx.is_main()) return;
    open_logs(ctx.state().global_step, ctx.state().epoch, ctx.state().batch_in_epoch > 0);
  }
  /// Starts the epoch's timing and clears its totals.
  template <class Ctx>
  void on_epoch_begin(Ctx&) {
    phases_.epoch_begin();
    epoch_ = {};
    epoch_loss_sum_ = std::exchange(carry_loss_sum_, 0.0);
    epoch_loss_n_ = std::exchange(carry_loss_n_, 0);
    epoch_samples_ = 0;
    epoch_tokens_ = 0;
    epoch_row_written_ = false;
    val_.reset();
  }
  /// Runs `fn` (the forward), timed.
  template <class Ctx, class F>
  auto around_forward(Ctx&, F&& fn) {
    if (peak_pending_) {  // the first forward of a step: its peak memory starts here
      peak_.reset();
      peak_pending_ = false;
    }
    return phases_.forward(fn);
  }
  /// Runs `fn` (the backward), timed.
  template <class Ctx, class F>
  void around_backward(Ctx& ctx, F&& fn) { phases_.backward(fn, ctx.is_last_micro_step()); }

  /// Keeps the lr the step is taken with (after_step runs after the schedule has set the next step's).
  template <class Ctx>
  void before_step(Ctx& ctx) { step_lr_ = ctx.lr(); }

  /// Adds the step's phase times and writes a row every `every` steps.
  template <class Ctx>
  void after_step(Ctx& ctx, bool stepped) {
    const auto& st = ctx.state();
    if (!count_step(st.window_samples, st.window_tokens, st.global_step)) return;
    if (!add_step_loss(st.loss_value())) return;
    std::optional<double> scale, norm;
    if constexpr (requires { ctx.template policy<Category::precision>().loss_scale(); }) {
      const double s = ctx.template policy<Category::precision>().loss_scale();
      if (s > 0) scale = s;
    }
    if constexpr (Ctx::template has<GradClip>()) {
      auto& clip = ctx.template get<GradClip>();
      if (clip.clips_by_norm() && clip.last_norm_tensor().defined()) norm = clip.last_norm();
    }
    write_step_row(st.epoch, st.global_step, st.batch_in_epoch, step_loss_, step_n_, step_tokens_, step_t_, step_mem_,
                   scale, norm, stepped);
  }

  /// Keeps the epoch's validation metrics for its row; in a fit validated by steps, writes the validation's row.
  template <class Ctx>
  void on_validation_end(Ctx& ctx, const Metrics& m) {
    val_ = m;
    if (!log_validations_) return;
    write_validation_row(ctx.state().global_step, ctx.state().epoch, m);
  }

  /// Before a checkpoint is written: flushes every row so far, after writing the epoch's row when the checkpoint
  /// ends the epoch, so that a run killed after the checkpoint and resumed from it finds every row up to its step
  /// (a kill -9 loses what a process buffers, not what it has handed to the system).
  template <class Ctx>
  void before_checkpoint(Ctx& ctx, bool epoch_end) {
    if (epoch_end && !epoch_row_written_) write_epoch_row(ctx.state().epoch);
    flush();
  }

  /// Writes the epoch's row (unless a checkpoint ending the epoch had it written) and flushes the logs.
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (!epoch_row_written_) write_epoch_row(ctx.state().epoch);
    flush();
  }

  /// Hands every row written so far to the system.
  void flush();

 private:
  void write_epoch_row(int64_t epoch);
  void write_validation_row(int64_t step, int64_t epoch, const Metrics& m);

 public:

  /// Closes the logs and prints the summary (main rank).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    features_ = run_features(ctx);
    steps_csv_.close();
    steps_jsonl_.close();
    epochs_csv_.close();
    epochs_jsonl_.close();
    validations_csv_.close();
    validations_jsonl_.close();
    if (o_.print_summary && ctx.is_main()) std::fprintf(o_.out, "%s\n", summary_text().c_str());
  }

  /// Time by phase over the whole fit (seconds), and the fraction spent waiting for data.
  const PhaseTimes& totals() const { return totals_; }
  /// Fraction of the fit's time spent waiting for data.
  double data_wait_fraction() const { return totals_.total() > 0 ? totals_.data / totals_.total() : 0.0; }
  /// For summary.json: data_wait_fraction and step_seconds by phase (totals and per optimizer step).
  nlohmann::json summary() const;
  /// The highest per-step peaks of the fit (bytes; `rss_whole_process`: the RSS peak could not be reset).
  const memory::PeakReading& peak_memory() const { return peak_max_; }
  /// The printed summary: where the time went and what to try next.
  std::string summary_text() const;

 private:
  /// Opens `file` for writing rows. Fresh: truncated (and the CSV header written). Otherwise the complete lines of an
  /// existing file that `keep` accepts stay (a torn last line, from a killed process, is dropped), then new rows
  /// are appended (the file is rewritten with them, so the dropped rows go); a missing file starts with its header.
  void open_log(std::ofstream& f, const std::filesystem::path& file, const std::string& header, bool fresh,
                const std::function<bool(const std::string&)>& keep);
  /// on_fit_begin's files (main rank): opens the four logs, keeping the rows up to (step0, epoch0) of a resumed run;
  /// `mid_epoch`: it resumes in the middle of epoch0, whose training loss so far is read back from steps.jsonl.
  void open_logs(int64_t step0, int64_t epoch0, bool mid_epoch);
  /// after_step's counting (compiled once with separate compilation): the step's phase times and peak memory, its
  /// `n` samples and `tokens` tokens; whether step `global_step` is one the log records (Options::every).
  bool count_step(int64_t n, int64_t tokens, int64_t global_step);
  /// A recorded step's training loss (a non-finite one is left out of the means); whether steps.csv is open.
  bool add_step_loss(double loss);
  /// after_step's rows (steps.csv, steps.jsonl).
  void write_step_row(int64_t epoch, int64_t step, int64_t batch_in_epoch, double loss, int64_t n, int64_t tokens,
                      const PhaseTimes& t, const memory::PeakReading& mem, std::optional<double> scale,
                      std::optional<double> norm, bool stepped);
  /// The token columns of a row of `tokens` tokens in `seconds` (CSV, after a comma each, and JSON), empty in a fit
  /// that counts none: tokens (step rows), tokens_per_s, and mfu with the task's flops_per_token and a peak.
  std::string token_columns(int64_t tokens, double seconds, bool with_count, nlohmann::json& j) const;
  static std::optional<double> mb(std::optional<int64_t> bytes) {
    return bytes ? std::optional<double>(static_cast<double>(*bytes) / (1024.0 * 1024.0)) : std::nullopt;
  }
  nlohmann::json peak_memory_json() const;
  static nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

  Options o_;
  RunFeatures features_{};  // what the run uses, so that the advice does not suggest it
  StepPhases phases_;
  PhaseTimes totals_, epoch_;
  int64_t steps_ = 0, samples_ = 0, epoch_samples_ = 0, epoch_loss_n_ = 0, epoch_tokens_ = 0;
  bool tokens_ = false;    // the fit counts tokens (Context::counts_tokens): the logs have token columns
  double mfu_flops_ = 0;   // the task's flops per token when an MFU is reported (FitOptions::peak_flops set), else 0
  double peak_flops_ = 0;  // FitOptions::peak_flops
  double epoch_loss_sum_ = 0;
  double carry_loss_sum_ = 0;  // the training loss of the kept rows of an epoch resumed in its middle
  int64_t carry_loss_n_ = 0;
  bool epoch_row_written_ = false;
  bool log_validations_ = false;  // the fit validates by steps or at its start: validations.csv and .jsonl
  double interval_loss_sum_ = 0;  // the logged steps' losses since the last validation (its row's train_loss)
  int64_t interval_loss_n_ = 0;
  double step_lr_ = 0;
  std::vector<std::string> val_names_;  ///< the validation metrics but loss (Context::metric_names): epochs.csv columns
  std::optional<Metrics> val_;
  memory::PeakMemory peak_;
  memory::PeakReading peak_max_;
  bool peak_pending_ = false;
  PhaseTimes step_t_;               // the last step's times, peak memory, samples, tokens and loss (after_step)
  memory::PeakReading step_mem_;
  int64_t step_n_ = 0, step_tokens_ = 0;
  double step_loss_ = 0;
  std::ofstream steps_csv_, steps_jsonl_, epochs_csv_, epochs_jsonl_, validations_csv_, validations_jsonl_;
};

// MetricsLog's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL MetricsLog::MetricsLog(Options o) : o_(std::move(o)) {}
POLICYTRAIN_DECL MetricsLog::MetricsLog(MetricsLog&&) = default;
POLICYTRAIN_DECL MetricsLog& MetricsLog::operator=(MetricsLog&&) = default;
POLICYTRAIN_DECL MetricsLog::~MetricsLog() = default;

POLICYTRAIN_DECL void MetricsLog::open_logs(int64_t step0, int64_t epoch0, bool mid_epoch) {
  std::filesystem::create_directories(o_.dir);
  // A resumed run (or a second fit) continues the logs of the run it continues: rows up to its state are kept,
  // later ones (written after the checkpoint it resumed from, or by an epoch cut short) are dropped.
  const bool fresh = step0 == 0 && epoch0 == 0;
  auto field = [](const std::string& line, size_t i) -> std::optional<int64_t> {
    size_t b = 0;
    for (size_t k = 0; k < i; ++k) {
      b = line.find(',', b);
      if (b == std::string::npos) return std::nullopt;
      ++b;
    }
    try {
      size_t used = 0;
      const int64_t v = std::stoll(line.substr(b, line.find(',', b) - b), &used);
      return used > 0 ? std::optional<int64_t>(v) : std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  auto key = [](const std::string& line, const char* k) -> std::optional<int64_t> {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains(k) || !j[k].is_number_integer()) return std::nullopt;
    return j[k].get<int64_t>();
  };
  const std::string steps_header = "epoch,step,batch_in_epoch,loss,lr,loss_scale,grad_norm,samples,samples_per_s,"
                                   "step_s,data_s,forward_s,backward_s,optimizer_s,stepped,peak_rss_mib,peak_cuda_mib" +
                                   std::string(tokens_ ? ",tokens,tokens_per_s" : "") + (mfu_flops_ > 0 ? ",mfu" : "");
  // One column per metric the validation declares (a regression has no val_accuracy).
  std::string epochs_header = "epoch,train_loss,val_loss";
  for (const auto& k : val_names_) epochs_header += ",val_" + k;
  epochs_header += ",seconds,samples_per_s,data_wait_fraction";
  if (tokens_) epochs_header += mfu_flops_ > 0 ? ",tokens_per_s,mfu" : ",tokens_per_s";
  // validations.csv and .jsonl (a fit validated by steps): the rows up to step0. The last kept one bounds the steps
  // whose training loss the next row averages, read back below.
  interval_loss_sum_ = 0;
  interval_loss_n_ = 0;
  int64_t last_validation = -1;
  if (log_validations_) {
    std::string validations_header = "step,epoch,train_loss,val_loss";
    for (const auto& k : val_names_) validations_header += ",val_" + k;
    open_log(validations_csv_, o_.dir / "validations.csv", validations_header, fresh,
             [&](const std::string& l) { auto v = field(l, 0); return v && *v <= step0; });
    open_log(validations_jsonl_, o_.dir / "validations.jsonl", "", fresh, [&](const std::string& l) {
      const auto v = key(l, "step");
      if (!v || *v > step0) return false;
      last_validation = std::max(last_validation, *v);
      return true;
    });
  }
  open_log(steps_csv_, o_.dir / "steps.csv", steps_header, fresh,
           [&](const std::string& l) { auto v = field(l, 1); return v && *v <= step0; });
  // The rows kept of an epoch resumed in its middle carry its training loss so far, read back exactly (JSON
  // holds every digit), so that its epoch row equals an uninterrupted run's.
  carry_loss_sum_ = 0;
  carry_loss_n_ = 0;
  open_log(steps_jsonl_, o_.dir / "steps.jsonl", "", fresh, [&](const std::string& l) {
    auto j = nlohmann::json::parse(l, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() || j["step"].get<int64_t>() > step0)
      return false;
    if (mid_epoch && j.contains("epoch") && j["epoch"] == epoch0 && j.contains("loss") &&
        j["loss"].is_number()) {
      carry_loss_sum_ += j["loss"].get<double>();
      ++carry_loss_n_;
    }
    if (log_validations_ && j["step"].get<int64_t>() > last_validation && j.contains("loss") && j["loss"].is_number()) {
      interval_loss_sum_ += j["loss"].get<double>();
      ++interval_loss_n_;
    }
    return true;
  });
  open_log(epochs_csv_, o_.dir / "epochs.csv", epochs_header, fresh,
           [&](const std::string& l) { auto v = field(l, 0); return v && *v < epoch0; });
  open_log(epochs_jsonl_, o_.dir / "epochs.jsonl", "", fresh,
           [&](const std::string& l) { auto v = key(l, "epoch"); return v && *v < epoch0; });
}

POLICYTRAIN_DECL std::string MetricsLog::token_columns(int64_t tokens, double seconds, bool with_count,
                                                     nlohmann::json& j) const {
  if (!tokens_) return {};
  const double rate = seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0;
  std::string csv = with_count ? policytrain::detail::format(",{},{:.6g}", tokens, rate)
                               : policytrain::detail::format(",{:.6g}", rate);
  if (with_count) j["tokens"] = tokens;
  j["tokens_per_s"] = rate;
  if (mfu_flops_ > 0) {
    const double mfu = mfu_flops_ * rate / peak_flops_;
    csv += policytrain::detail::format(",{:.6g}", mfu);
    j["mfu"] = mfu;
  }
  return csv;
}

POLICYTRAIN_DECL bool MetricsLog::count_step(int64_t n, int64_t tokens, int64_t global_step) {
  step_t_ = phases_.step_end();
  step_mem_ = peak_.read();
  peak_pending_ = true;
  peak_max_.rss_whole_process = step_mem_.rss_whole_process;
  if (step_mem_.rss) peak_max_.rss = std::max(peak_max_.rss.value_or(0), *step_mem_.rss);
  if (step_mem_.cuda) peak_max_.cuda = std::max(peak_max_.cuda.value_or(0), *step_mem_.cuda);
  step_n_ = n;
  step_tokens_ = tokens;
  totals_ += step_t_;
  epoch_ += step_t_;
  ++steps_;
  samples_ += n;
  epoch_samples_ += n;
  epoch_tokens_ += tokens;
  return o_.every > 0 && global_step % o_.every == 0;
}

POLICYTRAIN_DECL bool MetricsLog::add_step_loss(double loss) {
  step_loss_ = loss;
  if (std::isfinite(loss)) {
    epoch_loss_sum_ += loss;
    ++epoch_loss_n_;
    interval_loss_sum_ += loss;
    ++interval_loss_n_;
  }
  return steps_csv_.is_open();
}

POLICYTRAIN_DECL void MetricsLog::write_step_row(int64_t epoch, int64_t step, int64_t batch_in_epoch, double loss, int64_t n,
                                                int64_t tokens, const PhaseTimes& t, const memory::PeakReading& mem,
                                                std::optional<double> scale, std::optional<double> norm, bool stepped) {
  const double total = t.total();
  const double rate = total > 0 ? n / total : 0.0;
  auto opt = [](const std::optional<double>& v) { return v ? policytrain::detail::format("{:.6g}", *v) : std::string(); };
  nlohmann::json j{{"epoch", epoch}, {"step", step},
                   {"batch_in_epoch", batch_in_epoch}, {"loss", finite_or_null(loss)},
                   {"lr", step_lr_}, {"samples", n}, {"samples_per_s", rate}, {"step_s", total},
                   {"data_s", t.data}, {"forward_s", t.forward}, {"backward_s", t.backward},
                   {"optimizer_s", t.step}, {"stepped", stepped}};
  steps_csv_ << policytrain::detail::format("{},{},{},{:.6g},{:.6g},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{},{}{}\n",
                            epoch, step, batch_in_epoch, loss, step_lr_,
                            opt(scale), opt(norm), n, rate, total, t.data, t.forward, t.backward, t.step,
                            stepped ? 1 : 0, opt(mb(mem.rss)), opt(mb(mem.cuda)), token_columns(tokens, total, true, j));
  if (scale) j["loss_scale"] = *scale;
  if (norm) j["grad_norm"] = finite_or_null(*norm);
  if (mem.rss) j["peak_rss_mib"] = *mb(mem.rss);
  if (mem.cuda) j["peak_cuda_mib"] = *mb(mem.cuda);
  steps_jsonl_ << j.dump() << "\n";
}

POLICYTRAIN_DECL void MetricsLog::write_epoch_row(int64_t epoch) {
  epoch_row_written_ = true;
  if (!epochs_csv_.is_open()) return;
  const double train_loss = epoch_loss_n_ ? epoch_loss_sum_ / epoch_loss_n_ : std::numeric_limits<double>::quiet_NaN();
  const double secs = epoch_.total();
  const double wait = secs > 0 ? epoch_.data / secs : 0.0;
  const double rate = secs > 0 ? epoch_samples_ / secs : 0.0;
  const double vl = val_ ? val_->loss : std::numeric_limits<double>::quiet_NaN();
  const bool has_acc = val_ && val_->has_accuracy();
  const double va = has_acc ? val_->accuracy : std::numeric_limits<double>::quiet_NaN();
  std::string vals;
  // Appended in two steps, not as `"," + std::string`: GCC 12 at -O3 inlines that operator+ and reports an impossible
  // memcpy length on its length_error path (-Wstringop-overflow, a false positive).
  for (const auto& k : val_names_) {
    vals += ',';
    if (val_ && val_->has(k)) vals += policytrain::detail::format("{:.6g}", val_->get(k));
  }
  nlohmann::json j{{"epoch", epoch}, {"train_loss", finite_or_null(train_loss)}, {"seconds", secs},
                   {"samples_per_s", rate}, {"data_wait_fraction", wait}};
  epochs_csv_ << policytrain::detail::format("{},{:.6g},{}{},{:.6g},{:.6g},{:.6g}{}\n", epoch, train_loss,
                             val_ ? policytrain::detail::format("{:.6g}", vl) : "", vals, secs, rate, wait,
                             token_columns(epoch_tokens_, secs, false, j));
  if (val_) {
    j["val_loss"] = finite_or_null(vl);
    if (has_acc) j["val_accuracy"] = va;
    for (const auto& [k, v] : val_->extra) j["val_" + k] = finite_or_null(v);  // the task's own metrics
  }
  epochs_jsonl_ << j.dump() << "\n";
}

POLICYTRAIN_DECL void MetricsLog::write_validation_row(int64_t step, int64_t epoch, const Metrics& m) {
  const double train_loss =
      interval_loss_n_ ? interval_loss_sum_ / interval_loss_n_ : std::numeric_limits<double>::quiet_NaN();
  interval_loss_sum_ = 0;
  interval_loss_n_ = 0;
  if (!validations_csv_.is_open()) return;
  std::string vals;
  for (const auto& k : val_names_) {  // in two steps, as write_epoch_row's
    vals += ',';
    if (m.has(k)) vals += policytrain::detail::format("{:.6g}", m.get(k));
  }
  validations_csv_ << policytrain::detail::format("{},{},{:.6g},{:.6g}{}\n", step, epoch, train_loss, m.loss, vals);
  nlohmann::json j{{"step", step}, {"epoch", epoch}, {"train_loss", finite_or_null(train_loss)},
                   {"val_loss", finite_or_null(m.loss)}};
  if (m.has_accuracy()) j["val_accuracy"] = m.accuracy;
  for (const auto& [k, v] : m.extra) j["val_" + k] = finite_or_null(v);
  validations_jsonl_ << j.dump() << "\n";
}

POLICYTRAIN_DECL void MetricsLog::flush() {
  for (auto* f : {&steps_csv_, &steps_jsonl_, &epochs_csv_, &epochs_jsonl_, &validations_csv_, &validations_jsonl_})
    if (f->is_open()) f->flush();
}

POLICYTRAIN_DECL nlohmann::json MetricsLog::summary() const {
  const double k = steps_ > 0 ? 1.0 / steps_ : 0.0;
  return {{"data_wait_fraction", data_wait_fraction()},
          {"optimizer_steps", steps_},
          {"step_seconds",
           {{"data", totals_.data}, {"forward", totals_.forward}, {"backward", totals_.backward},
            {"step", totals_.step}, {"total", totals_.total()}}},
          {"step_seconds_mean",
           {{"data", totals_.data * k}, {"forward", totals_.forward * k}, {"backward", totals_.backward * k},
            {"step", totals_.step * k}, {"total", totals_.total() * k}}},
          {"peak_memory", peak_memory_json()}};
}

POLICYTRAIN_DECL std::string MetricsLog::summary_text() const {
  const double tot = totals_.total();
  auto pct = [&](double v) { return tot > 0 ? 100.0 * v / tot : 0.0; };
  std::string s = policytrain::detail::format(
      "Time per phase over {} steps ({:.2f} s): data wait {:.1f}%, forward {:.1f}%, backward {:.1f}%, "
      "optimizer {:.1f}%\n",
      steps_, tot, pct(totals_.data), pct(totals_.forward), pct(totals_.backward), pct(totals_.step));
  if (peak_max_.rss)
    s += policytrain::detail::format("Peak memory of a step: {:.0f} MiB resident (VmHWM{}){}\n", *mb(peak_max_.rss),
                     peak_max_.rss_whole_process ? ", not resettable here: the whole process's peak" : "",
                     peak_max_.cuda ? policytrain::detail::format(", {:.0f} MiB CUDA allocated", *mb(peak_max_.cuda)) : "");
  const double w = data_wait_fraction();
  if (w > 0.2)
    s += advice::data_wait();
  else if (w > 0.05)
    s += "Some time goes to waiting for data: more loader workers or batches in flight (data::PrefetchOptions::"
         "workers, data::PrefetchOptions::prefetch) may help a little.";
  else
    s += "The step is compute-bound: " + advice::compute(features_, features_.convolutions) + " before the loader.";
  return s;
}

POLICYTRAIN_DECL void MetricsLog::open_log(std::ofstream& f, const std::filesystem::path& file, const std::string& header,
                                          bool fresh, const std::function<bool(const std::string&)>& keep) {
  std::string kept;
  if (!fresh) {
    std::ifstream in(file, std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t b = 0;
    for (size_t e; (e = content.find('\n', b)) != std::string::npos; b = e + 1) {
      const std::string line = content.substr(b, e - b);
      if (!header.empty() && b == 0) {
        if (line != header)
          throw std::runtime_error(policytrain::detail::error_message(
              "policytrain::callbacks::MetricsLog",
              policytrain::detail::format("'{}' starts with '{}', expected the header '{}'; resume into the "
                                          "run directory this version wrote, or into a new one",
                                          file.string(), line, header)));
      } else if (keep(line)) {
        kept += line + "\n";
      }
    }
  }
  f.open(file, std::ios::out | std::ios::trunc);
  if (!f)
    throw std::runtime_error(policytrain::detail::error_message(
        "policytrain::callbacks::MetricsLog", policytrain::detail::format("cannot write the log '{}'; "
                                                                          "check that the directory is writable",
                                                                          file.string())));
  if (!header.empty()) f << header << "\n";
  f << kept;
  f.flush();
}

POLICYTRAIN_DECL nlohmann::json MetricsLog::peak_memory_json() const {
  nlohmann::json j = nlohmann::json::object();
  j["rss_source"] = std::string(peak_max_.rss_whole_process
                                    ? "VmHWM of the whole process (/proc/self/status)"
                                    : "VmHWM per step (/proc/self/status, reset via /proc/self/clear_refs)");
  j["rss_mib"] = peak_max_.rss ? nlohmann::json(*mb(peak_max_.rss)) : nlohmann::json(nullptr);
  if (peak_max_.cuda) j["cuda_allocated_mib"] = *mb(peak_max_.cuda);
  return j;
}
#endif

}  // namespace policytrain::callbacks
