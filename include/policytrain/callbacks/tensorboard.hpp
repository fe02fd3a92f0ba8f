#pragma once
/// \file
/// callbacks::TensorBoard — event files that `tensorboard --logdir RUN_DIR` shows (the main rank writes):
///   scalars every `every` optimizer steps: train/loss (the step's last micro-batch), `train/lr/group<i>` (each
///     param group), train/loss_scale (when the precision policy has loss_scale()), train/grad_norm (when a
///     GradClip callback clips by norm), train/samples_per_s and train/data_wait_fraction (over the steps since
///     the last row; phases as StepPhases times them); when the fit counts tokens (Context::counts_tokens)
///     train/tokens_per_s (this rank's, over the same time), and train/mfu with the task's flops_per_token() and
///     FitOptions::peak_flops (against one device's peak);
///   per validation: val/loss and val/accuracy, at the step it followed;
///   histograms of every parameter (`weights/<name>`) and its gradient (`grads/<name>`) every `histogram_every`
///     steps (0: never): 30 equal-width buckets between the tensor's min and max, finite values only; under
///     ZeRO-2 (gradients sharded across the ranks) the whole averaged gradients, gathered from their owners on
///     the histogram steps (a collective on every rank), as under DataParallel; under stage 3 (parameters sharded
///     and freed between steps) each parameter and its gradient all-gathered from the shards in turn, one tensor at
///     a time (a collective per tensor on every rank), the same histograms as DataParallel's;
///   the run's `settings` as text (tag settings/text_summary), and `hparams` with val/loss and val/accuracy
///     as their metrics (the HParams tab shows the last values), as torch.utils.tensorboard's add_hparams.
/// Every step axis is the optimizer step. Resume: at fit begin, events after the current step (written by a
/// run that went past the checkpoint it is resumed from) are cut from the directory's event files, and the
/// newest file is appended to, so one continuous curve results with no step twice and none lost. Records are
/// flushed at each logged step, so a killed run loses none that a checkpoint covers.
/// Format: TFRecord-framed Event protobufs (detail/tensorboard_events.hpp), read back in the tests by
/// TensorBoard's own EventAccumulator.
/// Hooks: on_fit_begin, on_epoch_begin, around_forward, around_backward, after_step, on_validation_end,
/// on_fit_end. Cost: four clock reads per micro-step; per logged step one read of the loss (a device sync on
/// CUDA) and a write; per histogram step a copy of every parameter and gradient to the host.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>
#include <unistd.h>

#include <policytrain/callbacks/grad_clip.hpp>
#include <policytrain/callbacks/step_phases.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/detail/tensorboard_events.hpp>

namespace policytrain::callbacks {

/// The event-file encoding (detail/tensorboard_events.hpp).
namespace tb_events = ::policytrain::detail::tb;

/// Writes TensorBoard event files of a run (see the file comment).
class TensorBoard {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::TensorBoard";
  /// Settings of TensorBoard: the directory, the intervals, and the run's settings and hyperparameters.
  struct Options {
    std::filesystem::path dir{};  ///< where the event files go (empty: off)
    int64_t every = 1;            ///< scalars every N optimizer steps
    int64_t histogram_every = 0;  ///< weight and gradient histograms every N optimizer steps (0: never)
    std::string settings{};       ///< the run's settings, shown as text (markdown; empty: none)
    /// Hyperparameters shown in the HParams tab: an object of numbers, strings or booleans (empty: none).
    nlohmann::json hparams = nlohmann::json::object();
    std::FILE* out = stderr;      ///< where a cut of the event files is reported
  };
  TensorBoard() = default;
  /// Throws std::invalid_argument for every < 1, histogram_every < 0 or hparams not an object of scalars.
  explicit TensorBoard(Options o) : o_(std::move(o)) {
    if (o_.every < 1 || o_.histogram_every < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::callbacks::TensorBoard",
          policytrain::detail::format("every {}, histogram_every {}; "
                                      "expected every >= 1 and histogram_every >= 0 (0: no histograms)",
                                      o_.every, o_.histogram_every)));
    if (!o_.hparams.is_object())
      throw std::invalid_argument(policytrain::detail::error_message("policytrain::callbacks::TensorBoard",
                                                                     "hparams must be a JSON object; pass "
                                                                     "{\"name\": value, ...}"));
    for (const auto& [k, v] : o_.hparams.items())
      if (!v.is_number() && !v.is_string() && !v.is_boolean())
        throw std::invalid_argument(policytrain::detail::error_message(
            "policytrain::callbacks::TensorBoard", policytrain::detail::format("hparam '{}' is {}; expected a "
                                                                               "number, a string or a boolean",
                                                                               k, v.dump())));
  }

