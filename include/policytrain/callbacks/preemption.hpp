#pragma once
/// \file
/// callbacks::Preemption — a run told to stop by a signal (Slurm's SIGTERM, or the SIGUSR1 it sends a configurable
/// time before the end of a job with `--signal`; Kubernetes' SIGTERM before its grace period ends) stops at the next
/// optimizer step on every rank at once and leaves an exact mid-epoch checkpoint, from which `resume = "auto"`
/// continues bit for bit.
///
/// The handlers only set a flag (a lock-free atomic: async-signal-safe); nothing is written from inside a handler
/// (a checkpoint written there fails now and then: Lightning #20347, #20542, #21406). At each step's end
/// (on_step_end, every `check_every_steps` steps) the ranks agree on the signal (`ctx.agree_min` of its negated
/// number: one all-reduce of one integer under data parallelism; nothing on one process); once any rank saw a signal, every rank sets
/// TrainState::stop_at_step at that same step, the Trainer cuts the epoch there (no validation, no epoch-end hook)
/// and the checkpoint policy's fit end writes last.ckpt mid-epoch (checkpoint::Disk with `last`, the default). `fit`
/// returns with FitResult::stopped_at_step; the program then exits with Preemption::exit_code (75, EX_TEMPFAIL) and,
/// under Slurm, requeues its job first when the stop came from the requeue signal (Options::requeue_signal, SIGUSR1
/// as Lightning's: requeue_asked(), requeue_slurm_job()); SIGTERM (scancel, the time limit) saves and ends without
/// requeue. A signal during validation or a checkpoint write is acted on at the next step's end; one during
/// start-up too, once catch_early() has installed the handlers from the first line of main (without it, the signal's
/// default action ends the process before the fit: Slurm's FAILED 138 for SIGUSR1). A second signal only sets the
/// flag again. Without catch_early(), the handlers that were there before are restored when the fit ends, so a
/// signal after it acts as it would without us. With it, the program asked that no stop signal end it by default
/// action, and the flag-setting handlers stay until release_early() or the process's end: a signal after the fit (Slurm's
/// time-limit warning while the program evaluates on the test set or writes its summary) is kept, pending(), not
/// acted on: the program finishes what it does and exits with its own code (a finished Slurm job stays COMPLETED
/// instead of FAILED 138), or the next fit stops at its first step.
/// Hooks: on_fit_begin (install), on_step_end (agree, stop), on_fit_end (restore, report). Cost per step: a load of
/// the flag, and with data parallelism the agreement's all-reduce (bench/RESULTS.md, "Preemption").
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::callbacks {

namespace detail {
/// The last signal received (0: none) and how many, shared by every Preemption of the process: a handler sees
/// only globals.
inline std::atomic<int> preemption_signal{0};
inline std::atomic<int> preemption_count{0};
/// The handlers catch_early() replaced (empty: not called, or handed back by release_early()).
inline std::vector<std::pair<int, struct sigaction>> preemption_early;
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");
extern "C" inline void preemption_handler(int sig) {
  preemption_signal.store(sig, std::memory_order_relaxed);
  preemption_count.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

/// Stops at the next step on a signal, on every rank at once, leaving a mid-epoch checkpoint (see the file comment).
class Preemption {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::Preemption";
  /// The exit code a preempted program returns (EX_TEMPFAIL from <sysexits.h>: "try again later"); the main job's
  /// --help names it.
  static constexpr int exit_code = 75;

  /// Settings of Preemption.
  struct Options {
    bool enabled = true;                         ///< false: no handler, nothing per step
    std::vector<int> signals{SIGTERM, SIGUSR1};  ///< the signals that ask for a stop
    /// The stop signal that asks for a requeue as well (requeue_asked(); Slurm's `--signal=USR1@<seconds>`, as
    /// Lightning's SLURMEnvironment); the others (SIGTERM: scancel, the time limit) stop without one. 0: none; a
    /// signal not in `signals` never stops a fit, so never asks either.
    int requeue_signal = SIGUSR1;
    int64_t check_every_steps = 1;               ///< agree every n optimizer steps (the stop waits up to n - 1 more)
    std::FILE* log = stderr;                     ///< where the stop is said (main rank; nullptr: nowhere)
  };

  Preemption() = default;
  /// Throws std::invalid_argument for check_every_steps < 1 or a signal that cannot be caught.
  explicit Preemption(Options o) : o_(std::move(o)) {
    if (o_.check_every_steps < 1)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::callbacks::Preemption",
          policytrain::detail::format("check_every_steps is {}; expected >= 1", o_.check_every_steps)));
    for (int s : o_.signals)
      if (s <= 0 || s >= NSIG || s == SIGKILL || s == SIGSTOP)
        throw std::invalid_argument(policytrain::detail::error_message(
            "policytrain::callbacks::Preemption",
            policytrain::detail::format("signal {} cannot be caught; expected a catchable signal such as "
                                        "SIGTERM ({}) or SIGUSR1 ({})",
                                        s, SIGTERM, SIGUSR1)));
  }
  Preemption(const Preemption&) = delete;
  Preemption& operator=(const Preemption&) = delete;
  /// Takes over `o`'s settings and the handlers it installed (restored by this one).
  Preemption(Preemption&& o) noexcept : o_(std::move(o.o_)), previous_(std::move(o.previous_)) { o.previous_.clear(); }
  Preemption& operator=(Preemption&&) = delete;
  ~Preemption() { restore(); }

  /// The settings.
  const Options& options() const { return o_; }
  /// The signal that stopped the last fit (0: none), on every rank (the largest number when ranks saw different
  /// ones), whichever ranks it reached.
  int stopped_by() const { return stopped_by_; }
  /// The optimizer step at which the last fit stopped (-1: it did not).
  int64_t stopped_at() const { return stopped_at_; }
  /// Signals received while a fit ran (a second one during the save included; with catch_early(), those of the
  /// start-up too).
  int signals_received() const { return received_; }
  /// Whether the last fit stopped on the requeue signal (Options::requeue_signal): the job should run again.
  bool requeue_asked() const { return stopped_by_ != 0 && stopped_by_ == o_.requeue_signal; }

  /// Installs the flag-setting handler for `signals` now, from the first line of main: a signal during start-up
  /// (parsing, data loading, process-group setup) is kept and acted on at the first step's end of the next fit,
  /// instead of its default action ending the process. The handlers stay after each fit (a signal then is
  /// pending(), not acted on) until release_early(); a fit whose Preemption does not stop on one of them (not in
  /// its Options::signals, or disabled) hands that one back at its start. Calling it again changes nothing.
  static void catch_early(const std::vector<int>& signals = {SIGTERM, SIGUSR1}) {
    if (!detail::preemption_early.empty()) return;
    detail::preemption_signal.store(0);  // what an earlier fit of this process left
    detail::preemption_count.store(0);
    for (int s : signals) {
      struct sigaction sa {}, old {};
      sa.sa_handler = &detail::preemption_handler;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      if (::sigaction(s, &sa, &old) == 0) detail::preemption_early.push_back({s, old});
    }
  }

  /// Installs the handlers; a signal that came before (between two fits) is forgotten, unless catch_early()
  /// installed them: then one that came during start-up stops this fit at its first step.
  template <class Ctx>
  void on_fit_begin(Ctx&) {
    stopped_by_ = 0;
    stopped_at_ = -1;
    received_ = 0;
    const bool early = !detail::preemption_early.empty();
    if (!o_.enabled) {
      // Not ours to act on: a signal kept since start-up gets its previous action now, as it would have then.
      restore_early();
      if (const int sig = detail::preemption_signal.exchange(0); early && sig != 0) std::raise(sig);
      return;
    }
    if (!early) {
      detail::preemption_signal.store(0);
      detail::preemption_count.store(0);
    }
    install();
  }

  /// Every `check_every_steps` steps: agrees on the flag across the ranks and, if any rank saw a signal, asks the
  /// Trainer to stop after this step (every rank, the same step).
  template <class Ctx>
  void on_step_end(Ctx& ctx) {
    if (!o_.enabled || ctx.state().global_step % o_.check_every_steps != 0) return;
    const int here = detail::preemption_signal.load(std::memory_order_relaxed);
    // One all-reduce: the smallest negated signal number is the largest signal any rank saw (0: none), so that
    // every rank records and says the signal, not only the ranks it reached first (a launcher forwards it to each
    // rank in turn; the agreement may come between two of them).
    const int sig = static_cast<int>(-ctx.agree_min(-static_cast<int64_t>(here)));
    if (sig == 0) return;
    ctx.state().stop_at_step = true;
    stopped_by_ = sig;
    stopped_at_ = ctx.state().global_step;
    if (o_.log && ctx.is_main()) {
      std::fprintf(o_.log,
                   "policytrain::callbacks::Preemption: %s at optimizer step %lld (epoch %lld, batch %lld): stopping "
                   "there on every rank; the checkpoint policy saves the run mid-epoch\n",
                   policytrain::detail::format("signal {} ({}){}", sig, signal_name(sig),
                                               here ? "" : " on another rank")
                       .c_str(),
                   static_cast<long long>(stopped_at_), static_cast<long long>(ctx.state().epoch),
                   static_cast<long long>(ctx.state().batch_in_epoch));
      std::fflush(o_.log);
    }
  }

  /// Restores the handlers that were there before the fit (those of catch_early() stay: a later signal is pending()).
  template <class Ctx>
  void on_fit_end(Ctx&) {
    if (detail::preemption_early.empty()) {
      received_ = detail::preemption_count.load();
    } else {
      // This fit's signals are counted here; the flag it stopped on is consumed; one that came after its last
      // check stays pending, for the program or the next fit.
      received_ = detail::preemption_count.exchange(0);
      if (stopped_by_ != 0) detail::preemption_signal.store(0);
    }
    restore();
  }

  /// A stop signal received and not acted on (0: none): with catch_early(), one that came after the last fit's
  /// last check (during its validation, its save, or after it), which the handlers kept instead of letting it end
  /// the process.
  static int pending() { return detail::preemption_signal.load(std::memory_order_relaxed); }

  /// Hands back the handlers catch_early() replaced, those from before it (a signal pending() stays recorded and
  /// gets no action). A program that wants a later signal to end it by its default action calls this after its
  /// last fit.
  static void release_early() { restore_early(); }

  /// "SIGTERM", "SIGUSR1", ... (or "signal N").
  static std::string signal_name(int sig) {
    switch (sig) {
      case SIGTERM: return "SIGTERM";
      case SIGUSR1: return "SIGUSR1";
      case SIGUSR2: return "SIGUSR2";
      case SIGINT: return "SIGINT";
      case SIGHUP: return "SIGHUP";
      case SIGCONT: return "SIGCONT";
      default: return "signal " + std::to_string(sig);
    }
  }

  /// Under Slurm (SLURM_JOB_ID set): `scontrol requeue <job id>`, as Lightning's auto-requeue, so that the job starts
  /// again and resumes from the checkpoint. Call it on one rank after fit returned with stopped_at_step. Returns
  /// scontrol's exit status; throws std::runtime_error outside Slurm, or when scontrol cannot be started.
  static int requeue_slurm_job() {
    const char* id = std::getenv("SLURM_JOB_ID");
    if (!id || !*id)
      throw std::runtime_error(
          policytrain::detail::error_message("policytrain::callbacks::Preemption::requeue_slurm_job",
                                             "SLURM_JOB_ID is not set; "
                                             "requeueing needs a Slurm job (run under sbatch)"));
    const std::string job = id;
    const pid_t pid = ::fork();
    if (pid < 0)
      throw std::runtime_error(
          policytrain::detail::error_message("policytrain::callbacks::Preemption::requeue_slurm_job", "fork failed"));
    if (pid == 0) {
      ::execlp("scontrol", "scontrol", "requeue", job.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
    }
    const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (rc == 127)
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::callbacks::Preemption::requeue_slurm_job",
          policytrain::detail::format("could not run `scontrol requeue {}` (scontrol not "
                                      "on PATH)",
                                      job)));
    return rc;
  }

 private:
  void install() {
    restore();
    // The handlers of catch_early() stay ours after the fit (they are restored by release_early()); a signal it
    // caught but this fit does not stop on gets its previous action back now.
    auto& early = detail::preemption_early;
    for (auto it = early.begin(); it != early.end();)
      if (std::find(o_.signals.begin(), o_.signals.end(), it->first) == o_.signals.end()) {
        ::sigaction(it->first, &it->second, nullptr);
        it = early.erase(it);
      } else {
        ++it;
      }
    for (int s : o_.signals) {
      if (std::find_if(early.begin(), early.end(), [&](const auto& e) { return e.first == s; }) != early.end())
        continue;  // already the flag-setting handler, kept after the fit
      struct sigaction sa {}, old {};
      sa.sa_handler = &detail::preemption_handler;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;  // a read or write the signal interrupts goes on
      if (::sigaction(s, &sa, &old) != 0)
        throw std::runtime_error(policytrain::detail::error_message(
            "policytrain::callbacks::Preemption",
            policytrain::detail::format("sigaction({}) failed; the signal cannot be handled", signal_name(s))));
      previous_.push_back({s, old});
    }
  }

  void restore() {
    for (auto it = previous_.rbegin(); it != previous_.rend(); ++it) ::sigaction(it->first, &it->second, nullptr);
    previous_.clear();
  }

  /// Hands back the handlers catch_early() replaced (a fit without preemption leaves none of ours).
  static void restore_early() {
    for (auto it = detail::preemption_early.rbegin(); it != detail::preemption_early.rend(); ++it)
      ::sigaction(it->first, &it->second, nullptr);
    detail::preemption_early.clear();
  }

  Options o_;
  std::vector<std::pair<int, struct sigaction>> previous_;
  int stopped_by_ = 0;
  int64_t stopped_at_ = -1;
  int received_ = 0;
};

}  // namespace policytrain::callbacks
