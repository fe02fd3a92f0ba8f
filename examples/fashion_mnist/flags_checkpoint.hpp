#pragma once
// Flags of checkpoints, EMA, early stopping and divergence rollback for the main job.
//   --save last,best,every:N,steps:N,minutes:M   what to write (default: last)
//   --checkpoint-dir DIR (default RUN_DIR/checkpoints)  --keep K  --top-k K  --monitor loss|accuracy  --mode min|max
//   --half-weights  --half-optimizer  --resume [PATH] (no value: the newest good checkpoint of the directory)
//   --resume-weights-only (with --resume: take the weights only, start a new run)  --async-checkpoint
//   --shard-checkpoints (with --zero 1|2: every rank writes its optimizer partition, rank 0 a manifest last;
//                        with --zero 3 its rows of every parameter too)
//   --ema [--ema-decay D --ema-tau T --ema-every K]  --patience P [--min-delta D]  --rollback [--rollback-factor F]  --no-export
//   --no-preemption  --requeue  --requeue-signal USR1|USR2|none   (SIGTERM / SIGUSR1: stop at the next step, save,
//   exit 75; the requeue signal with --requeue also requeues the Slurm job)
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <policytrain/callbacks/divergence_rollback.hpp>
#include <policytrain/callbacks/early_stopping.hpp>
#include <policytrain/callbacks/ema.hpp>
#include <policytrain/callbacks/preemption.hpp>
#include <policytrain/checkpoint/disk.hpp>

namespace fmnist {

struct CheckpointFlags {
  std::vector<std::string> save{"last"};
  std::filesystem::path dir;
  std::string monitor = "loss";
  std::string mode;  // "" = min for loss, max for accuracy
  int64_t keep = 0;
  int64_t top_k = 1;
  bool half_weights = false;
  bool half_optimizer = false;
  std::string resume;
  bool resume_weights_only = false;
  bool async_checkpoint = false;
  bool log_every_rank = false;
  bool shard_checkpoints = false;
  policytrain::checkpoint::RunInfo run{};  // not a flag: the batch and data sizes main resolves
  bool no_export = false;
  bool ema = false;
  double ema_decay = 0.9999;
  double ema_tau = 2000;
  int64_t ema_every = 1;
  int64_t patience = 0;
  double min_delta = 0;
  bool rollback = false;
  double rollback_factor = 0.5;
  bool no_preemption = false;
  bool requeue = false;
  std::string requeue_signal = "USR1";

