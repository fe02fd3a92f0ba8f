#pragma once
/// \file
/// checkpoint::Disk — checkpoints in a directory: the last state, the best by a validation metric (top-k),
/// every N epochs or N steps, at a wall-clock interval; resume from a file or from the newest good file of
/// the directory (falling back past corrupt ones, and saying so); export of the final weights for Python.
///
/// A checkpoint holds the model, the optimizer, Trainer::state_dict() (counters, the data position within the
/// epoch, every stateful policy: EMA, early stopping, schedule, scaler, this policy's metric history), the RNG
/// states, the run's settings, the metric history and the LibTorch and policytrain versions. File format and
/// atomic writes: checkpoint/format.hpp; what is validated before loading: checkpoint/archive.hpp.
///
/// Files: last.ckpt (every epoch end, and every `every_seconds`), best.ckpt (+ `best-e<epoch>.ckpt` with top_k > 1),
/// `epoch-<n>.ckpt` (every_epochs), `step-<n>.ckpt` (every_steps), final.pt (export at fit end), best.pt (export of
/// the weights that scored, with best.ckpt).
/// The best model is the model that scored: with a callback that evaluates other weights (callbacks::Ema), a best
/// file's metadata says which ("evaluated": "callbacks::Ema"; "model" without one) and its payload holds them (the
/// "evaluated" section) beside the trained weights the run resumes from; best.pt holds them; load_weights loads
/// them by default.
/// Hooks: on_fit_begin (resume), on_step_end (step and wall-clock saves), on_validation_end (best),
/// on_epoch_end (last, best, epoch saves), on_fit_end (export). Files are written by the main rank only.
/// An epoch-end checkpoint resumes at the start of the next epoch; a step checkpoint resumes mid-epoch (the
/// Trainer skips the batches already consumed). Requires nothing; with callbacks::Ema, final.pt holds the
/// EMA weights. Cost when off (empty `directory`): a branch per hook; when on: a serialization per save.
/// Run identity: every file carries the run's id; a fresh start into a directory holding checkpoint files moves
/// them to `previous-<run id>/` or refuses (`existing`); auto-resume continues only the run that wrote last.
/// Before every save it calls the Trainer's before_checkpoint hooks (callbacks::MetricsLog flushes its rows).
/// One job per directory: while a fit runs, the main rank holds `run.lock` (checkpoint::RunLock); a second job
/// is refused with LockedError naming the holder's host and pid; a dead holder's lock is taken over (logged).
#include <cxxabi.h>
#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <limits>
#include <string>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <typeinfo>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <policytrain/checkpoint/archive.hpp>
#include <policytrain/checkpoint/export.hpp>
#include <policytrain/checkpoint/fingerprint.hpp>
#include <policytrain/checkpoint/format.hpp>
#include <policytrain/checkpoint/run_lock.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/monitor.hpp>
#include <policytrain/core/state.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/detail/torch_compat.hpp>

namespace policytrain::callbacks {
class Ema;  // final.pt holds its weights when the Trainer composes it (callbacks/ema.hpp)
}

namespace policytrain::checkpoint {

/// The policytrain version recorded in every checkpoint's metadata.
inline constexpr const char* kLibraryVersion = "0.1.0";

/// Reads `file`, validates it against the live model, optimizer and Trainer state, and applies it (all or
/// nothing). `ctx` is a Trainer context. Throws CheckpointError naming the file and the problem.
template <class Ctx>
nlohmann::json load(Ctx& ctx, const std::filesystem::path& file) {
  const RawFile raw = read_file(file);
  const StateDict live = ctx.state_dict();
  Loaded l = read_payload(raw, file, ctx.module(), ctx.optimizer(), live);
  l.apply(ctx.module(), ctx.optimizer(), live, [&](const StateDict& d) { ctx.load_state_dict(d); });
  return l.meta;
}

/// The checkpoint files of `dir` whose header and metadata are readable, newest first (by global step, then
/// epoch, then data position, then time), and the unreadable ones with their reasons.
struct Candidates {
  /// Readable files with their metadata, newest first.
  std::vector<std::pair<std::filesystem::path, nlohmann::json>> readable;
  /// Unreadable files with the reason each could not be read.
  std::vector<std::pair<std::filesystem::path, std::string>> unreadable;
};
/// Lists the checkpoint files of `dir` (see Candidates); never throws for a bad file.
POLICYTRAIN_DECL Candidates list_checkpoints(const std::filesystem::path& dir)
#if POLICYTRAIN_DEFINE
{
  namespace fs = std::filesystem;
  Candidates c;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (!e.is_regular_file() || e.path().extension() != ".ckpt" || name.front() == '.') continue;
    try {
      auto meta = read_meta(e.path());
      for (const char* k : {"global_step", "epoch", "batch_in_epoch", "created_unix_ns"}) (void)meta_int(e.path(), meta, k, 0);
      (void)meta_string(e.path(), meta, "run_id", "");
      c.readable.emplace_back(e.path(), std::move(meta));
    } catch (const CheckpointError& err) {
      c.unreadable.emplace_back(e.path(), err.what());
    }
  }
  auto key = [](const std::pair<std::filesystem::path, nlohmann::json>& f) {
    const auto& [p, m] = f;  // fields validated above
    return std::tuple(meta_int(p, m, "global_step", -1), meta_int(p, m, "epoch", -1), meta_int(p, m, "batch_in_epoch", -1),
                      meta_int(p, m, "created_unix_ns", 0));
  };
  std::stable_sort(c.readable.begin(), c.readable.end(), [&](const auto& a, const auto& b) { return key(a) > key(b); });
  return c;
}
#else
;
#endif

/// What a run is, beyond its policies: a checkpoint resumes only a run whose fingerprint it matches. Fields left
/// at 0 are not recorded (and not compared).
struct RunInfo {
  /// Processes; 0: taken from the Trainer's parallel policy (1 without data parallelism); -1: not recorded, so that
  /// an epoch-end checkpoint resumes on another world size (the loaders re-shard, a sharded optimizer re-partitions;
  /// the steps per epoch, and so a step-counted schedule, change with it).
  int64_t world_size = 0;
  int64_t batch_size = 0;  ///< the batch size the position within an epoch counts in
  int64_t data_size = 0;   ///< training samples (the epoch's length)
};

