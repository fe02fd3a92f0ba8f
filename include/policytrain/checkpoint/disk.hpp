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
/// Files: last.ckpt (every epoch end, every step validation (FitOptions::val_every_steps), and every `every_seconds`), best.ckpt (+ `best-e<epoch>.ckpt` with top_k > 1),
/// `epoch-<n>.ckpt` (every_epochs), `step-<n>.ckpt` (every_steps), final.pt (export at fit end), best.pt (export of
/// the weights that scored, with best.ckpt).
/// The best model is the model that scored: with a callback that evaluates other weights (callbacks::Ema), a best
/// file's metadata says which ("evaluated": "callbacks::Ema"; "model" without one) and its payload holds them (the
/// "evaluated" section) beside the trained weights the run resumes from; best.pt holds them; load_weights loads
/// them by default.
/// Hooks: on_fit_begin (resume), on_step_end (step, wall-clock and step-validation saves), on_validation_end (best),
/// on_epoch_end (last, best, epoch saves), on_fit_end (export). Files are written by the main rank only.
/// An epoch-end checkpoint resumes at the start of the next epoch; a step checkpoint resumes mid-epoch (the
/// Trainer skips the batches already consumed). Requires nothing; final.pt holds the weights the evaluation
/// uses (the context's with_evaluated_weights: callbacks::Ema's average with Ema). Cost when off (empty `directory`): a branch per hook; when on: a serialization per save.
/// Run identity: every file carries the run's id; a fresh start into a directory holding checkpoint files moves
/// them to `previous-<run id>/` or refuses (`existing`); auto-resume continues only the run that wrote last.
/// Before every save it calls the Trainer's before_checkpoint hooks (callbacks::MetricsLog flushes its rows).
/// One job per directory: while a fit runs, the main rank holds `run.lock` (checkpoint::RunLock); a second job
/// is refused with LockedError naming the holder's host and pid; a dead holder's lock is taken over (logged).
/// A write that fails (a full disk, a file size limit, an I/O error) leaves the previous file intact (the atomic
/// write) and names the file and the system's reason; the ranks agree on it, then by default every rank stops
/// (CheckpointError); `on_write_error = retry_next_save` keeps training and tries again at the next save. A best
/// save writes best.ckpt (`best-e<N>.ckpt`) and best.pt together or not at all, before the save's other files; one
/// that failed is kept in memory and written first at the next save, so that best.ckpt, best.pt and the best every
/// file records never disagree (docs/checkpoint.md, "A full disk").
/// Sharded (`sharded`): every rank writes its optimizer partition into a folder per checkpoint, rank 0 the rest and
/// a manifest last; a resume reads only what this rank owns, at any world size (checkpoint/sharded.hpp). With
/// `async` too, every rank stages its part into bytes at the step and writes it in the background; the manifest
/// comes at the next save or fit end, once the ranks agree that every part is on disk (checkpoint/disk_save.hpp).
/// At stage 3 of parallel::ShardedDataParallel a sharded save writes each rank's rows of the parameters and of the
/// policies' per-row state (callbacks::Ema's average: their state_rows()); its best.pt, and final.pt (exported at fit
/// end before the parallel policy gathers the model: its before_unshard), are gathered onto the main rank parameter by
/// parameter, never the whole model on a rank.
///
/// The pieces (docs/checkpoint.md, "Files"): the directory's file names, listing, rotation, set-aside and resume
/// order: checkpoint/layout.hpp; run identity: checkpoint/run_identity.hpp; loading: checkpoint/load.hpp; the
/// background writer: checkpoint/async_writer.hpp; Disk's non-template members: checkpoint/disk_impl.hpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <policytrain/checkpoint/archive.hpp>
#include <policytrain/checkpoint/async_writer.hpp>
#include <policytrain/checkpoint/export.hpp>
#include <policytrain/checkpoint/fingerprint.hpp>
#include <policytrain/checkpoint/format.hpp>
#include <policytrain/checkpoint/layout.hpp>
#include <policytrain/checkpoint/load.hpp>
#include <policytrain/checkpoint/run_identity.hpp>
#include <policytrain/checkpoint/run_lock.hpp>
#include <policytrain/checkpoint/sharded.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/monitor.hpp>
#include <policytrain/core/state.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/detail/torch_compat.hpp>

