#pragma once
/// \file
/// checkpoint::RunLock — one job per run directory: `<directory>/run.lock`, created with O_CREAT | O_EXCL and
/// holding the holder's host name, pid and process start time, is held while a fit runs (checkpoint::Disk takes
/// it on the main rank at fit begin and gives it back at fit end, or when it is destroyed after an exception).
/// A second job on a held directory is refused by name (LockedError: the directory, the holder's host and pid, the
/// fix). A stale lock — its holder on this host is gone (no such pid, an exited process not yet reaped: a zombie,
/// or a pid reused by a process started at another time) — is taken over, and that is said in the log. A holder on another host cannot be checked: its
/// lock is respected until removed by hand, unless it is an earlier attempt of this same scheduler job: the lock
/// records the Slurm job id and attempt (SLURM_JOB_ID, SLURM_RESTART_COUNT), and Slurm runs one attempt of a job at
/// a time, so a requeued job takes over its previous attempt's lock from any node (a lock of another job, or of
/// the same attempt, never). Within one process, every Disk on one directory shares the lock.
/// POSIX; the start-time check reads /proc (Linux; elsewhere a live pid is trusted). Cost: a few file operations
/// per fit.
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

#if POLICYTRAIN_DEFINE
// What the definitions below use: a translation unit that only declares them (separate compilation) parses none.
#  include <cerrno>
#  include <chrono>
#  include <cstdio>
#  include <cstdlib>
#  include <cstring>
#  include <fstream>
#  include <iterator>
#  include <map>
#  include <mutex>
#  include <sstream>
#  include <system_error>
#  include <thread>

#  include <fcntl.h>
#  include <signal.h>
#  include <unistd.h>
#endif

namespace policytrain::checkpoint {

/// A run directory held by another job (see RunLock). A std::runtime_error.
struct LockedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {

/// This host's name ("unknown" when the system does not say).
POLICYTRAIN_DECL std::string host_name();
/// A process's start time in clock ticks since boot (/proc/<pid>/stat, field 22); "" when unknown.
POLICYTRAIN_DECL std::string process_start(long pid);
/// The state letter of process `pid` from /proc/<pid>/stat ('R', 'S', 'Z' a zombie: exited, not yet reaped; ...),
/// 0 when unknown.
POLICYTRAIN_DECL char process_state(long pid);

}  // namespace detail

/// The lock of one run directory, held while the object lives (see the file comment).
class RunLock {
 public:
  /// The holder a lock file names.
  struct Holder {
    std::string host;   ///< the holder's host name
    long pid = 0;       ///< the holder's process id on that host
    std::string start;  ///< the holder's process start time (ticks since boot), "" when unknown
    std::string job;    ///< the holder's scheduler job id (SLURM_JOB_ID), "" when none
    long attempt = -1;  ///< the holder's attempt of that job (SLURM_RESTART_COUNT, 0 for the first), -1 when none
  };

  /// This process as a holder would be recorded: host, pid, start time, and the Slurm job id and attempt.
  static Holder self();

  /// Takes the lock of `directory` (which must exist), or throws LockedError. `log` gets the take-over of a
  /// stale lock. Within one process, returns the lock this process already holds on that directory.
  static std::shared_ptr<RunLock> acquire(const std::filesystem::path& directory,
                                          const std::function<void(const std::string&)>& log);

  /// Reads a lock file ("host pid start job attempt" on one line, "-" for an unknown field; older files stop after
  /// the start); pid 0 when it names no holder (empty, unreadable).
  static Holder read(const std::filesystem::path& file);

  /// The lock file.
  const std::filesystem::path& file() const { return file_; }

  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  /// Removes the lock file if it is still this process's.
  ~RunLock();

 private:
  explicit RunLock(std::filesystem::path file) : file_(std::move(file)) {}

  /// Whether `h`, a holder on this host, is gone: no such process, or another process with its pid.
  static bool gone(const Holder& h, std::string* why);

  void take(const std::filesystem::path& dir, const std::function<void(const std::string&)>& log);

  std::filesystem::path file_;
  bool owned_ = false;
};

// The definitions: here header-only, in <policytrain/src.hpp> with separate compilation (detail/config.hpp).
#if POLICYTRAIN_DEFINE
namespace detail {

POLICYTRAIN_DECL std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "unknown";
  return buf;
}

POLICYTRAIN_DECL std::string process_start(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream fields(stat.substr(close + 1));
  std::string f;
  for (int i = 3; i <= 22 && (fields >> f); ++i)
    if (i == 22) return f;
  return "";
}

POLICYTRAIN_DECL char process_state(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return 0;
  return stat[close + 2];
}

}  // namespace detail

POLICYTRAIN_DECL RunLock::Holder RunLock::self() {
  Holder h;
  h.host = detail::host_name();
  h.pid = static_cast<long>(::getpid());
  h.start = detail::process_start(h.pid);
  if (const char* j = std::getenv("SLURM_JOB_ID"); j && *j) {
    h.job = j;
    const char* r = std::getenv("SLURM_RESTART_COUNT");
    h.attempt = r && *r ? std::strtol(r, nullptr, 10) : 0;
  }
  return h;
}

POLICYTRAIN_DECL std::shared_ptr<RunLock> RunLock::acquire(const std::filesystem::path& directory,
                                                          const std::function<void(const std::string&)>& log) {
  static std::mutex m;
  static std::map<std::string, std::weak_ptr<RunLock>> held;
  std::error_code ec;
  auto canonical = std::filesystem::weakly_canonical(directory, ec);
  const std::string key = (ec ? directory : canonical).string();
  std::lock_guard<std::mutex> lk(m);
  if (auto l = held[key].lock()) return l;
  auto l = std::shared_ptr<RunLock>(new RunLock(directory / "run.lock"));
  l->take(directory, log);
  held[key] = l;
  return l;
}