  void add(CLI::App& app) {
    app.add_option("--save", save, "Checkpoints to write: last, best, every:N (epochs), steps:N, minutes:M, none")
        ->delimiter(',');
    app.add_option("--checkpoint-dir", dir, "Checkpoint directory (default: RUN_DIR/checkpoints)");
    app.add_option("--monitor", monitor, "Metric for best checkpoints and early stopping")->check(CLI::IsMember({"loss", "accuracy"}));
    app.add_option("--mode", mode, "min or max (default: min for loss, max for accuracy)")->check(CLI::IsMember({"min", "max"}));
    app.add_option("--keep", keep, "Keep the newest K epoch/step checkpoints (0: all)")->check(CLI::NonNegativeNumber);
    app.add_option("--top-k", top_k, "With best: keep the K best checkpoints")->check(CLI::PositiveNumber);
    app.add_flag("--half-weights", half_weights, "Store weights as fp16 (half the size; resuming is then not bit-exact)");
    app.add_flag("--half-optimizer", half_optimizer, "Store the optimizer's moments as bf16 too");
    // Off unless given: "--resume" alone resumes from the newest good checkpoint ("auto", the value CLI11 gives an
    // option without one), "--resume PATH" from that file. The help shows "[PATH]", not the "auto" it stands for.
    app.add_option("--resume", resume,
                   "Resume a run (default: off, a fresh run): without a value from the newest good checkpoint of the "
                   "checkpoint directory, or from PATH")
        ->expected(0, 1)->default_str("auto")->option_text("[PATH]");
    app.add_flag("--resume-weights-only", resume_weights_only,
                 "With --resume: load the model's weights only (even from another run's checkpoint) and start a new run");
    app.add_flag("--async-checkpoint", async_checkpoint, "Write checkpoints in a background thread");
    app.add_flag("--log-every-rank", log_every_rank,
                 "Every rank prints its checkpoint lines (default: rank 0 only, and each rank about its own shard)");
    app.add_flag("--shard-checkpoints", shard_checkpoints,
                 "Sharded checkpoints: a folder per checkpoint, each rank writing its own optimizer partition (with "
                 "--zero 1|2; with --zero 3 its rows of every parameter too), rank 0 a manifest with every file's "
                 "SHA-256 last. They resume at the same number of ranks, "
                 "or with --elastic at any (each rank reads the partition it owns at the new world size)");
    app.add_flag("--no-export", no_export, "Do not write RUN_DIR/checkpoints/final.pt (torch.load-able weights)");
    app.add_flag("--ema", ema, "Evaluate with an exponential moving average of the weights");
    // [0, 1): CLI::Range(0.0, 0.999999999) refused 1 while its help read "[0 - 1]".
    app.add_option("--ema-decay", ema_decay, "EMA decay, in [0, 1)")
        ->check(CLI::Validator(
            [](std::string& s) -> std::string {
              double v = 0;
              if (!CLI::detail::lexical_cast(s, v) || !(v >= 0 && v < 1)) return "Value " + s + " not in [0, 1)";
              return {};
            },
            "in [0, 1)"));
    app.add_option("--ema-tau", ema_tau, "EMA decay ramp, in steps")->check(CLI::NonNegativeNumber);
    app.add_option("--ema-every", ema_every,
                   "Move the EMA every K steps, by the decay to the power K (fewer eager launches after a CUDA graph's "
                   "replay)")
        ->check(CLI::PositiveNumber);
    app.add_option("--patience", patience, "Stop after P epochs without improvement of --monitor (0: never)")->check(CLI::NonNegativeNumber);
    app.add_option("--min-delta", min_delta, "Smallest change that counts as an improvement")->check(CLI::NonNegativeNumber);
    app.add_flag("--rollback", rollback, "On a non-finite loss, reload the last good state and lower the lr");
    app.add_option("--rollback-factor", rollback_factor, "lr factor of each rollback")->check(CLI::Range(0.0, 1.0));
    app.add_flag("--no-preemption", no_preemption,
                 "Do not handle SIGTERM and SIGUSR1 (by default they stop the run at the next optimizer step on every "
                 "rank, which saves a mid-epoch last.ckpt that --resume continues exactly, and exit with code 75)");
    app.add_flag("--requeue", requeue,
                 "Under Slurm: after a stop by the requeue signal (--requeue-signal), `scontrol requeue "
                 "$SLURM_JOB_ID` once every rank has saved (the job runs again: run it with --resume; submit it with "
                 "sbatch --requeue). A stop by SIGTERM (scancel, the time limit) is never requeued");
    app.add_option("--requeue-signal", requeue_signal,
                   "The stop signal that asks for a requeue (with --requeue; sbatch --signal=USR1@<seconds>), or "
                   "none. USR2 is handled from the start of training, USR1 and TERM from the first line of main")
        ->check(CLI::IsMember({"USR1", "USR2", "none"}));
  }

  policytrain::Monitor monitor_spec() const {
    return {.metric = monitor,
            .mode = mode.empty() ? policytrain::Monitor::default_mode(monitor) : policytrain::parse_mode(mode),
            .min_delta = min_delta};
  }