namespace policytrain::checkpoint {

namespace detail {
/// The parameters whose optimizer state this rank keeps under the context's parallel policy (checkpoint/disk_save.hpp).
template <class Ctx>
OwnsParameter owned_parameters(Ctx& ctx, bool all);
/// Disk's save steps (checkpoint/disk_save.hpp; compiled once with separate compilation), which see the context
/// through a SaveContext.
struct DiskSave;
/// One parameter's rows on this rank under stage 3 (the parallel policy's parameter_shards, as a sharded save
/// writes them into the rank's shard and the manifest's "model" layout).
struct ParameterRows {
  std::string name;            ///< the parameter's name in the model
  torch::Tensor rows;          ///< this rank's rows (padding stripped; may have none)
  std::vector<int64_t> shape;  ///< the whole parameter's shape
  int64_t chunk = 0;           ///< rows per rank before clipping
};
/// The Trainer context as Disk's save sees it: what the save reads of it, and its hooks as plain function pointers
/// (null: the context has no such hook), so that the save's code is compiled once, not for every Trainer (made by
/// SaveContext::of, checkpoint/disk_save.hpp).
struct SaveContext {
  torch::nn::Module& module;            ///< the model
  torch::optim::Optimizer& optimizer;   ///< the optimizer
  const TrainState& state;              ///< the Trainer's state
  bool is_main = true;                  ///< this process is the main rank
  int64_t world_size = 1;               ///< the parallel policy's ranks
  int64_t rank = 0;                     ///< this process's rank (0 under a policy without ranks)
  int64_t stage = 0;                    ///< the parallel policy's sharding stage (0: none)
  OwnsParameter owned{};                ///< owned_parameters(ctx, false): the state a sharded save writes here
  void* ctx = nullptr;                  ///< the context, the first argument of the functions below
  void (*flush_checks)(void*) = nullptr;
  void (*before_checkpoint)(void*, bool epoch_end) = nullptr;
  void (*before_save)(void*) = nullptr;
  void (*after_save)(void*) = nullptr;
  void (*set_sharded_save)(void*, bool on) = nullptr;  ///< the parallel policy's, when it has one
  /// Stage 3's parallel policy: this rank's rows of every parameter (empty while the model holds them whole), and
  /// export_weights' bytes of the module gathered onto rank 0 parameter by parameter (a collective; `each` sees
  /// every tensor there: ShardedDataParallel::export_bytes).
  std::vector<ParameterRows> (*parameter_shards)(void*) = nullptr;
  std::string (*export_bytes)(void*, const std::function<void(size_t, const std::string&, const torch::Tensor&)>& each) = nullptr;
  /// The Trainer state's entries that hold this rank's rows of a parameter (callbacks::Ema's average in a sharded
  /// save at stage 3: the policies' state_rows(), their keys prefixed as in the Trainer's state), with the
  /// parameter's name.
  std::vector<std::pair<std::string, std::string>> (*state_rows)(void*) = nullptr;
  bool (*agree_any)(void*, bool) = nullptr;
  StateDict (*state_dict)(void*) = nullptr;
  std::string (*with_evaluated_weights)(void*, const std::function<void()>&) = nullptr;
  /// The view of `ctx`, valid while `ctx` is.
  template <class Ctx>
  static SaveContext of(Ctx& ctx);
};
/// Disk's sharded writes that need no context (checkpoint/disk_save.hpp; compiled once with separate compilation).
struct ShardedWrites;
/// An asynchronous sharded save in flight (checkpoint/disk_save.hpp).
struct ShardedPending;
/// One sharded checkpoint's parts as this rank staged them (a save's, or a best save still owed under
/// on_write_error = retry_next_save, whose bytes every rank keeps to write them again at the next save).
/// `common` is filled by the write (rank 0; the background thread's with `async`), read once it is done.
struct ShardedPart {
  std::vector<std::pair<std::string, std::string>> files;  ///< the folders (names in the directory) and kinds, best first
  nlohmann::json meta;                                      ///< the checkpoint's metadata (rank 0)
  std::vector<nlohmann::json> common;                       ///< write_part's answer per folder (rank 0)
  nlohmann::json params;                                    ///< param_layout at the save's step
  nlohmann::json model;                                     ///< the manifest's "model" (stage 3's sharded parameters; else null)
  nlohmann::json state;                                     ///< the manifest's "state" (the Trainer state's rows; else null)
  int64_t step = 0, world = 1, stage = 0;
  std::function<void()> after;                              ///< rotation, once the manifests are written
  std::shared_ptr<const std::string> shard;                 ///< this rank's shard
  std::vector<int64_t> indices;                             ///< the global indices it holds
  std::shared_ptr<const std::string> payload;               ///< the common part (rank 0)
  std::shared_ptr<const std::string> best_pt;               ///< best.pt's bytes (rank 0, with best.ckpt; else null)
};


/// A best save (best.ckpt, best-e<N>.ckpt, and best.pt with best.ckpt) as the main rank staged it: what a failed
/// one keeps in memory under on_write_error = retry_next_save, to write the same bytes first at the next save.
struct BestWrite {
  std::vector<std::pair<std::string, std::string>> files;  ///< best.ckpt and/or best-e<N>.ckpt (kind "best")
  nlohmann::json meta;                                      ///< the save's metadata
  std::shared_ptr<const std::string> payload;              ///< the save's payload
  std::shared_ptr<const std::string> best_pt;              ///< best.pt's bytes (null: none with these files)
  int64_t epoch = 0, step = 0;
  std::function<void()> after;                              ///< the failed save's own `after` (rotation, top-k drop)
};

/// A single-file save's writes, in order: the best saves still owed, this save's best files with best.pt
/// (staged together, then committed), its other files (last, epoch-, step-), then its `after`.
struct SaveWrite {
  std::vector<BestWrite> owed;                               ///< earlier failed best saves, oldest first
  BestWrite best;                                            ///< this save's best files (none: no best file)
  std::vector<std::pair<std::string, std::string>> rest;     ///< its other files
  std::function<void()> after;                               ///< rotation, once everything is written
};
}  // namespace detail

/// Reads `file`, validates it against the live model, optimizer and Trainer state, and applies it (all or
/// nothing). `ctx` is a Trainer context. Throws CheckpointError naming the file and the problem.
template <class Ctx>
  requires(!std::same_as<std::remove_cv_t<Ctx>, LoadTarget>)
nlohmann::json load(Ctx& ctx, const std::filesystem::path& file) {
  return load(LoadTarget{ctx.module(), ctx.optimizer(), [&ctx] { return ctx.state_dict(); },
                         [&ctx](const StateDict& d) { ctx.load_state_dict(d); }, detail::owned_parameters(ctx, true)},
              file);
}

/// Lists the checkpoint files of `dir` (see Candidates); never throws for a bad file. Layout(dir).list().
inline Candidates list_checkpoints(const std::filesystem::path& dir) { return Layout(dir).list(); }

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