namespace detail {
/// Hex SHA-256 of the module's architecture: every parameter's and buffer's name, shape and dtype, in
/// registration order (not the values).
POLICYTRAIN_DECL std::string architecture_digest(const torch::nn::Module& m)
#if POLICYTRAIN_DEFINE
{
  std::string text;
  auto add = [&](const std::string& kind, const std::string& name, const torch::Tensor& t) {
    text += policytrain::detail::format("{} {} {} {}\n", kind, name, c10::str(t.sizes()), t.dtype().name());
  };
  for (const auto& p : m.named_parameters(true)) add("param", p.key(), p.value());
  for (const auto& b : m.named_buffers(true)) add("buffer", b.key(), b.value());
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_MD_CTX* c = EVP_MD_CTX_new();
  if (!c || EVP_DigestInit_ex(c, EVP_sha256(), nullptr) != 1 || EVP_DigestUpdate(c, text.data(), text.size()) != 1 ||
      EVP_DigestFinal_ex(c, md, &len) != 1) {
    EVP_MD_CTX_free(c);
    throw CheckpointError("policytrain::checkpoint: OpenSSL SHA-256 unavailable for the run fingerprint");
  }
  EVP_MD_CTX_free(c);
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += policytrain::detail::format("{:02x}", md[i]);
  return hex;
}
#else
;
#endif
/// A new run id: 16 hex digits from std::random_device mixed with the clock (unique per fresh start, not secret).
POLICYTRAIN_DECL std::string new_run_id()
#if POLICYTRAIN_DEFINE
{
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  v ^= static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  return policytrain::detail::format("{:016x}", v);
}
#else
;
#endif
/// The dynamic type of `opt`, demangled ("torch::optim::AdamW").
POLICYTRAIN_DECL std::string optimizer_kind(const torch::optim::Optimizer& opt)
#if POLICYTRAIN_DEFINE
{
  const char* mangled = typeid(opt).name();
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string r = status == 0 && d ? d : mangled;
  std::free(d);
  return r;
}
#else
;
#endif
/// The family and hyper-parameters (all but the lr) of one parameter group's options: {} when the options are of
/// a type not known here (the family is then the optimizer's C++ type).
POLICYTRAIN_DECL std::pair<std::string, nlohmann::json> optimizer_options(const torch::optim::OptimizerOptions& o)
#if POLICYTRAIN_DEFINE
{
  namespace opt = torch::optim;
  if (auto* a = dynamic_cast<const opt::AdamWOptions*>(&o))
    return {"adamw", {{"betas", {std::get<0>(a->betas()), std::get<1>(a->betas())}}, {"eps", a->eps()},
                      {"weight_decay", a->weight_decay()}, {"amsgrad", a->amsgrad()}}};
  if (auto* a = dynamic_cast<const opt::AdamOptions*>(&o))
    return {"adam", {{"betas", {std::get<0>(a->betas()), std::get<1>(a->betas())}}, {"eps", a->eps()},
                     {"weight_decay", a->weight_decay()}, {"amsgrad", a->amsgrad()}}};
  if (auto* s = dynamic_cast<const opt::SGDOptions*>(&o))
    return {"sgd", {{"momentum", s->momentum()}, {"dampening", s->dampening()}, {"weight_decay", s->weight_decay()},
                    {"nesterov", s->nesterov()}}};
  if (auto* r = dynamic_cast<const opt::RMSpropOptions*>(&o))
    return {"rmsprop", {{"alpha", r->alpha()}, {"eps", r->eps()}, {"weight_decay", r->weight_decay()},
                        {"momentum", r->momentum()}, {"centered", r->centered()}}};
  if (auto* g = dynamic_cast<const opt::AdagradOptions*>(&o))
    return {"adagrad", {{"lr_decay", g->lr_decay()}, {"weight_decay", g->weight_decay()},
                        {"initial_accumulator_value", g->initial_accumulator_value()}, {"eps", g->eps()}}};
  return {"", nlohmann::json::object()};
}
#else
;
#endif
/// The optimizer's part of the run fingerprint: its family, named by its options' type, which a fused optimizer
/// shares with LibTorch's (optim::FusedAdamW and torch::optim::AdamW are "adamw"; an optimizer with options of
/// another type: its C++ type), and each parameter group's parameter count, element count and hyper-parameters
/// other than the lr (the schedule's, restored from the checkpoint with the groups).
POLICYTRAIN_DECL nlohmann::json optimizer_fingerprint(const torch::optim::Optimizer& opt)
#if POLICYTRAIN_DEFINE
{
  std::string family;
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : opt.param_groups()) {
    auto [fam, hyper] = optimizer_options(g.options());
    if (family.empty()) family = fam;
    int64_t elements = 0;
    for (const auto& p : g.params()) elements += p.numel();
    hyper["params"] = g.params().size();
    hyper["elements"] = elements;
    groups.push_back(std::move(hyper));
  }
  if (family.empty()) family = optimizer_kind(opt);
  return {{"family", family}, {"param_groups", std::move(groups)}};
}
#else
;
#endif
}  // namespace detail

/// The fingerprint of a run (stored as the metadata's "fingerprint"): the model's architecture digest, its tensor
/// and element counts, the optimizer's family and parameter groups (detail::optimizer_fingerprint), and the
/// RunInfo fields that are set.
POLICYTRAIN_DECL nlohmann::json run_fingerprint(const torch::nn::Module& m, const torch::optim::Optimizer& opt, const RunInfo& run)
#if POLICYTRAIN_DEFINE
{
  int64_t tensors = 0, elements = 0;
  for (const auto& p : m.named_parameters(true)) ++tensors, elements += p.value().numel();
  for (const auto& b : m.named_buffers(true)) ++tensors, elements += b.value().numel();
  nlohmann::json f{{"model", detail::architecture_digest(m)},
                   {"model_tensors", tensors},
                   {"model_elements", elements},
                   {"optimizer", detail::optimizer_fingerprint(opt)}};
  if (run.world_size > 0) f["world_size"] = run.world_size;
  if (run.batch_size > 0) f["batch_size"] = run.batch_size;
  if (run.data_size > 0) f["data_size"] = run.data_size;
  return f;
}
#else
;
#endif