POLICYTRAIN_DECL RunLock::Holder RunLock::read(const std::filesystem::path& file) {
  Holder h;
  std::ifstream in(file);
  in >> h.host >> h.pid >> h.start;
  std::string attempt;
  if (in >> h.job >> attempt && h.job != "-" && attempt != "-") h.attempt = std::strtol(attempt.c_str(), nullptr, 10);
  if (h.job == "-") h.job.clear();
  if (h.start == "-") h.start.clear();
  if (h.pid < 0) h.pid = 0;
  return h;
}

POLICYTRAIN_DECL RunLock::~RunLock() {
  if (!owned_) return;
  const Holder h = read(file_);
  if (h.pid == static_cast<long>(::getpid()) && h.host == detail::host_name()) {
    std::error_code ec;
    std::filesystem::remove(file_, ec);
  }
}

POLICYTRAIN_DECL bool RunLock::gone(const Holder& h, std::string* why) {
  if (::kill(static_cast<pid_t>(h.pid), 0) != 0 && errno == ESRCH) {
    *why = "no such process";
    return true;
  }
  // A holder that exited but is not reaped yet (its parent was killed too, and the new parent, often a container's
  // PID 1, reaps late or never) still answers kill(pid, 0): it is gone all the same.
  if (const char st = detail::process_state(h.pid); st == 'Z' || st == 'X') {
    *why = policytrain::detail::format("it has exited (state {}: not yet reaped by its parent)", st);
    return true;
  }
  const std::string start = detail::process_start(h.pid);
  if (!h.start.empty() && !start.empty() && start != h.start) {
    *why = policytrain::detail::format("pid {} is now another process (started at tick {}, the holder at tick {})",
                                       h.pid, start, h.start);
    return true;
  }
  return false;
}

POLICYTRAIN_DECL void RunLock::take(const std::filesystem::path& dir, const std::function<void(const std::string&)>& log) {
  const Holder me = self();
  const std::string& host = me.host;
  const long pid = me.pid;
  const std::string line = policytrain::detail::format(
      "{} {} {} {} {}\n", host, pid, me.start.empty() ? "-" : me.start, me.job.empty() ? "-" : me.job,
      me.job.empty() ? std::string("-") : std::to_string(me.attempt));
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int fd = ::open(file_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
      ::close(fd);
      if (!ok)
        throw std::runtime_error(policytrain::detail::error_message(
            "policytrain::checkpoint", policytrain::detail::format(
                "cannot write the lock {}: {}",
                                                             file_.string(), std::strerror(errno))));
      owned_ = true;
      return;
    }
    if (errno != EEXIST)
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::checkpoint", policytrain::detail::format(
              "cannot create the lock {}: {}",
                                                           file_.string(), std::strerror(errno))));
    const Holder h = read(file_);
    if (h.pid <= 0) {  // being written by its creator, or left empty by a crash: look again, then take it
      if (attempt < 20) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      log(policytrain::detail::format("policytrain::checkpoint: {} names no holder (an interrupted start); taking it over",
                                      file_.string()));
    } else {
      std::string why;
      // An earlier attempt of this job (requeued, perhaps onto another node): Slurm ended it before this one.
      const bool earlier_attempt = !me.job.empty() && h.job == me.job && h.attempt >= 0 && h.attempt < me.attempt;
      if (earlier_attempt)
        why = policytrain::detail::format("attempt {} of this Slurm job {}, which runs attempt {} now", h.attempt,
                                          me.job, me.attempt);
      else if (h.host != host || !gone(h, &why))
        throw LockedError(policytrain::detail::error_message(
            "policytrain::checkpoint", policytrain::detail::format(
                "the run directory {} is in use by another job: host {}, pid {} (its lock: {}). "
            "Two jobs in one directory would overwrite each other's last.ckpt and best.ckpt; wait for that job to "
            "end or stop it, or choose another directory; if that job is gone{}, remove {}",
            dir.string(), h.host, h.pid, file_.string(),
            h.host != host ? policytrain::detail::format(" (it ran on {}, which this host ({}) cannot check)", h.host, host) : "",
            file_.string())));
      log(policytrain::detail::format(
          "policytrain::checkpoint: took over the lock {} of a job that is gone (host {}, pid {}: {})", file_.string(),
          h.host, h.pid, why));
    }
    // Take over: move the stale file aside under a name of our own, then create ours; of two takers, one
    // renames it, the other finds it gone and retries the exclusive create.
    const auto aside = file_.parent_path() / policytrain::detail::format(".run.lock.stale-{}", pid);
    std::error_code ec;
    std::filesystem::rename(file_, aside, ec);
    if (ec) continue;  // another taker moved it first
    const Holder moved = read(aside);
    if (moved.pid != h.pid || moved.host != h.host) ::link(aside.c_str(), file_.c_str());  // a fresh lock: put it back
    std::filesystem::remove(aside, ec);
  }
  throw LockedError(policytrain::detail::error_message(
      "policytrain::checkpoint", policytrain::detail::format(
          "could not take the lock {} of the run directory {} after 50 attempts (other jobs "
      "keep taking it); make sure one job uses the directory", file_.string(), dir.string())));
}
#endif

}  // namespace policytrain::checkpoint