  /// What a checkpoint write that fails (ENOSPC, EFBIG, EIO, ...) does once the ranks agree that it failed. The
  /// previous file of that name is intact either way, and the error names the file and the system's reason.
  enum class OnWriteError {
    stop,             ///< every rank throws CheckpointError (the main rank's names the file): the run stops
    /// log it and train on; the next save writes again, a failed best save's files first (at fit end there is
    /// none: stop)
    retry_next_save,
  };

  /// What a resume does when this run's optimizer asks for other hyper-parameters than the checkpoint's (weight
  /// decay, Adam's betas, SGD's momentum, eps: every one but the lr, which the schedule reconciles:
  /// schedule::LrOptions::on_resume). LibTorch's Optimizer::load replaces a group's options with the file's, so
  /// without this the checkpoint's would win in silence.
  enum class Hyperparameters {
    refuse,  ///< the file belongs to another run: CheckpointError naming each difference (the default)
    keep,    ///< continue with the checkpoint's values, and say which this run's optimizer asked otherwise
    take,    ///< train on with this run's values (the optimizer's moments are still the checkpoint's), and say which
  };

  /// Settings of Disk.
  struct Options {
    std::filesystem::path directory{};  ///< where checkpoints go; empty: the policy is off
    bool last = true;                 ///< last.ckpt at every epoch end (and every `every_seconds`)
    bool best = false;                ///< best.ckpt whenever `monitor` improves
    /// The metric ("loss", "accuracy"), its mode and min_delta, for best/top_k. `= Monitor()`, not `{}`: with `{}`,
    /// GCC 12 at -O2 warns (-Wmaybe-uninitialized, a false positive) where a user writes Disk({.directory = ...}).
    Monitor monitor = Monitor();
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
    /// A resume whose optimizer asks for other hyper-parameters (weight decay, betas, momentum) than the file's:
    /// refuse it, keep the file's, or take this run's; kept and taken ones are said.
    Hyperparameters hyperparameters = Hyperparameters::refuse;
    bool export_final = true;         ///< write final.pt (torch.load-able weights) at fit end
    bool export_best = true;          ///< with best: write best.pt (torch.load-able) of the weights that scored, beside best.ckpt
    bool verbose = false;             ///< a line per file written
    OnWriteError on_write_error = OnWriteError::stop;  ///< a failed write: stop every rank, or retry at the next save
    std::FILE* log = stderr;          ///< where messages go (nullptr: nowhere)
    /// Messages from every rank; false: from the main rank only (every rank resumes from the same file and would
    /// say the same line, once per rank, in a job's one log). Sharded checkpoints: every rank's, always (each rank
    /// reads and writes a file of its own, and says what only it knows).
    bool log_every_rank = false;
    /// Sharded checkpoints (checkpoint/sharded.hpp): every rank writes its optimizer partition (ZeRO-1/2), rank 0
    /// the rest and the manifest last. Under a policy that does not partition the state, rank 0 writes one shard
    /// holding all of it. With `async`: every rank serializes its part at the step (a staged copy the next steps
    /// cannot change) and its background thread writes it, one save in flight; the manifest is written at the next
    /// save or at fit end (the settle point), once the ranks agree every part is on disk: until then the folder is
    /// no checkpoint. Not with `save.half_optimizer`. Loading needs no option.
    bool sharded = false;
  };

