#pragma once
/// \file
/// parallel::launch_local — starts N processes of a program on this machine with the environment torchrun
/// gives its workers (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), waits for
/// them, and stops the others when one fails. For users without Python; `torchrun --no-python` does the same.
/// As torchrun, it forwards SIGTERM, SIGINT and SIGUSR1 to the ranks (SIGTERM / SIGINT then stop them: SIGKILL
/// after LaunchOptions::signal_grace, and launch_local returns 128 + the signal). No rank outlives it: on Linux
/// each rank has a parent-death signal (prctl PR_SET_PDEATHSIG, SIGKILL), so even a SIGKILL of the launcher takes
/// the ranks with it (on other systems the ranks of a SIGKILLed launcher run on). Inherited launcher variables that
/// describe a rank (RANK, WORLD_SIZE, LOCAL_RANK, SLURM_PROCID, SLURM_NTASKS, OMPI_COMM_WORLD_*, ...) are
/// removed from the ranks' environments: the ranks are this launcher's, not an outer launcher's tasks.
/// POSIX only (fork/exec). Cost when unused: nothing.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <atomic>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <fmt/format.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/environment.hpp>

/// The process environment (POSIX), the base of every rank's environment.
extern char** environ;

namespace policytrain::parallel {

/// How launch_local starts the ranks.
struct LaunchOptions {
  /// Number of processes (ranks) to start.
  int nproc = 2;
  std::string program = "/proc/self/exe";     ///< what each rank runs
  std::vector<std::string> args{};            ///< its argv (argv[0] first)
  /// MASTER_ADDR given to every rank.
  std::string master_addr = "127.0.0.1";
  int master_port = 0;                        ///< 0: a free port, chosen now
  std::map<std::string, std::string> env{};   ///< further variables for every rank
  bool stop_others_on_failure = true;         ///< SIGTERM (then SIGKILL) the others when one rank fails
  std::chrono::milliseconds deadline{0};      ///< > 0: kill every rank after this long (each attempt) and return 124
  /// Give the ranks torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
  /// MASTER_PORT). false: only `env` and `rank_env` (e.g. to start the ranks as srun or mpirun would, with
  /// SLURM_PROCID or OMPI_COMM_WORLD_RANK in `rank_env`).
  bool torchrun_variables = true;
  /// Variables of one rank each (rank_env[r] for rank r; may be shorter than nproc), set after `env`.
  std::vector<std::map<std::string, std::string>> rank_env{};
  /// After a SIGTERM or SIGINT forwarded to the ranks, how long they have to exit before SIGKILL (torchrun: 30 s).
  std::chrono::milliseconds signal_grace{30000};
  /// A rank's exit code that means "stopped on a signal, run saved" (callbacks::Preemption::exit_code, 75): not a
  /// failure, so the other ranks are not stopped (rank 0 may still be writing the checkpoint they all agreed on);
  /// launch_local returns it when every rank ended with it or 0, a forwarded SIGTERM included. 0: none.
  int preempted_exit_code = 75;
  /// Restarts of the whole group after a rank failed, as torchrun's `--max-restarts`: the other ranks are stopped,
  /// then all of them start again (on a fresh port unless master_port is set), with TORCHELASTIC_RESTART_COUNT set
  /// to the attempt (0 first) and TORCHELASTIC_MAX_RESTARTS to this; the program continues from its newest complete
  /// checkpoint (checkpoint::Disk with `resume = "auto"`, the main job's `--resume`). No restart after a signal the
  /// launcher received, the deadline, or when every rank ended with 0 or preempted_exit_code. 0: none.
  int max_restarts = 0;
};

namespace detail {

/// The signals launch_local received and has not forwarded yet (a bit per signal), set by its handler.
inline std::atomic<unsigned>& launch_pending_signals() {
  static std::atomic<unsigned> pending{0};
  return pending;
}

inline void launch_on_signal(int sig) { launch_pending_signals().fetch_or(1u << sig); }

inline const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGKILL: return "SIGKILL";
    default: return "a signal";
  }
}

/// Installs launch_local's handlers of SIGTERM, SIGINT and SIGUSR1 for its lifetime; restores the previous ones.
struct LaunchSignals {
  static constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};
  struct sigaction old[3]{};
  LaunchSignals() {
    launch_pending_signals().store(0);
    struct sigaction sa{};
    sa.sa_handler = &launch_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &old[i]);
  }
  ~LaunchSignals() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old[i], nullptr);
  }
  LaunchSignals(const LaunchSignals&) = delete;
  LaunchSignals& operator=(const LaunchSignals&) = delete;
};

}  // namespace detail

/// A TCP port on `addr` that nobody listens on now (the kernel's choice; another process could take it
/// before rank 0 binds it, a small race that torchrun's static rendezvous has too).
inline int free_port(const std::string& addr = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw std::runtime_error(policytrain::detail::error_message("policytrain::parallel::free_port", "socket() failed"));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (::inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::free_port", policytrain::detail::format("'{}' is not an IPv4 address", addr)));
  }
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error(policytrain::detail::error_message(
        "policytrain::parallel::free_port", policytrain::detail::format("cannot bind to {}", addr)));
  }
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