/// The background writer of asynchronous checkpoints: one thread, one job in flight at most, jobs in order.
/// A job's failure is kept and rethrown by the next `submit` or `wait`. The destructor finishes the job in
/// flight (an exception unwinding the Trainer does not abandon a write half way; a killed process leaves the
/// temporary file, never a partial checkpoint: write_atomic renames only a complete, fsynced file).
class AsyncWriter {
 public:
  /// Starts the writer thread.
  AsyncWriter() : thread_([this] { loop(); }) {}
  /// Finishes the job in flight, if any, and joins the thread.
  ~AsyncWriter() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  /// Waits for the job in flight (rethrowing its failure), then starts `job`.
  void submit(std::function<void()> job) {
    wait();
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = std::move(job);
    }
    cv_.notify_all();
  }
  /// Waits until no job is in flight; rethrows the failure of the last one, once.
  void wait() {
    std::unique_lock<std::mutex> lk(m_);
    done_.wait(lk, [&] { return !job_ && !running_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }
  /// Whether a job is in flight.
  bool busy() {
    std::lock_guard<std::mutex> lk(m_);
    return job_ || running_;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || job_; });
      if (!job_) return;  // stop requested, nothing left
      auto job = std::move(job_);  // the job owns the payload: moved, never copied
      job_ = nullptr;
      running_ = true;
      lk.unlock();
      std::exception_ptr err;
      try {
        job();
      } catch (...) {
        err = std::current_exception();
      }
      job = nullptr;  // frees the payload
      lk.lock();
      running_ = false;
      if (err) error_ = err;
      done_.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable cv_, done_;
  std::function<void()> job_;
  std::exception_ptr error_;
  bool stop_ = false, running_ = false;
  std::thread thread_;  // last: started once the rest is constructed
};

/// Checkpoints in a directory (see the file comment).
class Disk {
 public:
  /// The Trainer composes at most one checkpoint policy.
  static constexpr Category category = Category::checkpoint;
  /// Name in logs and summaries.
  static constexpr std::string_view name = "checkpoint::Disk";

  /// What a fresh start does when `directory` already holds checkpoint files (of another run, necessarily: a
  /// fresh start has written none yet).
  enum class Existing {
    rotate,  ///< move them (and final.pt) into `directory/previous-<their run id>/`, say so, and start
    refuse,  ///< throw CheckpointError naming the files and the choices; touch nothing
  };

  /// Settings of Disk.
  struct Options {
    std::filesystem::path directory{};  ///< where checkpoints go; empty: the policy is off
    bool last = true;                 ///< last.ckpt at every epoch end (and every `every_seconds`)
    bool best = false;                ///< best.ckpt whenever `monitor` improves
    Monitor monitor{};                ///< the metric ("loss", "accuracy"), its mode and min_delta, for best/top_k
    int64_t top_k = 1;                ///< with best: also keep the k best as `best-e<epoch>.ckpt` (1: best.ckpt only)
    int64_t every_epochs = 0;         ///< `epoch-<n>.ckpt` every n epochs (0: off)
    int64_t every_steps = 0;          ///< `step-<n>.ckpt` every n optimizer steps (0: off)
    double every_seconds = 0;         ///< last.ckpt when this much wall time passed since the last write (0: off)
    int64_t keep = 0;                 ///< keep only the newest k epoch-/step- files (0: all)
    SaveOptions save{};               ///< half_weights (fp16 model), half_optimizer (bf16 moments)
    std::string resume{};             ///< "": start fresh; a file; a directory, or "auto" for `directory`: its newest good file
    std::string settings{};           ///< the run's settings as JSON text, kept in every checkpoint's metadata
    RunInfo run{};                    ///< world size, batch size, data size: part of the run fingerprint
    bool async = false;               ///< write in a background thread (the step pays only the serialization)
    Existing existing = Existing::rotate;  ///< a fresh or weights-only start into a directory holding another run's files
    bool weights_only = false;        ///< resume: load the model's weights only (any run's file), start a new run
    bool export_final = true;         ///< write final.pt (torch.load-able weights) at fit end
    bool export_best = true;          ///< with best: write best.pt (torch.load-able) of the weights that scored, beside best.ckpt
    bool verbose = false;             ///< a line per file written
    std::FILE* log = stderr;          ///< where messages go (nullptr: nowhere)
  };

  Disk() = default;
  /// Validates `o.settings` as JSON nested at most kMaxMetaDepth - 1 deep; throws std::invalid_argument otherwise.
  explicit Disk(Options o);

  /// The settings.
  const Options& options() const { return o_; }
  /// Whether the policy is on (a non-empty `directory`).
  bool enabled() const { return !o_.directory.empty(); }
  /// The file the last fit resumed from (empty when it started fresh).
  const std::filesystem::path& resumed_from() const { return resumed_from_; }
  /// Validation metrics of every epoch so far (resumed runs included): (loss, accuracy).
  const std::vector<std::pair<double, double>>& history() const { return history_; }
  /// The metric `best` watches (checked against the task's metrics when fit begins); empty when nothing is watched.
  std::string monitored_metric() const { return enabled() && o_.best ? o_.monitor.metric : std::string(); }
  /// Best value of the monitored metric so far (NaN before the first validation).
  double best_metric() const { return best_metric_; }
  /// Epoch of the best metric (-1 before the first validation).
  int64_t best_epoch() const { return best_epoch_; }
  /// Wall time of the last save (serialization and every file written), in seconds.
  double last_save_seconds() const { return last_save_seconds_; }
  /// Waits for the asynchronous write in flight, if any; rethrows its failure (a CheckpointError).
  void wait() {
    if (writer_) writer_->wait();
  }
  /// Number of checkpoint files written so far.
  int64_t files_written() const { return files_written_ + (written_ ? written_->load() : 0); }
  /// This run's id (every checkpoint's metadata "run_id"): made at a fresh start, taken from the file a resume
  /// continues; empty before the first fit.
  const std::string& run_id() const { return run_id_; }
  /// This run's fingerprint (set at the first fit's begin, its optimizer groups re-read at every later one; see
  /// run_fingerprint and refresh_fingerprint).
  const nlohmann::json& fingerprint() const { return fingerprint_; }