  Disk() = default;
  /// Validates `o.settings` as JSON nested at most kMaxMetaDepth - 1 deep; throws std::invalid_argument otherwise.
  explicit Disk(Options o);
  /// Copied and moved as its members are, out of line (checkpoint/disk_impl.hpp): the implicit members were
  /// generated in every file that builds a Trainer with a Disk.
  ///@{
  Disk(const Disk&);
  Disk(Disk&&) noexcept;
  Disk& operator=(const Disk&);
  Disk& operator=(Disk&&) noexcept;
  ~Disk();
  ///@}

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
  /// Waits for the asynchronous write in flight, if any; rethrows its failure (a CheckpointError). A sharded
  /// save's manifest is not written here (no collective): at the next save or at fit end.
  void wait() {
    if (writer_) writer_->wait();
  }
  /// Number of checkpoint files written so far.
  int64_t files_written() const { return files_written_ + (written_ ? written_->load() : 0); }
  /// Number of saves whose write failed (agreed by every rank) and that training went on after
  /// (on_write_error = retry_next_save).
  int64_t write_failures() const { return write_failures_; }
  /// The directory's layout (file names, listing, rotation).
  const Layout& layout() const { return layout_; }
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
    return fingerprint_of(ctx.module(), ctx.optimizer(),
                          static_cast<int64_t>(ctx.template policy<Category::parallel>().world_size()));
  }

  /// Best metric, best epoch, metric history and the top-k list, for resume.
  StateDict state_dict() const;
  /// Restores what state_dict() saved.
  void load_state_dict(const StateDict& d);

  // --- hooks ---
  /// Creates the directory, removes leftover temporary files, and resumes when `resume` is set. The work is
  /// fit_begin_erased's and after_resume's, through the context's view (compiled once with separate compilation):
  /// only what needs the Trainer's type is here.
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    if (!fit_begin_erased(detail::SaveContext::of(ctx), ctx.options().val_every_steps)) return;
    const auto& st = ctx.state();
    const bool at_zero = st.global_step == 0 && st.epoch == 0 && st.batch_in_epoch == 0;
    // A full resume continues the run that wrote the file (its run id, load_one); anything else is a new run.
    const bool continued = !o_.resume.empty() && resume(access(ctx));
    after_resume(continued, at_zero, ctx.is_main());
    last_saved_step_ = ctx.state().global_step;
    // Stage 3: final.pt is exported at fit end while the shards still hold the weights, gathered onto the main rank
    // parameter by parameter (ShardedDataParallel::export_weights), before the parallel policy gathers the whole
    // model on every rank; on_fit_end settles its failure as the export's.
    final_streamed_.reset();
    if constexpr (requires(std::function<void()> f) { ctx.template policy<Category::parallel>().before_unshard(f); }) {
      auto& par = ctx.template policy<Category::parallel>();
      if (o_.export_final)
        par.before_unshard([this, &ctx, &par] {
          if (ctx.state().stop_at_step) return;  // no final.pt (on_fit_end)
          std::string failure;
          try {
            const std::string evaluated =
                ctx.with_evaluated_weights([&] { par.export_weights(ctx.module(), layout_.path(Layout::final_export())); });
            if (ctx.is_main()) said_final(evaluated);
          } catch (const CheckpointError& e) {
            failure = e.what();
          }
          final_streamed_ = failure;
        });
    }
  }

  /// Writes step-N.ckpt every `every_steps` steps, else last.ckpt when `every_seconds` elapsed; after a step's
  /// validation (FitOptions::val_every_steps) also last.ckpt and best.ckpt when the metric improved, in one save.
  template <class Ctx>
  void on_step_end(Ctx& ctx) {
    if (!enabled()) return;
    bool validated = false;
    if constexpr (requires { ctx.step_validated(); }) validated = ctx.step_validated();
    step_end_erased(detail::SaveContext::of(ctx), validated);
  }

  /// Records the metrics and marks a best / top-k save for the epoch end.
  template <class Ctx>
  void on_validation_end(Ctx& ctx, const Metrics& m) {
    record_validation(ctx.state(), m);
  }

  /// Writes last, best and periodic epoch files; rotates epoch-/step- files.
  template <class Ctx>
  void on_epoch_end(Ctx& ctx) {
    // An epoch cut short (max_steps) is saved mid-epoch; a finished one resumes at the next epoch. The Trainer
    // says which (epoch_cut), since a loader of unknown length gives no batch count to compare with.
    if (enabled()) epoch_end_erased(detail::SaveContext::of(ctx), !ctx.epoch_cut());
  }

  /// Writes a final last.ckpt if steps were taken since, and exports final.pt: the weights the evaluation uses
  /// (the context's with_evaluated_weights; callbacks::Ema's average with Ema, else the trained weights).
  template <class Ctx>
  void on_fit_end(Ctx& ctx) {
    if (enabled()) fit_end_erased(detail::SaveContext::of(ctx));
  }

  /// Writes the current state to `files` (names in the directory, with their kind). `epoch_end`: the epoch is
  /// complete, so the checkpoint resumes at the start of the next one. `after` runs once the files are written
  /// (rotation; not run when the write fails). Every rank calls it; the main rank writes. With `async`, the state
  /// is serialized now (a copy on the host) and the files are written by the background thread; a failure of that
  /// write is found by the next save or at fit end. A failed write: see on_write_error (the ranks agree on it, one
  /// agreement per save, so a failure raises on every rank at the same save).
  template <class Ctx>
  void save(Ctx& ctx, const std::vector<std::pair<std::string, std::string>>& files, bool epoch_end,
            std::function<void()> after = {}) {
    save_erased(detail::SaveContext::of(ctx), files, epoch_end, std::move(after));
  }

 private:
  friend struct detail::DiskSave;
  friend struct detail::ShardedWrites;
  // on_validation_end's work, which needs only the Trainer's state: compiled once with separate compilation.
  void record_validation(TrainState& s, const Metrics& m);
  using Clock = std::chrono::steady_clock;

  // The context as the non-template members see it (compiled once with separate compilation, whatever the
  // Trainer): the model, the optimizer, and the Trainer's state dict.
  using Access = LoadTarget;
  template <class Ctx>
  static Access access(Ctx& ctx) {
    return {ctx.module(), ctx.optimizer(), [&ctx] { return ctx.state_dict(); },
            [&ctx](const StateDict& d) { ctx.load_state_dict(d); }, detail::owned_parameters(ctx, true)};
  }

  /// The hooks' work, through the context's view (compiled once with separate compilation, whatever the Trainer;
  /// checkpoint/disk_save.hpp). fit_begin_erased returns false when the policy is off (nothing more to do);
  /// after_resume follows resume() (`continued`: it loaded a full checkpoint).
  bool fit_begin_erased(const detail::SaveContext& c, int64_t val_every_steps);
  void after_resume(bool continued, bool at_zero, bool is_main);
  void step_end_erased(const detail::SaveContext& c, bool validated);
  void epoch_end_erased(const detail::SaveContext& c, bool finished);
  void fit_end_erased(const detail::SaveContext& c);
  /// Every rank, after a save's write (`failure`: the main rank's, "" elsewhere) or at fit end: the ranks agree
  /// whether it failed; then on_write_error stops every rank (CheckpointError) or logs it and goes on.
  void settle_write(const detail::SaveContext& c, const std::string& failure) {
    if (!c.agree_any(c.ctx, !failure.empty())) return;
    write_failed(failure);
  }

  /// save's work, through the context's view (compiled once with separate compilation, whatever the Trainer).
  void save_erased(const detail::SaveContext& c, const std::vector<std::pair<std::string, std::string>>& files,
                   bool epoch_end, std::function<void()> after);
  /// The settle point of an asynchronous sharded save (detail::DiskSave::settle), at fit end.
  void settle_sharded(const detail::SaveContext& c);
  /// The main rank's part of save: the payload, then write_checkpoint. Returns the write's failure ("": none).
  std::string write_main(const detail::SaveContext& c, const std::vector<std::pair<std::string, std::string>>& files,
                         bool epoch_end, std::function<void()> after);

  /// `files` with the best ones first: a save writes them first, and its other files only once they are written
  /// (a last.ckpt that records a best no best.ckpt holds would be a disagreement a resume inherits).
  static std::vector<std::pair<std::string, std::string>> best_first(std::vector<std::pair<std::string, std::string>> files) {
    std::stable_partition(files.begin(), files.end(), [](const auto& f) { return f.second == "best"; });
    return files;
  }

  /// Whether a best file `name` still owed from a failed save must still be written, at a save of `files`: not
  /// best.ckpt when this save writes a newer one; not best-e<N>.ckpt once epoch N left the top k.
  bool still_owed(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) const;
  /// Drops from `owed` (BestWrite or ShardedPart entries; `entry(e)` is the entry) what a save of `files` makes
  /// obsolete (still_owed); best.pt goes with best.ckpt.
  template <class Entries, class Entry>
  void prune_owed(Entries& owed, const std::vector<std::pair<std::string, std::string>>& files, Entry entry) const {
    for (auto& e : owed) {
      auto& b = entry(e);
      std::erase_if(b.files, [&](const auto& f) { return !still_owed(f.first, files); });
      if (std::none_of(b.files.begin(), b.files.end(), [](const auto& f) { return f.first == Layout::best(); }))
        b.best_pt.reset();
    }
    std::erase_if(owed, [&](auto& e) { return entry(e).files.empty(); });
  }


  /// fingerprint's work, for a parallel policy of `world_size` ranks.
  nlohmann::json fingerprint_of(torch::nn::Module& module, torch::optim::Optimizer& opt, int64_t world_size) const;
  /// The agreed failure's consequence (`failure`: "" on a rank other than the main one).
  void write_failed(const std::string& failure);
  /// The asynchronous write in flight finished; its failure ("": none, or no writer).
  std::string finish_async_write();

  /// save's work past the payload: the metadata, then the files (or the asynchronous writer's job, after the
  /// previous one finished). Returns the failure of this write (synchronous) or of the previous one (asynchronous).
  std::string write_checkpoint(const std::vector<std::pair<std::string, std::string>>& files, int64_t epoch, int64_t batch,
                               const TrainState& s, std::string payload, std::string best_pt,
                               nlohmann::json fresh_fingerprint, std::function<void()> after, Clock::time_point t0,
                               const std::string& evaluated);
  /// A single-file save's writes (synchronous, or the background writer's job): see SaveWrite. On a failure,
  /// `owed_after` gets the best saves not written (this one's included, with the save's `after`) and the
  /// CheckpointError propagates.
  void run_write(detail::SaveWrite& w, const nlohmann::json& meta, const std::string& payload, int64_t epoch,
                 int64_t step, std::vector<detail::BestWrite>& owed_after, std::atomic<int64_t>& written) const;
  /// Writes one best save: its files and best.pt staged, then committed together.
  void write_best(const detail::BestWrite& b, std::atomic<int64_t>& written) const;

  /// A save's metadata (every file's, and a sharded checkpoint's manifest).
  nlohmann::json make_meta(int64_t epoch, int64_t batch, const TrainState& s, nlohmann::json fresh_fingerprint,
                           const std::string& evaluated);
  /// The main rank's common part of a sharded save into each folder of `files`; write_part's answers.
  std::vector<nlohmann::json> write_common(const std::vector<std::pair<std::string, std::string>>& files,
                                           const nlohmann::json& meta, const std::string& payload, int64_t step);
  /// The main rank, once every rank's shard is written: each folder's manifest (`params`: param_layout's), then
  /// `after`. Returns the failure.
  std::string finish_sharded(const std::vector<std::pair<std::string, std::string>>& files, const nlohmann::json& meta,
                             const std::vector<nlohmann::json>& common, int64_t step, int64_t world, int64_t stage,
                             nlohmann::json params, const nlohmann::json& model, const nlohmann::json& state,
                             const std::function<void()>& after, const std::string* best_pt);

  void write_files(const std::vector<std::pair<std::string, std::string>>& files, nlohmann::json& meta,
                   const std::string& payload, int64_t epoch, int64_t step, std::atomic<int64_t>* written) const;

  template <class... A>
  void say(fmt::format_string<A...> f, A&&... a) const {
    if (!o_.log || quiet_) return;
    std::fprintf(o_.log, "%s\n", policytrain::detail::format(f, std::forward<A>(a)...).c_str());
    std::fflush(o_.log);
  }

  /// Says that final.pt holds the weights `evaluated` names (the context's with_evaluated_weights).
  void said_final(const std::string& evaluated) const {
    const auto file = layout_.path(Layout::final_export());
    if (evaluated == "model") say("policytrain::checkpoint: exported the final weights to {}", file.string());
    else say("policytrain::checkpoint: exported the evaluated weights ({}) to {}", evaluated, file.string());
  }

  /// Why `file` (metadata `meta`) is another run's, or "" when its fingerprint matches this run's (or it has none).
  std::string other_run(const std::filesystem::path& file, const nlohmann::json& meta) const;

  /// Whether `file`'s fingerprint matches this run's (or it records none); quiet, never throws (a malformed
  /// fingerprint does not match; load_one reports it).
  bool same_fingerprint(const std::filesystem::path& file, const nlohmann::json& meta) const;

  /// Loads `file` (metadata `meta`): everything, or the weights only. Throws CheckpointError.
  void load_one(const Access& a, const std::filesystem::path& file, const nlohmann::json& meta);
  /// After a resume loaded the file's optimizer over this run's (`asked`: each group's options before the load):
  /// the hyper-parameters that differ from the ones the file's fingerprint `recorded` (the run's base values; the
  /// loaded options where it records none), kept or taken (Options::hyperparameters) and said.
  void reconcile_hyperparameters(torch::optim::Optimizer& opt,
                                 const std::vector<std::unique_ptr<torch::optim::OptimizerOptions>>& asked,
                                 const nlohmann::json& recorded);
  /// Parameter group g of a fingerprint's optimizer (its hyper-parameters, params and elements); nullptr if none.
  static const nlohmann::json* recorded_group(const nlohmann::json& fingerprint, size_t g);
  /// The fingerprint as compared: without the groups' hyper-parameters when a resume keeps or takes them.
  nlohmann::json compared(const nlohmann::json& fingerprint) const;

  /// Returns whether a full checkpoint was loaded (the run continues; false: weights only, or nothing to load).
  bool resume(const Access& a);

  /// A fresh run (new run id, step 0): the checkpoint files (*.ckpt, final.pt) already in the directory are another
  /// run's. `existing`: rotate moves them to `previous-<run id>/` (the id of the newest readable one; a time stamp
  /// when none records an id), refuse throws. Only the main rank, which writes the files, looks: no collective
  /// here, since ranks with rank-local directories may resume differently (the parallel policy's agreement on the
  /// starting state, which comes later, reports that); a refusal on the main rank stops the others at their next
  /// collective, as any error of the main rank's.
  void set_aside_other_runs();

  Options o_;
  Layout layout_;
  std::vector<std::pair<double, double>> history_;
  std::vector<std::pair<double, int64_t>> top_;  // the k best (value, epoch), best first
  double best_metric_ = std::numeric_limits<double>::quiet_NaN();
  int64_t best_epoch_ = -1;
  bool pending_best_ = false, pending_top_ = false;
  std::filesystem::path resumed_from_;
  Clock::time_point last_write_{};
  int64_t last_saved_step_ = -1;
  int64_t files_written_ = 0;
  int64_t write_failures_ = 0;
  bool quiet_ = false;                              // not the main rank of an unsharded save; log_every_rank off
  bool finishing_ = false;                          // in on_fit_end: a failed write stops whatever on_write_error
  nlohmann::json fingerprint_;
  std::string run_id_;                              // this run's id (see run_id())
  std::shared_ptr<RunLock> lock_;                   // the run directory's lock while a fit runs (main rank);
                                                    // declared first of these: released after the writer ends
  std::shared_ptr<detail::AsyncWriter> writer_;             // asynchronous mode: the background writer (made on first save)
  std::shared_ptr<std::atomic<int64_t>> written_;   // files the writer has written
  std::shared_ptr<detail::ShardedPending> pending_;  // an asynchronous sharded save awaiting its settle point
  // Best saves that failed under retry_next_save, written first at the next save: the main rank's (single files),
  // the background job's failures (collected by finish_async_write), every rank's parts (sharded).
  std::vector<detail::BestWrite> owed_;
  std::shared_ptr<std::vector<detail::BestWrite>> owed_slot_ = std::make_shared<std::vector<detail::BestWrite>>();
  std::vector<std::shared_ptr<detail::ShardedPart>> sharded_owed_;
  double last_save_seconds_ = 0;
  std::optional<std::string> final_streamed_;  // stage 3: final.pt exported before fit end gathered the model; its failure
};

}  // namespace policytrain::checkpoint

// Disk's non-template members: header-only here, in <policytrain/src.hpp> with separate compilation.
#include <policytrain/checkpoint/disk_impl.hpp>
// Disk's save steps that need its context.
#include <policytrain/checkpoint/disk_save.hpp>