  /// The checkpoint policy; `settings` is the run's command line as JSON; `run` (set by main) is what the run
  /// fingerprint records beyond the model and the optimizer (batch size, data size).
  policytrain::checkpoint::Disk make_checkpoint(const std::filesystem::path& run_dir, std::string settings) const {
    policytrain::checkpoint::Disk::Options o;
    o.directory = dir.empty() ? run_dir / "checkpoints" : dir;
    o.last = false;
    o.monitor = monitor_spec();
    bool none = false;
    for (const auto& s : save) {
      auto number = [&](const std::string& prefix) { return std::stod(s.substr(prefix.size())); };
      if (s == "last") o.last = true;
      else if (s == "best") o.best = true;
      else if (s == "none") none = true;
      else if (s.starts_with("every:")) o.every_epochs = static_cast<int64_t>(number("every:"));
      else if (s.starts_with("steps:")) o.every_steps = static_cast<int64_t>(number("steps:"));
      else if (s.starts_with("minutes:")) o.every_seconds = 60 * number("minutes:"), o.last = true;
      else throw std::invalid_argument("--save: '" + s + "' is unknown; use last, best, every:N, steps:N, minutes:M or none");
    }
    if (none && resume.empty()) o.directory.clear();  // the policy is off
    o.keep = keep;
    o.top_k = top_k;
    o.save = {.half_weights = half_weights, .half_optimizer = half_optimizer};
    o.resume = resume;
    if (resume_weights_only && resume.empty())
      throw std::invalid_argument("--resume-weights-only: needs --resume [PATH] (the checkpoint to take the weights from)");
    o.weights_only = resume_weights_only;
    o.async = async_checkpoint;
    o.sharded = shard_checkpoints;
    o.log_every_rank = log_every_rank;
    o.run = run;
    o.settings = std::move(settings);
    o.export_final = !no_export && !none;
    return policytrain::checkpoint::Disk(std::move(o));
  }
  policytrain::callbacks::Ema make_ema() const {
    return policytrain::callbacks::Ema({.enabled = ema, .decay = ema_decay, .tau = ema_tau, .every = ema_every});
  }
  policytrain::callbacks::EarlyStopping make_early_stopping() const {
    return policytrain::callbacks::EarlyStopping(
        {.enabled = patience > 0, .monitor = monitor_spec(), .patience = std::max<int64_t>(1, patience)});
  }
  // [snippet:preemption]
  policytrain::callbacks::Preemption make_preemption() const {
    const int requeue_sig = requeue_signal == "USR1" ? SIGUSR1 : requeue_signal == "USR2" ? SIGUSR2 : 0;
    std::vector<int> signals{SIGTERM, SIGUSR1};
    if (requeue_sig == SIGUSR2) signals.push_back(SIGUSR2);
    return policytrain::callbacks::Preemption(
        {.enabled = !no_preemption, .signals = signals, .requeue_signal = requeue_sig});
  }
  // [/snippet:preemption]
  policytrain::callbacks::DivergenceRollback make_rollback() const {
    return policytrain::callbacks::DivergenceRollback({.enabled = rollback, .lr_factor = rollback_factor});
  }
  /// What the precision policy does on a non-finite loss.
  policytrain::NonFinite on_nonfinite() const { return rollback ? policytrain::NonFinite::rollback : policytrain::NonFinite::error; }

  nlohmann::json describe() const {
    return {{"checkpoint", {{"name", "checkpoint::Disk"}, {"save", save}, {"keep", keep}, {"top_k", top_k},
                            {"half_weights", half_weights}, {"half_optimizer", half_optimizer}, {"resume", resume},
                            {"resume_weights_only", resume_weights_only}, {"async", async_checkpoint},
                            {"sharded", shard_checkpoints}}},
            {"ema", {{"enabled", ema}, {"decay", ema_decay}, {"tau", ema_tau}, {"every", ema_every}}},
            {"early_stopping", {{"enabled", patience > 0}, {"patience", patience}, {"monitor", monitor}, {"min_delta", min_delta}}},
            {"rollback", {{"enabled", rollback}, {"lr_factor", rollback_factor}}},
            {"preemption", {{"enabled", !no_preemption}, {"requeue", requeue}, {"requeue_signal", requeue_signal}, {"exit_code", policytrain::callbacks::Preemption::exit_code}}}};
  }
};

}  // namespace fmnist