  /// The fingerprint of the run `ctx` trains: run_fingerprint with the world size of the Trainer's parallel
  /// policy when `run.world_size` is 0.
  template <class Ctx>
  nlohmann::json fingerprint(Ctx& ctx) const {
    RunInfo run = o_.run;
    if (run.world_size == 0) {
      run.world_size = static_cast<int64_t>(ctx.template policy<Category::parallel>().world_size());
    }
    return run_fingerprint(ctx.module(), ctx.optimizer(), run);
  }

  /// Best metric, best epoch, metric history and the top-k list, for resume.
  StateDict state_dict() const;
  /// Restores what state_dict() saved.
  void load_state_dict(const StateDict& d);

  // --- hooks ---
  /// Creates the directory, removes leftover temporary files, and resumes when `resume` is set.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    last_write_ = Clock::now();
    if (!enabled()) return;
    if (ctx.is_main()) {
      // One job per run directory: `run.lock` is held until fit end (or this policy's end, after an exception),
      // taken before anything in the directory is touched.
      std::error_code ec;
      std::filesystem::create_directories(o_.directory, ec);  // prepare_directory reports a failure
      if (!ec) lock_ = RunLock::acquire(o_.directory, [this](const std::string& m) { say("{}", m); });
      prepare_directory();
    }
    // Re-read at every fit's begin: a param group added (add_param_group) since the last fit is part of the run
    // the next checkpoints record, so that they resume with the optimizer built as they were written. A group's
    // hyper-parameters stay those of the fit it first appeared in (a schedule has moved the momentum meanwhile;
    // the run is the same): refresh_fingerprint.
    fingerprint_ = fingerprint_.is_null() ? fingerprint(ctx) : refresh_fingerprint(fingerprint_, fingerprint(ctx));
    const auto& st = ctx.state();
    const bool at_zero = st.global_step == 0 && st.epoch == 0 && st.batch_in_epoch == 0;
    // A full resume continues the run that wrote the file (its run id, load_one); anything else is a new run. A
    // new run from step 0 must not share the directory with another run's files, whether it loaded nothing or took
    // its weights from a file (weights only, which may be one of them: its weights are in the model already, and the
    // file moves with the others): its last.ckpt and best.ckpt would overwrite that run's.
    bool continued = false;
    if (!o_.resume.empty()) continued = resume(access(ctx));
    if (!continued && run_id_.empty()) {
      run_id_ = detail::new_run_id();
      if (at_zero && (resumed_from_.empty() || o_.weights_only) && ctx.is_main()) set_aside_other_runs();
    }
    last_saved_step_ = ctx.state().global_step;
  }

  /// Writes step-N.ckpt every `every_steps` steps, else last.ckpt when `every_seconds` elapsed.
  template <class Ctx>
  void on_step_end(Ctx& ctx) {
    if (!enabled()) return;
    const int64_t step = ctx.state().global_step;
    if (o_.every_steps > 0 && step % o_.every_steps == 0) {
      save(ctx, {{policytrain::detail::format("step-{:08d}.ckpt", step), "step"}}, false, [this] { rotate(); });
    } else if (o_.every_seconds > 0 && o_.last &&
               ctx.agree_any(std::chrono::duration<double>(Clock::now() - last_write_).count() >= o_.every_seconds)) {
      // Agreed: every rank saves at the same step (a sharded optimizer's state is gathered by all of them).
      save(ctx, {{"last.ckpt", "last"}}, false);
    }
  }

  /// Records the metrics and marks a best / top-k save for the epoch end.
  template <class Ctx>
  void on_validation_end(Ctx& ctx, const Metrics& m) {
    if (!enabled()) return;
    history_.emplace_back(m.loss, m.accuracy);
    if (!o_.best) return;
    const double v = m.get(o_.monitor.metric);
    const int64_t epoch = ctx.state().epoch;
    if (o_.monitor.improves(v, best_metric_)) {
      best_metric_ = v;
      best_epoch_ = epoch;
      ctx.state().best_metric = v;
      ctx.state().best_epoch = epoch;
      pending_best_ = true;
    }
    if (o_.top_k > 1 && std::isfinite(v) &&
        (static_cast<int64_t>(top_.size()) < o_.top_k || o_.monitor.improves(v, top_.back().first))) {
      top_.emplace_back(v, epoch);
      std::stable_sort(top_.begin(), top_.end(), [&](auto& a, auto& b) { return o_.monitor.better(a.first, b.first); });
      pending_top_ = true;
    }
  }

  /// Writes last, best and periodic epoch files; rotates epoch-/step- files.
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    if (!enabled()) return;
    const int64_t epoch = ctx.state().epoch;
    std::vector<std::pair<std::string, std::string>> files;
    if (o_.last) files.emplace_back("last.ckpt", "last");
    if (std::exchange(pending_best_, false)) files.emplace_back("best.ckpt", "best");
    std::string dropped;
    if (std::exchange(pending_top_, false)) {
      files.emplace_back(policytrain::detail::format("best-e{:04d}.ckpt", epoch + 1), "best");
      if (static_cast<int64_t>(top_.size()) > o_.top_k) {
        dropped = policytrain::detail::format("best-e{:04d}.ckpt", top_.back().second + 1);
        top_.pop_back();
      }
    }
    const bool periodic = o_.every_epochs > 0 && (epoch + 1) % o_.every_epochs == 0;
    if (periodic) files.emplace_back(policytrain::detail::format("epoch-{:04d}.ckpt", epoch + 1), "epoch");
    if (files.empty()) return;
    // An epoch cut short (max_steps) is saved mid-epoch; a finished one resumes at the next epoch. The Trainer
    // says which (epoch_cut), since a loader of unknown length gives no batch count to compare with.
    const bool finished = !ctx.epoch_cut();
    save(ctx, files, finished, [this, dropped, periodic] {
      if (!dropped.empty()) {
        std::error_code ec;
        std::filesystem::remove(o_.directory / dropped, ec);
      }
      if (periodic) rotate();
    });
  }

  /// Writes a final last.ckpt if steps were taken since, and exports final.pt (EMA weights with callbacks::Ema).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    if (!enabled()) return;
    // Every rank takes part in the save (it may gather a sharded optimizer's state); the main rank writes.
    if (o_.last && last_saved_step_ != ctx.state().global_step) save(ctx, {{"last.ckpt", "last"}}, false);
    if (!ctx.is_main()) return;
    wait();  // the last asynchronous write is on disk (or its failure raised) when fit returns
    struct Release {
      std::shared_ptr<RunLock>& lock;
      ~Release() { lock.reset(); }
    } release{lock_};  // the directory is free once the final files are written
    if (!o_.export_final) return;
    const auto file = o_.directory / "final.pt";
    if constexpr (Ctx::template has<callbacks::Ema>()) {
      auto& ema = ctx.template get<callbacks::Ema>();
      if (ema.enabled()) {
        ema.with_weights(ctx.module(), [&] { export_weights(ctx.module(), file); });
        say("policytrain::checkpoint: exported the EMA weights to {}", file.string());
        return;
      }
    }
    export_weights(ctx.module(), file);
    say("policytrain::checkpoint: exported the final weights to {}", file.string());
  }

  /// Writes the current state to `files` (names in the directory, with their kind). `epoch_end`: the epoch is
  /// complete, so the checkpoint resumes at the start of the next one. `after` runs once the files are written
  /// (rotation). Main rank only; others return. With `async`, the state is serialized now (a copy on the host)
  /// and the files are written by the background thread; a failure of that write is raised by the next save or
  /// at fit end.
  template <class Ctx>
  void save(Ctx& ctx, const std::vector<std::pair<std::string, std::string>>& files, bool epoch_end,
            std::function<void()> after = {}) {
    // A deferred check (precision's non-finite loss) surfaces before weights it would condemn are written.
    if constexpr (requires { ctx.flush_checks(); }) ctx.flush_checks();
    // Logs kept beside the run (callbacks::MetricsLog) hold every row up to this step before the file exists, so
    // that a resume from it finds no gap in them (rows written after it are dropped when they are reopened).
    if constexpr (requires { ctx.before_checkpoint(epoch_end); }) ctx.before_checkpoint(epoch_end);
    // Every rank: a sharded optimizer (parallel::ShardedDataParallel) gathers its whole state on the main rank
    // here (a collective), and lets the other ranks' parts go again once the payload holds them.
    struct AfterSave {
      Ctx& c;
      ~AfterSave() { if constexpr (requires { c.after_save(); }) c.after_save(); }
    };
    if constexpr (requires { ctx.before_save(); }) ctx.before_save();
    AfterSave after_save{ctx};
    last_saved_step_ = ctx.state().global_step;
    if (!ctx.is_main()) {
      last_write_ = Clock::now();
      return;
    }
    const auto t0 = Clock::now();
    StateDict st = ctx.state_dict();
    const auto& s = ctx.state();
    const int64_t epoch = epoch_end ? s.epoch + 1 : s.epoch;
    const int64_t batch = epoch_end ? 0 : s.batch_in_epoch;
    st["trainer/epoch"] = scalar_tensor(epoch);
    st["trainer/batch_in_epoch"] = scalar_tensor(batch);
    // A best file records the weights that scored: the validation's (callbacks::Ema swaps its average in), in
    // the payload's "evaluated" section when they are not the trained ones, and exported as best.pt.
    std::string evaluated;
    std::vector<std::pair<std::string, torch::Tensor>> evaluated_weights;
    const bool best = std::any_of(files.begin(), files.end(), [](const auto& f) { return f.second == "best"; });
    if (best) {
      const bool export_best = o_.export_best && std::any_of(files.begin(), files.end(), [](const auto& f) { return f.first == "best.ckpt"; });
      evaluated = ctx.with_evaluated_weights([&] {
        if (export_best) export_weights(ctx.module(), o_.directory / "best.pt");
        torch::NoGradGuard g;
        for (const auto& [k, v] : detail::named_tensors(ctx.module())) evaluated_weights.emplace_back(k, v.detach().clone());
      });
      if (evaluated == "model") evaluated_weights.clear();  // the model section holds them
    }
    std::string payload = make_payload(ctx.module(), ctx.optimizer(), st, o_.save, evaluated_weights);
    write_checkpoint(files, epoch, batch, s, std::move(payload), fingerprint_.is_null() ? fingerprint(ctx) : nlohmann::json(),
                     std::move(after), t0, evaluated);
  }

 private:
  using Clock = std::chrono::steady_clock;

  // The context as the non-template members see it (compiled once with separate compilation, whatever the
  // Trainer): the model, the optimizer, and the Trainer's state dict.
  struct Access {
    torch::nn::Module& module;
    torch::optim::Optimizer& optimizer;
    std::function<StateDict()> state_dict;
    std::function<void(const StateDict&)> load_state_dict;
  };
  template <class Ctx>
  static Access access(Ctx& ctx) {
    return {ctx.module(), ctx.optimizer(), [&ctx] { return ctx.state_dict(); },
            [&ctx](const StateDict& d) { ctx.load_state_dict(d); }};
  }

  /// Creates the directory and removes the temporary files of a killed write (main rank).
  void prepare_directory();
  /// save's work past the payload: the metadata, then the files (or the asynchronous writer's job).
  void write_checkpoint(const std::vector<std::pair<std::string, std::string>>& files, int64_t epoch, int64_t batch,
                        const TrainState& s, std::string payload, nlohmann::json fresh_fingerprint,
                        std::function<void()> after, Clock::time_point t0, const std::string& evaluated);

  void write_files(const std::vector<std::pair<std::string, std::string>>& files, nlohmann::json& meta,
                   const std::string& payload, int64_t epoch, int64_t step, std::atomic<int64_t>* written) const;

  template <class... A>
  void say(fmt::format_string<A...> f, A&&... a) const {
    if (!o_.log) return;
    std::fprintf(o_.log, "%s\n", policytrain::detail::format(f, std::forward<A>(a)...).c_str());
    std::fflush(o_.log);
  }

  /// Why `file` (metadata `meta`) is another run's, or "" when its fingerprint matches this run's (or it has none).
  std::string other_run(const std::filesystem::path& file, const nlohmann::json& meta) const;

  /// Whether `file`'s fingerprint matches this run's (or it records none); quiet, never throws (a malformed
  /// fingerprint does not match; load_one reports it).
  bool same_fingerprint(const std::filesystem::path& file, const nlohmann::json& meta) const;

  /// Loads `file` (metadata `meta`): everything, or the weights only. Throws CheckpointError.
  void load_one(const Access& a, const std::filesystem::path& file, const nlohmann::json& meta);

  /// Returns whether a full checkpoint was loaded (the run continues; false: weights only, or nothing to load).
  bool resume(const Access& a);

  /// A fresh run (new run id, step 0): the checkpoint files (*.ckpt, final.pt) already in the directory are another
  /// run's. `existing`: rotate moves them to `previous-<run id>/` (the id of the newest readable one; a time stamp
  /// when none records an id), refuse throws. Only the main rank, which writes the files, looks: no collective
  /// here, since ranks with rank-local directories may resume differently (the parallel policy's agreement on the
  /// starting state, which comes later, reports that); a refusal on the main rank stops the others at their next
  /// collective, as any error of the main rank's.
  void set_aside_other_runs();

  /// Keeps the newest `keep` epoch-/step- files.
  void rotate();

  Options o_;
  std::vector<std::pair<double, double>> history_;
  std::vector<std::pair<double, int64_t>> top_;  // the k best (value, epoch), best first
  double best_metric_ = std::numeric_limits<double>::quiet_NaN();
  int64_t best_epoch_ = -1;
  bool pending_best_ = false, pending_top_ = false;
  std::filesystem::path resumed_from_;
  Clock::time_point last_write_{};
  int64_t last_saved_step_ = -1;
  int64_t files_written_ = 0;
  nlohmann::json fingerprint_;
  std::string run_id_;                              // this run's id (see run_id())
  std::shared_ptr<RunLock> lock_;                   // the run directory's lock while a fit runs (main rank);
                                                    // declared first of these: released after the writer ends
  std::shared_ptr<AsyncWriter> writer_;             // asynchronous mode: the background writer (made on first save)
  std::shared_ptr<std::atomic<int64_t>> written_;   // files the writer has written
  double last_save_seconds_ = 0;
};

