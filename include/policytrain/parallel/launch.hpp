#pragma once
/// \file
/// parallel::launch_local — starts N processes of a program on this machine with the environment torchrun
/// gives its workers (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), waits for
/// them, and stops the others when one fails. For users without Python; `torchrun --no-python` does the same.
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

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <policytrain/detail/format.hpp>

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
  std::chrono::milliseconds deadline{0};      ///< > 0: kill every rank after this long and return 124
};

/// A TCP port on `addr` that nobody listens on now (the kernel's choice; another process could take it
/// before rank 0 binds it, a small race that torchrun's static rendezvous has too).
inline int free_port(const std::string& addr = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("policytrain::parallel::free_port: socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (::inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    throw std::invalid_argument(policytrain::detail::format("policytrain::parallel::free_port: '{}' is not an IPv4 address", addr));
  }
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error(policytrain::detail::format("policytrain::parallel::free_port: cannot bind to {}", addr));
  }
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

/// Runs `o.nproc` ranks and waits for them. Returns 0 when all succeed, else the first failure's exit code
/// (128 + signal for a rank killed by a signal; 124 when the deadline passed).
inline int launch_local(const LaunchOptions& o) {
  if (o.nproc < 1)
    throw std::invalid_argument(policytrain::detail::format("policytrain::parallel::launch_local: nproc is {}, expected >= 1", o.nproc));
  const int port = o.master_port > 0 ? o.master_port : free_port(o.master_addr);
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<pid_t> pids(o.nproc, -1);
  for (int r = 0; r < o.nproc; ++r) {
    // Everything is prepared before fork: the child only calls execve.
    std::map<std::string, std::string> env;
    for (char** e = environ; *e; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq) env[std::string(static_cast<const char*>(*e), static_cast<size_t>(eq - *e))] = eq + 1;
    }
    env["RANK"] = std::to_string(r);
    env["LOCAL_RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(o.nproc);
    env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc);
    env["MASTER_ADDR"] = o.master_addr;
    env["MASTER_PORT"] = std::to_string(port);
    env.erase("TORCHELASTIC_USE_AGENT_STORE");
    // The ranks share the cores: give each its part, unless the user chose.
    if (!env.count("OMP_NUM_THREADS")) env["OMP_NUM_THREADS"] = std::to_string(std::max(1u, hw / o.nproc));
    for (const auto& [k, v] : o.env) env[k] = v;
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
    if (pid < 0) throw std::runtime_error("policytrain::parallel::launch_local: fork() failed");
    if (pid == 0) {
      ::execve(o.program.c_str(), argv.data(), envp.data());
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
  int result = 0, running = o.nproc;
  const auto t0 = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point kill_at{};
  bool stopping = false;
  while (running > 0) {
    int status = 0;
    const pid_t p = ::waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      const int r = rank_of(p);
      if (r < 0) continue;
      pids[r] = -1;
      --running;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
  return result;
}

/// The launch step of a program that trains on `nproc` ranks when asked (`--nproc N`): in the process the user
/// started (nproc > 1 and no RANK in the environment) starts `nproc` ranks of this program with the same arguments
/// (launch_local) and returns their exit code, which the program returns; in a rank (RANK set by launch_local,
/// torchrun or another launcher), or with nproc <= 1, returns nullopt: the caller trains. So one program runs
/// alone, under torchrun and as its own launcher unchanged.
inline std::optional<int> launch_ranks(int nproc, int argc, char** argv) {
  if (nproc < 1)
    throw std::invalid_argument(policytrain::detail::format(
        "policytrain::parallel::launch_ranks: nproc = {}; expected 1 (train in this process) or more", nproc));
  if (nproc == 1 || std::getenv("RANK")) return std::nullopt;
  LaunchOptions o{.nproc = nproc};
  o.args.assign(argv, argv + argc);
  return launch_local(o);
}

}  // namespace policytrain::parallel