  /// Whether it writes (a non-empty `dir`).
  bool enabled() const { return !o_.dir.empty(); }
  /// The event file being written (empty before fit).
  const std::filesystem::path& file() const { return path_; }

  /// Cuts events after the current step from the directory, opens the newest event file (or a new one) and
  /// writes the settings and hparams (main rank).
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    since_ = {};
    since_samples_ = 0;
    since_tokens_ = 0;
    if (!enabled() || !ctx.is_main()) return;
    std::filesystem::create_directories(o_.dir);
    const int64_t s0 = ctx.state().global_step;
    path_ = cut_after(s0);
    const bool fresh = path_.empty();
    if (fresh) path_ = o_.dir / new_file_name();
    f_.open(path_, std::ios::binary | std::ios::app);
    if (!f_)
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::callbacks::TensorBoard", policytrain::detail::format("cannot write '{}'; check that the "
                                                                             "directory is writable",
                                                                             path_.string())));
    if (fresh) write(tb_events::event(now(), 0).bytes(3, "brain.Event:2"));
    if (!o_.settings.empty()) write_text(s0, "settings", o_.settings);
    if (!o_.hparams.empty()) write_hparams_start(s0, ctx.metric_names());
    f_.flush();
  }
  /// Starts the epoch's phase timing.
  template <class Ctx>
  void on_epoch_begin(Ctx&) { phases_.epoch_begin(); }
  /// Runs `fn` (the forward), timed.
  template <class Ctx, class F>
  auto around_forward(Ctx&, F&& fn) { return phases_.forward(fn); }
  /// Runs `fn` (the backward), timed.
  template <class Ctx, class F>
  void around_backward(Ctx& ctx, F&& fn) { phases_.backward(fn, ctx.is_last_micro_step()); }

  /// Writes the step's scalars every `every` steps and the histograms every `histogram_every` steps.
  template <class Ctx>
  void after_step(Ctx& ctx, bool) {
    since_ += phases_.step_end();
    since_samples_ += ctx.state().window_samples;
    since_tokens_ += ctx.state().window_tokens;
    const int64_t step = ctx.state().global_step;
    const bool histograms = enabled() && o_.histogram_every > 0 && step % o_.histogram_every == 0;
    // ZeRO-2: each rank holds its own partition's gradients; every rank takes part in gathering them (a collective).
    // Stage 3: every rank takes part in gathering each parameter and its gradient in turn (sharded_histograms).
    std::vector<torch::Tensor> grads;
    tb_events::Message sharded;
    bool sharded_done = false;
    if (histograms) sharded_done = sharded_histograms(ctx, sharded);
    if (histograms && !sharded_done) grads = whole_gradients(ctx);
    if (!f_.is_open()) return;
    bool wrote = false;
    if (step % o_.every == 0) {
      tb_events::Message summary;
      auto add = [&](const std::string& tag, double v) { summary.msg(1, scalar(tag, v)); };
      add("train/loss", ctx.state().loss_value());
      const auto& groups = ctx.optimizer().param_groups();
      for (size_t g = 0; g < groups.size(); ++g) add(policytrain::detail::format("train/lr/group{}", g), ctx.step_lr(g));
      if constexpr (requires { ctx.template policy<Category::precision>().loss_scale(); }) {
        const double s = ctx.template policy<Category::precision>().loss_scale();
        if (s > 0) add("train/loss_scale", s);
      }
      if constexpr (Ctx::template has<GradClip>()) {
        auto& clip = ctx.template get<GradClip>();
        if (clip.clips_by_norm() && clip.last_norm_tensor().defined()) add("train/grad_norm", clip.last_norm());
      }
      const double total = since_.total();
      add("train/samples_per_s", total > 0 ? since_samples_ / total : 0.0);
      if (ctx.counts_tokens()) {
        const double tokens_rate = total > 0 ? static_cast<double>(since_tokens_) / total : 0.0;
        add("train/tokens_per_s", tokens_rate);
        const double flops = ctx.flops_per_token(), peak = ctx.options().peak_flops;
        if (flops > 0 && peak > 0) add("train/mfu", flops * tokens_rate / peak);
      }
      add("train/data_wait_fraction", total > 0 ? since_.data / total : 0.0);
      write(tb_events::event(now(), step).msg(5, summary));
      since_ = {};
      since_samples_ = 0;
      since_tokens_ = 0;
      wrote = true;
    }
    if (histograms && sharded_done) {
      write(tb_events::event(now(), step).msg(5, sharded));
      wrote = true;
    } else if (histograms) {
      tb_events::Message summary;
      size_t i = 0;
      for (const auto& p : ctx.module().named_parameters(true)) {
        summary.msg(1, histogram("weights/" + p.key(), p.value()));
        if (grads[i].defined()) summary.msg(1, histogram("grads/" + p.key(), grads[i]));
        ++i;
      }
      write(tb_events::event(now(), step).msg(5, summary));
      wrote = true;
    }
    if (wrote) f_.flush();
  }

  /// Writes val/loss, val/accuracy (when the validation has one) and the task's own metrics (`val/NAME`) at the
  /// current step.
  template <class Ctx>
  void on_validation_end(Ctx& ctx, const Metrics& m) {
    if (!f_.is_open()) return;
    tb_events::Message summary;
    summary.msg(1, scalar("val/loss", m.loss));
    if (m.has_accuracy()) summary.msg(1, scalar("val/accuracy", m.accuracy));
    for (const auto& [k, v] : m.extra) summary.msg(1, scalar("val/" + k, v));  // the task's own metrics
    write(tb_events::event(now(), ctx.state().global_step).msg(5, summary));
    f_.flush();
  }

  /// Ends the hparams session and closes the file.
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    if (!f_.is_open()) return;
    if (!o_.hparams.empty()) {
      tb_events::Message end;  // SessionEndInfo { Status status = 1 (STATUS_SUCCESS = 1); double end_time_secs = 2; }
      end.varint(1, 1).f64(2, now());
      write_plugin(ctx.state().global_step, "_hparams_/session_end_info", "hparams", hparams_data(4, end));
    }
    f_.close();
  }

  /// The settings as JSON, for a run's summary.
  nlohmann::json describe() const {
    if (!enabled()) return {{"name", name}, {"enabled", false}};
    return {{"name", name}, {"enabled", true}, {"dir", o_.dir.string()}, {"every", o_.every},
            {"histogram_every", o_.histogram_every}};
  }

 private:
  static double now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  static std::string new_file_name() {
    char host[256] = "localhost";
    ::gethostname(host, sizeof host - 1);
    return policytrain::detail::format("events.out.tfevents.{}.{}.{}.0", static_cast<long long>(std::time(nullptr)), host,
                       static_cast<int>(::getpid()));
  }
  void write(const tb_events::Message& event) { f_ << tb_events::record(event.str()); }

  /// Every parameter's gradient (undefined where it has none), in named_parameters order. When the gradients are
  /// sharded (ZeRO-2: a rank holds only its own partition's), they are gathered: each rank contributes the
  /// gradients it holds and zeros elsewhere, summed over the ranks (Context::reduce_gradient_statistic, one
  /// collective on every rank), with a flag per parameter so that one no rank holds stays undefined.
  template <class Ctx>
  static std::vector<torch::Tensor> whole_gradients(Ctx& ctx) {
    std::vector<torch::Tensor> grads;
    for (const auto& p : ctx.module().named_parameters(true)) grads.push_back(p.value().grad());
    bool sharded = false;
    if constexpr (requires { ctx.gradients_sharded(); }) sharded = ctx.gradients_sharded();
    if (!sharded) return grads;
    const auto params = ctx.module().parameters(true);
    torch::NoGradGuard ng;
    // Under ZeRO-2's dim-0 partition a rank holds its dim-0 rows of every gradient (ceil(rows / world size) each,
    // the last ranks fewer or none): each is put in its place in a gradient of the parameter's shape, zeros
    // elsewhere, so that the sum over the ranks is the whole gradient.
    bool split = false;
    if constexpr (requires { ctx.gradients_split(); }) split = ctx.gradients_split();
    if (split) {
      if constexpr (requires {
                      ctx.template policy<Category::parallel>().rank();
                      ctx.template policy<Category::parallel>().world_size();
                    }) {
        auto& par = ctx.template policy<Category::parallel>();
        const int64_t rank = par.rank(), world = par.world_size();
        for (size_t i = 0; i < params.size(); ++i) {
          if (!grads[i].defined() || params[i].dim() == 0) continue;
          const int64_t d0 = params[i].size(0), per = (d0 + world - 1) / world;
          const int64_t start = std::min(d0, per * rank), length = std::min(d0, start + per) - start;
          auto whole = torch::zeros(params[i].sizes(), grads[i].options());
          if (length > 0) whole.narrow(0, start, length).copy_(grads[i].reshape(whole.narrow(0, start, length).sizes()));
          grads[i] = whole;
        }
      }
    }
    std::vector<torch::Tensor> flat;
    auto held = torch::zeros({static_cast<int64_t>(params.size())}, params.empty() ? torch::TensorOptions() : params[0].options());
    for (size_t i = 0; i < params.size(); ++i) {
      // A gradient held here (dense), or zeros; in the parameter's dtype, promoted to a common one by cat.
      if (grads[i].defined()) held[static_cast<int64_t>(i)].fill_(1);
      flat.push_back(grads[i].defined() ? grads[i].to_dense().reshape({-1}) : torch::zeros({params[i].numel()}, params[i].options()));
    }
    flat.push_back(held.to(flat.empty() ? held.options() : flat[0].options()));
    auto all = torch::cat(flat);
    ctx.reduce_gradient_statistic(all, GradientReduce::sum);
    int64_t off = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      const int64_t n = params[i].numel();
      const bool any = all[all.numel() - static_cast<int64_t>(params.size()) + static_cast<int64_t>(i)].item<double>() > 0;
      grads[i] = any ? all.narrow(0, off, n).view(params[i].sizes()) : torch::Tensor();
      off += n;
    }
    return grads;
  }

  /// Stage 3 (the parameters sharded on dim 0 and freed between steps, the gradients in the shards): each parameter
  /// and then its gradient all-gathered from the ranks' rows, one tensor at a time (never the whole model), its
  /// histogram added to `summary` on the main rank and the tensor let go. A collective: every rank calls it at the same
  /// step. Returns false (nothing done) when the parameters are not sharded.
  template <class Ctx>
  bool sharded_histograms(Ctx& ctx, tb_events::Message& summary) {
    if constexpr (requires(const torch::Tensor& t) { ctx.template policy<Category::parallel>().gather_rows(t, t); }) {
      if (!ctx.parameters_sharded()) return false;
      auto& par = ctx.template policy<Category::parallel>();
      const bool main = f_.is_open();
      torch::NoGradGuard ng;
      for (const auto& p : ctx.module().named_parameters(true)) {
        const auto shard = par.shard(p.value());
        // A parameter that is not sharded is whole on every rank (not freed), with its gradient.
        const auto weight = shard.defined() ? par.gather_rows(p.value(), shard.detach()) : p.value();
        if (main) summary.msg(1, histogram("weights/" + p.key(), weight));
        const auto g = shard.defined() ? shard.grad() : p.value().grad();
        // The reduce-scatter gives every rank's shard a gradient, or none: the ranks agree on whether to gather.
        if (!g.defined()) continue;
        const auto grad = shard.defined() ? par.gather_rows(p.value(), g) : g;
        if (main) summary.msg(1, histogram("grads/" + p.key(), grad));
      }
      return true;
    }
    return false;
  }

  // Summary.Value { string tag = 1; float simple_value = 2; HistogramProto histo = 5; TensorProto tensor = 8;
  //                 SummaryMetadata metadata = 9; }
  static tb_events::Message scalar(const std::string& tag, double v) {
    tb_events::Message m;
    m.bytes(1, tag).f32(2, static_cast<float>(v));
    return m;
  }
  static tb_events::Message histogram(const std::string& tag, const torch::Tensor& t) {
    auto x = t.detach().to(torch::kCPU, torch::kDouble).flatten();
    x = x.index({torch::isfinite(x)});
    // HistogramProto { double min = 1; max = 2; num = 3; sum = 4; sum_squares = 5;
    //                  repeated double bucket_limit = 6 [packed]; repeated double bucket = 7 [packed]; }
    tb_events::Message h;
    const int64_t n = x.numel();
    const double lo = n ? x.min().item<double>() : 0.0, hi = n ? x.max().item<double>() : 0.0;
    std::vector<double> limits, counts;
    if (n == 0 || lo == hi) {
      limits = {hi};
      counts = {static_cast<double>(n)};
    } else {
      constexpr int kBins = 30;
      auto c = torch::histc(x, kBins, lo, hi);
      const double w = (hi - lo) / kBins;
      for (int i = 0; i < kBins; ++i) {
        limits.push_back(i + 1 == kBins ? hi : lo + w * (i + 1));
        counts.push_back(c[i].item<double>());
      }
    }
    h.f64(1, lo).f64(2, hi).f64(3, static_cast<double>(n)).f64(4, n ? x.sum().item<double>() : 0.0)
        .f64(5, n ? (x * x).sum().item<double>() : 0.0).packed_f64(6, limits).packed_f64(7, counts);
    tb_events::Message m;
    m.bytes(1, tag).msg(5, h);
    return m;
  }
  // As torch.utils.tensorboard's text(): a string tensor of shape [1] under the "text" plugin.
  void write_text(int64_t step, const std::string& tag, const std::string& text) {
    tb_events::Message dim, shape, tensor, value;
    dim.varint(1, 1);
    shape.msg(2, dim);
    tensor.varint(1, 7).msg(2, shape).bytes(8, text);  // TensorProto { dtype = 1 (DT_STRING = 7); shape = 2; string_val = 8 }
    value.bytes(1, tag + "/text_summary").msg(8, tensor).msg(9, tb_events::plugin_metadata("text", ""));
    tb_events::Message summary;
    summary.msg(1, value);
    write(tb_events::event(now(), step).msg(5, summary));
  }
  void write_plugin(int64_t step, const std::string& tag, const char* plugin, const std::string& content) {
    tb_events::Message value, summary;
    value.bytes(1, tag).msg(9, tb_events::plugin_metadata(plugin, content));
    summary.msg(1, value);
    write(tb_events::event(now(), step).msg(5, summary));
  }
  // HParamsPluginData { int32 version = 1; oneof { Experiment experiment = 2; SessionStartInfo
  // session_start_info = 3; SessionEndInfo session_end_info = 4; } }, version 0 as torch's add_hparams.
  static std::string hparams_data(int field, const tb_events::Message& m) {
    tb_events::Message d;
    d.varint(1, 0).msg(field, m);
    return d.str();
  }
  void write_hparams_start(int64_t step, const std::vector<std::string>& metrics) {
    tb_events::Message experiment, start;
    for (const auto& [k, v] : o_.hparams.items()) {
      // google.protobuf.Value { double number_value = 2; string string_value = 3; bool bool_value = 4; }
      tb_events::Message value, entry, info;
      int type = 3;  // HParamInfo.type: DATA_TYPE_STRING = 1, DATA_TYPE_BOOL = 2, DATA_TYPE_FLOAT64 = 3
      if (v.is_boolean()) value.varint(4, v.get<bool>()), type = 2;
      else if (v.is_number()) value.f64(2, v.get<double>());
      else value.bytes(3, v.get<std::string>()), type = 1;
      entry.bytes(1, k).msg(2, value);  // map<string, Value> hparams = 1 (entries { key = 1; value = 2; })
      start.msg(1, entry);
      info.bytes(1, k).varint(4, type);  // HParamInfo { string name = 1; DataType type = 4; }
      experiment.msg(4, info);           // Experiment { repeated HParamInfo hparam_infos = 4; ... }
    }
    start.f64(5, now());  // SessionStartInfo { double start_time_secs = 5; }
    for (const auto& metric : metrics) {  // the validation's metrics, as on_validation_end tags them
      tb_events::Message mname, minfo;
      mname.bytes(2, "val/" + metric);  // MetricName { string group = 1; string tag = 2; }
      minfo.msg(1, mname);     // MetricInfo { MetricName name = 1; }
      experiment.msg(5, minfo);  // repeated MetricInfo metric_infos = 5
    }
    write_plugin(step, "_hparams_/experiment", "hparams", hparams_data(2, experiment));
    write_plugin(step, "_hparams_/session_start_info", "hparams", hparams_data(3, start));
  }

  // Drops, from every event file in the directory, the events after `step` and any torn record at the end
  // (the files are rewritten only where something is dropped). Returns the newest file, or empty if none.
  std::filesystem::path cut_after(int64_t step) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(o_.dir))
      if (e.is_regular_file() && e.path().filename().string().find("tfevents") != std::string::npos)
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& p : files) {
      auto scan = tb_events::scan(p.string());
      std::string kept;
      size_t dropped = 0;
      for (size_t i = 0; i < scan.records.size(); ++i) {
        if (scan.steps[i] && *scan.steps[i] > step) ++dropped;
        else kept += tb_events::record(scan.records[i]);
      }
      const bool torn = scan.valid_bytes != std::filesystem::file_size(p);
      if (!dropped && !torn) continue;
      const auto tmp = p.string() + ".tmp";
      {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        f << kept;
        if (!f)
          throw std::runtime_error(policytrain::detail::error_message(
              "policytrain::callbacks::TensorBoard", policytrain::detail::format("cannot rewrite '{}'; check that "
                                                                                 "the directory is writable",
                                                                                 p.string())));
      }
      std::filesystem::rename(tmp, p);
      if (o_.out)
        std::fprintf(o_.out, "callbacks::TensorBoard: resuming at step %lld: cut %zu events after it%s from %s\n",
                     static_cast<long long>(step), dropped, torn ? " and a torn record" : "", p.string().c_str());
    }
    return files.empty() ? std::filesystem::path{} : files.back();
  }

  Options o_;
  StepPhases phases_;
  PhaseTimes since_;
  int64_t since_samples_ = 0, since_tokens_ = 0;
  std::filesystem::path path_;
  std::ofstream f_;
};

}  // namespace policytrain::callbacks