// Disk's non-template members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL Disk::Disk(Options o) : o_(std::move(o)) {
  if (!o_.settings.empty() && !nlohmann::json::accept(o_.settings))
    throw std::invalid_argument("policytrain::checkpoint::Disk: settings is not valid JSON; pass a JSON object as text");
  // The settings sit one level inside the metadata, whose depth a reader bounds (kMaxMetaDepth).
  if (detail::json_too_deep(o_.settings, kMaxMetaDepth - 1) != std::string_view::npos)
    throw std::invalid_argument(policytrain::detail::format("policytrain::checkpoint::Disk: settings nests arrays and objects more "
                                            "than {} levels deep; a checkpoint reader refuses metadata deeper than {}",
                                            kMaxMetaDepth - 1, kMaxMetaDepth));
}

POLICYTRAIN_DECL StateDict Disk::state_dict() const {
  auto hist = torch::zeros({static_cast<int64_t>(history_.size()), 2}, torch::kDouble);
  for (size_t i = 0; i < history_.size(); ++i) {
    hist[static_cast<int64_t>(i)][0] = history_[i].first;
    hist[static_cast<int64_t>(i)][1] = history_[i].second;
  }
  auto top = torch::zeros({static_cast<int64_t>(top_.size()), 2}, torch::kDouble);
  for (size_t i = 0; i < top_.size(); ++i) {
    top[static_cast<int64_t>(i)][0] = top_[i].first;
    top[static_cast<int64_t>(i)][1] = static_cast<double>(top_[i].second);
  }
  return {{"best_metric", scalar_tensor(best_metric_)}, {"best_epoch", scalar_tensor(best_epoch_)},
          {"history", hist}, {"top_k", top}};
}