namespace detail {

/// What one attempt of launch_local ended with: its exit code, and whether a restart may follow (a rank failed by
/// itself: not a signal the launcher received, not the deadline).
struct GroupOutcome {
  int code = 0;
  bool restartable = false;
};

/// The file to execute for `program`: /proc/self/exe's target when it is still this very file (same device and
/// inode), so that the ranks are named after the binary in ps and top (execve names a process after the file's
/// base name: "exe" for /proc/self/exe); /proc/self/exe itself when the binary was replaced since it started.
inline std::string executable_path(const std::string& program) {
  if (program != "/proc/self/exe") return program;
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return program;
  const std::string real(buf, static_cast<size_t>(n));
  struct stat a {}, b {};
  if (::stat(program.c_str(), &a) != 0 || ::stat(real.c_str(), &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
    return program;
  return real;
}

/// One attempt of launch_local: starts the ranks with `attempt` as TORCHELASTIC_RESTART_COUNT and waits for them.
inline GroupOutcome launch_group(const LaunchOptions& o, int attempt) {
  const std::string program = executable_path(o.program);
  const int port = o.master_port > 0 ? o.master_port : free_port(o.master_addr);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<pid_t> pids(o.nproc, -1);
  [[maybe_unused]] const pid_t launcher = ::getpid();
  for (int r = 0; r < o.nproc; ++r) {
    // Everything is prepared before fork: the child only calls execve.
    std::map<std::string, std::string> env;
    for (char** e = environ; *e; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq) env[std::string(static_cast<const char*>(*e), static_cast<size_t>(eq - *e))] = eq + 1;
    }
    detail::LauncherVariables::each([&](const char* v) { env.erase(v); });  // Environment's list
    if (o.torchrun_variables) {
      env["RANK"] = std::to_string(r);
      env["LOCAL_RANK"] = std::to_string(r);
      env["WORLD_SIZE"] = std::to_string(o.nproc);
      env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc);
      env["MASTER_ADDR"] = o.master_addr;
      env["MASTER_PORT"] = std::to_string(port);
      env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
      env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(o.max_restarts);
    }
    // The ranks share the cores: give each its part, unless the user chose.
    if (!env.count("OMP_NUM_THREADS")) env["OMP_NUM_THREADS"] = std::to_string(std::max(1u, hw / o.nproc));
    for (const auto& [k, v] : o.env) env[k] = v;
    if (static_cast<size_t>(r) < o.rank_env.size())
      for (const auto& [k, v] : o.rank_env[static_cast<size_t>(r)]) env[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = o.args.empty() ? std::vector<std::string>{o.program} : o.args;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0)
      throw std::runtime_error(
          policytrain::detail::error_message("policytrain::parallel::launch_local", "fork() failed"));
    if (pid == 0) {
#ifdef __linux__
      // Die with the launcher (even a SIGKILLed one); if it died before prctl, the parent is already another.
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != launcher) _exit(126);
#endif
      ::execve(program.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    pids[r] = pid;
  }

  auto rank_of = [&](pid_t p) {
    for (int r = 0; r < o.nproc; ++r)
      if (pids[r] == p) return r;
    return -1;
  };
  auto signal_rest = [&](int sig) {
    for (pid_t p : pids)
      if (p > 0) ::kill(p, sig);
  };
  int result = 0, running = o.nproc, preempted = 0, other_failures = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point kill_at{};
  bool stopping = false;
  int stop_signal = 0;
  while (running > 0) {
    // Forward the signals received since the last pass (as torchrun); SIGTERM and SIGINT then stop the ranks.
    if (const unsigned pending = detail::launch_pending_signals().exchange(0)) {
      for (int sig : detail::LaunchSignals::kSignals) {
        if (!(pending & (1u << sig))) continue;
        std::string alive;
        for (pid_t p : pids)
          if (p > 0) alive += (alive.empty() ? "" : ", ") + std::to_string(p);
        std::fprintf(stderr, "policytrain::parallel::launch_local: received %s; forwarding it to the ranks (pids %s)\n",
                     detail::signal_name(sig), alive.c_str());
        signal_rest(sig);
        if (sig != SIGUSR1 && !stop_signal) {
          stop_signal = sig;
          if (!stopping) {
            stopping = true;
            kill_at = std::chrono::steady_clock::now() + o.signal_grace;
          }
        }
      }
    }
    int status = 0;
    const pid_t p = ::waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      const int r = rank_of(p);
      if (r < 0) continue;
      pids[r] = -1;
      --running;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (o.preempted_exit_code != 0 && WIFEXITED(status) && code == o.preempted_exit_code) {
        ++preempted;
        continue;
      }
      if (code != 0) ++other_failures;
      if (code != 0 && result == 0) {
        result = code;
        if (o.stop_others_on_failure && running > 0) {
          std::fprintf(stderr, "policytrain::parallel::launch_local: rank %d (pid %d) %s %d; stopping the other ranks\n",
                       r, static_cast<int>(p), WIFEXITED(status) ? "exited with code" : "was killed by signal",
                       WIFEXITED(status) ? code : WTERMSIG(status));
          signal_rest(SIGTERM);
          stopping = true;
          kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        }
      }
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (stopping && now > kill_at) signal_rest(SIGKILL);
    if (o.deadline.count() > 0 && now - t0 > o.deadline && !stopping) {
      std::fprintf(stderr, "policytrain::parallel::launch_local: the ranks ran past the deadline of %lld ms; killing them\n",
                   static_cast<long long>(o.deadline.count()));
      signal_rest(SIGKILL);
      stopping = true;
      kill_at = now;
      result = 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (preempted > 0 && other_failures == 0) {
    std::fprintf(stderr, "policytrain::parallel::launch_local: %d of %d rank(s) stopped with the preemption exit code "
                 "%d (the others finished); returning it\n", preempted, o.nproc, o.preempted_exit_code);
    return {o.preempted_exit_code, false};
  }
  if (stop_signal) {
    std::fprintf(stderr, "policytrain::parallel::launch_local: stopped by %s; the ranks have exited (exit code %d)\n",
                 detail::signal_name(stop_signal), 128 + stop_signal);
    return {128 + stop_signal, false};
  }
  return {result, result != 0 && result != 124};
}

}  // namespace detail

/// Runs `o.nproc` ranks and waits for them. Returns 0 when all succeed, else the first failure's exit code
/// (128 + signal for a rank killed by a signal; 124 when the deadline passed; 128 + SIGTERM / SIGINT when the
/// launcher received that signal, forwarded it, and stopped the ranks). Forwards SIGUSR1 and keeps waiting.
/// With `o.max_restarts` > 0, a failed group is restarted that many times at most (each attempt says why on
/// stderr); the last attempt's code is returned.
/// Not for concurrent calls from several threads (one set of signal handlers).
inline int launch_local(const LaunchOptions& o) {
  if (o.nproc < 1)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::launch_local", policytrain::detail::format("nproc is {}, expected >= 1", o.nproc)));
  if (o.max_restarts < 0)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::launch_local",
        policytrain::detail::format("max_restarts is {}, expected >= 0", o.max_restarts)));
  const detail::LaunchSignals signals;
  for (int attempt = 0;; ++attempt) {
    const detail::GroupOutcome g = detail::launch_group(o, attempt);
    if (!g.restartable || attempt >= o.max_restarts) {
      if (g.restartable && o.max_restarts > 0)
        std::fprintf(stderr, "policytrain::parallel::launch_local: the group failed (exit code %d) after %d restart(s), "
                     "the most allowed (max_restarts); giving up\n", g.code, attempt);
      return g.code;
    }
    std::fprintf(stderr, "policytrain::parallel::launch_local: the group failed (exit code %d); restarting every rank "
                 "(restart %d of %d; TORCHELASTIC_RESTART_COUNT=%d)\n", g.code, attempt + 1, o.max_restarts, attempt + 1);
  }
}

/// The launch step of a program that trains on `nproc` ranks when asked (`--nproc N`): in the process the user
/// started (nproc > 1 and no launcher's rank in the environment) starts `nproc` ranks of this program with the same
/// arguments (launch_local) and returns their exit code, which the program returns; in a rank (parallel::Environment
/// finds torchrun's variables, set by launch_local or torchrun, or a Slurm / Open MPI job of more than one
/// process), or with nproc <= 1, returns nullopt: the caller trains. So one program runs alone, under torchrun,
/// srun or mpirun, and as its own launcher unchanged (a single Slurm task, `srun -n1 ./app --nproc 4`, launches).
inline std::optional<int> launch_ranks(int nproc, int argc, char** argv, int max_restarts = 0) {
  if (nproc < 1)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::parallel::launch_ranks",
        policytrain::detail::format("nproc = {}; expected 1 (train in this process) or more", nproc)));
  if (nproc == 1) return std::nullopt;
  // torchrun's variables (RANK or WORLD_SIZE) make a rank whatever their values: the parallel policy reads them
  // and names a bad one. Otherwise a Slurm or Open MPI job of several processes is already launched.
  if (std::getenv(detail::kTorchrunVariables.rank) || std::getenv(detail::kTorchrunVariables.world) ||
      Environment::from_env().world_size > 1)
    return std::nullopt;
  LaunchOptions o{.nproc = nproc};
  o.max_restarts = max_restarts;
  o.args.assign(argv, argv + argc);
  return launch_local(o);
}

}  // namespace policytrain::parallel