POLICYTRAIN_DECL void Disk::load_state_dict(const StateDict& d) {
  best_metric_ = state_double(d, "best_metric");
  best_epoch_ = state_int(d, "best_epoch");
  auto hist = state_at(d, "history").to(torch::kDouble).contiguous();
  history_.clear();
  for (int64_t i = 0; i < hist.size(0); ++i) history_.emplace_back(hist[i][0].item<double>(), hist[i][1].item<double>());
  auto top = state_at(d, "top_k").to(torch::kDouble).contiguous();
  top_.clear();
  for (int64_t i = 0; i < top.size(0); ++i) top_.emplace_back(top[i][0].item<double>(), static_cast<int64_t>(top[i][1].item<double>()));
}

POLICYTRAIN_DECL void Disk::write_files(const std::vector<std::pair<std::string, std::string>>& files, nlohmann::json& meta,
                                   const std::string& payload, int64_t epoch, int64_t step,
                                   std::atomic<int64_t>* written) const {
  for (const auto& [file, kind] : files) {
    meta["kind"] = kind;
    write_file(o_.directory / file, meta, payload);
    if (written) ++*written;
    if (o_.verbose) say("policytrain::checkpoint: wrote {} (epoch {}, step {})", (o_.directory / file).string(), epoch, step);
  }
}

POLICYTRAIN_DECL std::string Disk::other_run(const std::filesystem::path& file, const nlohmann::json& meta) const {
  if (!meta.contains("fingerprint")) {
    say("policytrain::checkpoint: {} records no run fingerprint (written before policytrain recorded one); its "
        "settings cannot be compared", file.string());
    return "";
  }
  check_fingerprint(file, meta["fingerprint"]);
  const auto diff = fingerprint_differences(meta["fingerprint"], fingerprint_);
  if (diff.empty()) return "";
  return policytrain::detail::format("policytrain::checkpoint: {}: belongs to another run: {}; to start a new run from its weights, "
                     "resume with weights only (checkpoint::Disk::Options::weights_only)",
                     file.string(), fmt::join(diff, "; "));
}

POLICYTRAIN_DECL bool Disk::same_fingerprint(const std::filesystem::path& file, const nlohmann::json& meta) const {
  if (!meta.contains("fingerprint")) return true;
  try {
    check_fingerprint(file, meta["fingerprint"]);
    return fingerprint_differences(meta["fingerprint"], fingerprint_).empty();
  } catch (const CheckpointError&) {
    return false;
  }
}

POLICYTRAIN_DECL void Disk::load_one(const Access& a, const std::filesystem::path& file, const nlohmann::json& meta) {
  if (o_.weights_only) {
    load_weights(a.module, file, Weights::trained);
    resumed_from_ = file;
    say("policytrain::checkpoint: loaded the weights of {} (step {}); a new run starts at step 0", file.string(),
        meta_int(file, meta, "global_step", 0));
    return;
  }
  if (const std::string why = other_run(file, meta); !why.empty()) throw CheckpointError(why);
  const RawFile raw = read_file(file);  // checkpoint::load, for the context behind `a`
  const StateDict live = a.state_dict();
  Loaded l = read_payload(raw, file, a.module, a.optimizer, live);
  l.apply(a.module, a.optimizer, live, a.load_state_dict);
  resumed_from_ = file;
  // The run continues under its id (a file written before run ids were recorded: a new one).
  const std::string id = meta_string(file, meta, "run_id", "");
  run_id_ = id.empty() ? detail::new_run_id() : id;
}

POLICYTRAIN_DECL bool Disk::resume(const Access& a) {
  namespace fs = std::filesystem;
  const fs::path target = o_.resume == "auto" ? o_.directory : fs::path(o_.resume);
  std::error_code ec;
  auto resumed = [&](const fs::path& file, const nlohmann::json& meta, bool fell_back) {
    if (o_.weights_only) return;
    say("policytrain::checkpoint: resumed from {} (epoch {}, batch {}, step {}){}", file.string(),
        meta_int(file, meta, "epoch", 0), meta_int(file, meta, "batch_in_epoch", 0),
        meta_int(file, meta, "global_step", 0), fell_back ? ", the newest usable checkpoint" : "");
  };
  if (fs::is_regular_file(target, ec)) {  // a named file: no fallback
    const auto meta = read_meta(target);
    load_one(a, target, meta);
    resumed(target, meta, false);
    return !o_.weights_only;
  }
  if (!fs::is_directory(target, ec)) {
    if (o_.resume != "auto")
      throw CheckpointError(policytrain::detail::format("policytrain::checkpoint: {}: no such file or directory to resume from", target.string()));
    say("policytrain::checkpoint: no checkpoint in {}; starting from scratch", target.string());
    return false;
  }
  Candidates c = list_checkpoints(target);
  for (const auto& [file, why] : c.unreadable) say("{}; skipping it", why);
  std::vector<std::string> errors;
  for (const auto& [file, why] : c.unreadable) errors.push_back(why);
  // Of the files this run's fingerprint matches, only those of the run that wrote last are continued: the run id
  // of the newest such file by creation time. Another run of the same program is never a candidate, however far
  // its steps go (a fresh run's step 63 beats an older run's 740). Files of another fingerprint go on to
  // load_one, which reports how they differ.
  std::optional<std::string> latest;
  int64_t newest = std::numeric_limits<int64_t>::min();
  for (const auto& [file, meta] : c.readable)
    if (const int64_t t = meta_int(file, meta, "created_unix_ns", 0); t > newest && same_fingerprint(file, meta)) {
      newest = t;
      latest = meta_string(file, meta, "run_id", "");
    }
  for (const auto& [file, meta] : c.readable) {
    const std::string id = meta_string(file, meta, "run_id", "");
    if (latest && id != *latest && same_fingerprint(file, meta)) {
      const std::string why = policytrain::detail::format(
          "policytrain::checkpoint: {}: written by another run (run {}, step {}) than the one that wrote last "
          "(run {}); not continued (a fresh run moves such files to previous-<run id>/, "
          "checkpoint::Disk::Options::existing)", file.string(), id.empty() ? "without id" : id,
          meta_int(file, meta, "global_step", 0), latest->empty() ? "without id" : *latest);
      say("{}; skipping it", why);
      errors.push_back(why);
      continue;
    }
    try {
      load_one(a, file, meta);
      resumed(file, meta, !errors.empty());
      return !o_.weights_only;
    } catch (const CheckpointError& e) {
      say("{}; falling back to the previous checkpoint", e.what());
      errors.push_back(e.what());
    }
  }
  if (errors.empty()) {
    say("policytrain::checkpoint: no checkpoint in {}; starting from scratch", target.string());
    return false;
  }
  throw CheckpointError(policytrain::detail::format("policytrain::checkpoint: no usable checkpoint in {}:\n  {}", target.string(),
                                    fmt::join(errors, "\n  ")));
}

POLICYTRAIN_DECL void Disk::set_aside_other_runs() {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::string id;
  int64_t step = 0, newest = std::numeric_limits<int64_t>::min();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o_.directory, ec)) {
    const auto n = e.path().filename().string();
    if (!e.is_regular_file() || n.front() == '.' || (e.path().extension() != ".ckpt" && n != "final.pt" && n != "best.pt")) continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  const Candidates c = list_checkpoints(o_.directory);
  for (const auto& [file, meta] : c.readable)
    if (const int64_t t = meta_int(file, meta, "created_unix_ns", 0); t > newest) {
      newest = t;
      id = meta_string(file, meta, "run_id", "");
      step = meta_int(file, meta, "global_step", 0);
    }
  if (!files.empty() && o_.existing == Existing::refuse) {
    std::vector<std::string> names;
    for (size_t i = 0; i < files.size() && i < 5; ++i) names.push_back(files[i].filename().string());
    if (files.size() > 5) names.push_back(policytrain::detail::format("and {} more", files.size() - 5));
    throw CheckpointError(policytrain::detail::format(
        "policytrain::checkpoint: {} holds {} checkpoint file(s) of another run (run {}, newest step {}: {}), and "
        "this run starts fresh{}; continue that run (resume = \"auto\"), choose another directory, remove them, or "
        "set checkpoint::Disk::Options::existing = Existing::rotate to move them to previous-<run id>/ "
        "(existing is refuse)", o_.directory.string(), files.size(), id.empty() ? "without id" : id, step,
        fmt::join(names, ", "),
        resumed_from_.empty() ? std::string() : policytrain::detail::format(" from the weights of {}", resumed_from_.string())));
  }
  if (files.empty()) return;
  // The id names a folder: only letters, digits, '-' and '_' (a forged file's id could hold "../").
  const bool plain = !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '-' || ch == '_';
  });
  std::string base = "previous-" + (plain ? id : std::string());
  if (!plain) {  // files written before run ids were recorded: named by the time they are moved (UTC)
    char stamp[32] = {};
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    base += stamp;
  }
  fs::path dest = o_.directory / base;
  for (int i = 2; fs::exists(dest); ++i) dest = o_.directory / policytrain::detail::format("{}-{}", base, i);
  fs::create_directories(dest, ec);
  if (ec) throw CheckpointError(policytrain::detail::format("policytrain::checkpoint: cannot create {} to move another run's files "
                                            "into: {}", dest.string(), ec.message()));
  std::string source_moved;
  for (const auto& f : files) {
    fs::rename(f, dest / f.filename(), ec);
    if (ec) throw CheckpointError(policytrain::detail::format("policytrain::checkpoint: cannot move {} to {}: {}", f.string(),
                                              dest.string(), ec.message()));
    if (!resumed_from_.empty() &&
        fs::absolute(f, ec).lexically_normal() == fs::absolute(resumed_from_, ec).lexically_normal()) {
      source_moved = policytrain::detail::format("; the file this run took its weights from is among them, now {}",
                                                 (dest / f.filename()).string());
      resumed_from_ = dest / f.filename();
    }
  }
  say("policytrain::checkpoint: {} held {} file(s) of another run (run {}, newest step {}); moved them to {} so "
      "that this run (run {}) does not mix with them (checkpoint::Disk::Options::existing = rotate; refuse stops "
      "instead){}", o_.directory.string(), files.size(), id.empty() ? "without id" : id, step, dest.string(), run_id_,
      source_moved);
}

POLICYTRAIN_DECL void Disk::rotate() {
  if (o_.keep <= 0) return;
  namespace fs = std::filesystem;
  std::vector<std::pair<std::tuple<int64_t, int64_t>, fs::path>> periodic;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(o_.directory, ec)) {
    const auto n = e.path().filename().string();
    if (e.path().extension() != ".ckpt" || !(n.starts_with("epoch-") || n.starts_with("step-"))) continue;
    // Only this run's files count: another run's (left beside a resumed run, or copied in) neither outrank this
    // run's newest files nor go. An unreadable file is not known to be this run's (its writes are atomic): it stays.
    try {
      const auto m = read_meta(e.path());
      if (meta_string(e.path(), m, "run_id", "") != run_id_) continue;
      periodic.push_back({{meta_int(e.path(), m, "global_step", 0), meta_int(e.path(), m, "epoch", 0)}, e.path()});
    } catch (const CheckpointError&) {
      continue;
    }
  }
  std::sort(periodic.begin(), periodic.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t i = static_cast<size_t>(o_.keep); i < periodic.size(); ++i) fs::remove(periodic[i].second, ec);
}

POLICYTRAIN_DECL void Disk::prepare_directory() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(o_.directory, ec);
  if (ec) throw CheckpointError(policytrain::detail::format("policytrain::checkpoint: cannot create the directory {}: {}",
                                                            o_.directory.string(), ec.message()));
  // Temporary files of a write that was killed: never a checkpoint, safe to remove.
  for (const auto& e : fs::directory_iterator(o_.directory, ec))
    if (e.path().filename().string().starts_with(".") && e.path().filename().string().find(".tmp-") != std::string::npos)
      fs::remove(e.path(), ec);
}

POLICYTRAIN_DECL void Disk::write_checkpoint(const std::vector<std::pair<std::string, std::string>>& files, int64_t epoch,
                                             int64_t batch, const TrainState& s, std::string payload,
                                             nlohmann::json fresh_fingerprint, std::function<void()> after,
                                             Clock::time_point t0, const std::string& evaluated) {
  nlohmann::json meta{{"library", "policytrain"},
                      {"library_version", kLibraryVersion},
                      {"torch_version", policytrain::detail::torch_version()},
                      {"format", kFormatVersion},
                      {"epoch", epoch},
                      {"batch_in_epoch", batch},
                      {"global_step", s.global_step},
                      {"samples_seen", s.samples_seen},
                      {"half_weights", o_.save.half_weights},
                      {"half_optimizer", o_.save.half_optimizer},
                      {"created_unix_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::system_clock::now().time_since_epoch()).count()}};
  nlohmann::json hist = nlohmann::json::array();
  for (const auto& [l, a] : history_) hist.push_back({{"loss", l}, {"accuracy", a}});
  meta["history"] = hist;
  if (o_.best) meta["best"] = {{"metric", o_.monitor.metric}, {"mode", to_string(o_.monitor.effective_mode())},
                               {"value", std::isfinite(best_metric_) ? nlohmann::json(best_metric_) : nlohmann::json()},
                               {"epoch", best_epoch_}};
  if (!evaluated.empty()) meta["evaluated"] = evaluated;  // "model", or the policy whose weights were evaluated
  if (!o_.settings.empty()) meta["settings"] = nlohmann::json::parse(o_.settings);
  if (run_id_.empty()) run_id_ = detail::new_run_id();  // a save outside fit
  meta["run_id"] = run_id_;
  meta["fingerprint"] = fingerprint_.is_null() ? std::move(fresh_fingerprint) : fingerprint_;
  if (!o_.async) {
    write_files(files, meta, payload, epoch, s.global_step, nullptr);
    files_written_ += static_cast<int64_t>(files.size());
    if (after) after();
  } else {
    if (!writer_) {
      writer_ = std::make_shared<AsyncWriter>();
      written_ = std::make_shared<std::atomic<int64_t>>(0);
    }
    writer_->submit([this, files, meta = std::move(meta), payload = std::move(payload), epoch,
                     step = s.global_step, after = std::move(after), written = written_]() mutable {
      write_files(files, meta, payload, epoch, step, written.get());
      if (after) after();
    });
  }
  last_write_ = Clock::now();
  last_saved_step_ = s.global_step;
  last_save_seconds_ = std::chrono::duration<double>(last_write_ - t0).count();
}
#endif

}  // namespace policytrain::checkpoint
