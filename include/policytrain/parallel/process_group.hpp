#pragma once
/// \file
/// parallel::ProcessGroup — this rank's membership of a data-parallel job: the store (rank 0 hosts it, or
/// torchrun's agent does), the c10d process group (Gloo on CPU, NCCL on CUDA) and its collectives. Every
/// collective waits with the timeout, and a failed one becomes a CollectiveError naming this rank, the collective
/// and the ranks that did not answer afterwards (diagnose: the survivors check in on the store).
/// A piece of parallel::DataParallel and parallel::ShardedDataParallel; it knows no Trainer and may be used alone
/// (tests/unit/test_parallel.cpp). With one process every collective is the identity and nothing connects.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <csignal>
#include <filesystem>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#if !__has_include(<gloo/config.h>)
#error "policytrain/parallel/process_group.hpp: Gloo's headers are missing (LibTorch's wheel does not ship them, but c10d's ProcessGroupGloo.hpp includes them); install Debian's libgloo-dev (scripts/setup does)"
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#if defined(POLICYTRAIN_WITH_CUDA) && defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define POLICYTRAIN_WITH_NCCL 1
#endif
#include <torch/types.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/parallel/environment.hpp>

namespace policytrain::parallel {

/// A collective failed or timed out: a peer died, hung, or the network broke. The message names this rank,
/// the collective, and the ranks that did not answer afterwards.
struct CollectiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace detail

/// How a ProcessGroup connects (parallel::DataParallelOptions carries the same settings).
struct ProcessGroupOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  ///< start-up and every collective (PyTorch's default_pg_timeout)
  std::string backend = "auto";  ///< auto (NCCL on CUDA, Gloo on CPU), gloo, nccl
  int gloo_threads = 2;          ///< Gloo's worker threads (collectives in flight at once)
};

namespace detail {

/// A job's store in this process and how many process groups were formed on it.
struct SharedStore {
  c10::intrusive_ptr<c10d::Store> store;  ///< the TCPStore (rank 0 serves it) or the client of torchrun's agent store
  int64_t groups = 0;                     ///< process groups formed on it so far (the next one's generation)
};

/// The stores of this process by job address (MASTER_ADDR:MASTER_PORT), never closed before the process ends
/// (deliberately leaked: a store's server thread must not be torn down by static destruction while a rank's
/// last collective may still need it).
inline std::map<std::string, SharedStore>& shared_stores() {
  static auto* stores = new std::map<std::string, SharedStore>();
  return *stores;
}
/// Guards shared_stores().
inline std::mutex& shared_stores_mutex() {
  static std::mutex m;
  return m;
}

/// Makes SIGPIPE ignored if its action is still the default (a handler the program installed, or an ignore, stays),
/// as CPython does at start-up for every PyTorch job. Gloo sends on its sockets with writev(), which raises SIGPIPE
/// when the peer has died; the default action ends the process at once and silently, so a surviving rank vanished
/// without its CollectiveError whenever it was sending the moment another rank was killed (the kill tests in
/// tests/unit/test_parallel.cpp, a third of the runs). Ignored, the write fails with EPIPE and Gloo throws.
/// Returns whether this call changed the action.
inline bool ignore_default_sigpipe() {
  struct sigaction now {};
  if (::sigaction(SIGPIPE, nullptr, &now) != 0) return false;
  if ((now.sa_flags & SA_SIGINFO) != 0 || now.sa_handler != SIG_DFL) return false;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  return ::sigaction(SIGPIPE, &ignore, nullptr) == 0;
}

/// The connected TCP sockets of this process (descriptors from /proc/self/fd) whose local and remote ports both
/// differ from `except_port` (the store's: rank 0's accepted store connections and every rank's store client).
inline std::vector<int> tcp_sockets(int except_port) {
  std::vector<int> fds;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    const auto port = [](const sockaddr_storage& a) -> int {
      if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
      if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
      return -1;
    };
    sockaddr_storage local {}, peer {};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
      continue;  // not connected (a listener), or not a socket any more
    const int lp = port(local), pp = port(peer);
    if (lp < 0 || pp < 0 || lp == except_port || pp == except_port) continue;
    fds.push_back(fd);
  }
  return fds;
}

}  // namespace detail

/// This rank in the job the environment describes, and the collectives over every rank.
class ProcessGroup {
 public:
  /// This rank of the job `env` describes, with the timeout and backend of `o`; connect() joins it.
  ProcessGroup(Environment env, ProcessGroupOptions o) : env_(std::move(env)), o_(std::move(o)) {}

  /// The environment (rank, world size, store address).
  const Environment& environment() const { return env_; }
  /// This process's rank.
  int rank() const { return env_.rank; }
  /// Number of processes in the job.
  int world_size() const { return env_.world_size; }
  /// Whether more than one process takes part.
  bool active() const { return env_.world_size > 1; }
  /// The timeout of the start-up and of every collective.
  std::chrono::milliseconds timeout() const { return o_.timeout; }
  /// "rank r of w", for messages.
  std::string who() const { return policytrain::detail::format("rank {} of {}", env_.rank, env_.world_size); }

  /// Whether connect() formed the process group.
  bool connected() const { return static_cast<bool>(backend_); }
  /// c10d's backend (Gloo or NCCL), null before connect().
  const c10::intrusive_ptr<c10d::Backend>& backend() const { return backend_; }
  /// The process group as c10d::Reducer and c10d's helpers want it, null before connect().
  const c10::intrusive_ptr<c10d::ProcessGroup>& group() const { return pg_; }
  /// Where small control tensors go (NCCL reduces device tensors only).
  torch::Device comm_device() const { return comm_device_; }

  /// Joins the job: the store (rank 0 hosts it, or torchrun's agent does), then the process group, for tensors
  /// on `device`. Idempotent; nothing with one process. Throws std::runtime_error naming MASTER_ADDR /
  /// MASTER_PORT when that fails. Sets SIGPIPE to ignored if the program left it at the default
  /// (detail::ignore_default_sigpipe: a dead peer must become an error, not a silent end).
  void connect(torch::Device device = torch::kCPU) {
    if (!active() || backend_) return;
    detail::ignore_default_sigpipe();
    const auto& e = env_;
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(e.master_port);
    so.isServer = e.rank == 0 && !e.agent_store;
    so.numWorkers = e.agent_store ? std::nullopt : std::optional<size_t>(e.world_size);
    so.waitWorkers = false;
    so.timeout = o_.timeout;
    so.multiTenant = true;
    // One store per job address for the whole process, kept open until the process ends: a program that forms
    // a second process group (a second Trainer, one per task) uses the same store, its keys under the group's
    // generation (every rank forms its groups in the same order, so the generations agree). Closing rank 0's
    // store with its group let a faster rank reach the old store for its next group and lose it mid-rendezvous
    // ("Broken pipe"; seen under load in test_epoch_metrics, three groups one after another).
    std::lock_guard<std::mutex> lock(detail::shared_stores_mutex());
    auto& shared = detail::shared_stores()[policytrain::detail::format("{}:{}:{}", e.master_addr, e.master_port,
                                                                        e.agent_store ? "agent" : "own")];
    c10::intrusive_ptr<c10d::Store> tcp = shared.store;
    if (!tcp) try {
      tcp = c10::make_intrusive<c10d::TCPStore>(e.master_addr, so);
      shared.store = tcp;
    } catch (const std::exception& ex) {
      const std::string cause = ex.what();
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::parallel::DataParallel", policytrain::detail::format(
              "rank {} could not {} the store at MASTER_ADDR={} MASTER_PORT={} "
          "within {} ms: {}; {}", e.rank, so.isServer ? "open" : "reach", e.master_addr, e.master_port,
          o_.timeout.count(), cause.substr(0, cause.find('\n')),
          so.isServer ? "is the port in use? choose another MASTER_PORT"
                      : "is rank 0 running, and MASTER_ADDR reachable from this node?")));
    }
    // A torchrun agent's store outlives restarts: keys of each attempt live under their own prefix.
    const int64_t generation = shared.groups++;
    store_ = e.agent_store
        ? c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::PrefixStore>(
              policytrain::detail::format("/worker/attempt_{}", e.restart_count), tcp))
        : tcp;
    if (generation > 0)
      store_ = c10::make_intrusive<c10d::PrefixStore>(policytrain::detail::format("policytrain/group{}", generation), store_);
    auto pg_store = c10::make_intrusive<c10d::PrefixStore>("policytrain/pg", store_);
    const bool cuda = device.is_cuda();
    const std::string kind = o_.backend == "auto" ? (cuda ? "nccl" : "gloo") : o_.backend;
    try {
      if (kind == "gloo") {
        auto go = c10d::ProcessGroupGloo::Options::create(o_.timeout);
        go->threads = o_.gloo_threads;
        const auto before = detail::tcp_sockets(e.master_port);
        go->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
        backend_ = c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, e.rank, e.world_size, go);
        // The connections Gloo made to the other ranks (its full mesh is connected in the constructor): what
        // abort_transport() closes. Sockets opened meanwhile by another thread of the program would be taken too;
        // the store's are not (its port is left out).
        for (int fd : detail::tcp_sockets(e.master_port))
          if (std::find(before.begin(), before.end(), fd) == before.end()) transport_fds_.push_back(fd);
        pg_ = c10::make_intrusive<c10d::ProcessGroup>(pg_store, e.rank, e.world_size);
        pg_->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, backend_);
        if (cuda) pg_->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, backend_);
        pg_->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
      } else if (kind == "nccl") {
#ifdef POLICYTRAIN_WITH_NCCL
        auto no = c10d::ProcessGroupNCCL::Options::create();
        no->timeout = o_.timeout;
        backend_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(pg_store, e.rank, e.world_size, no);
        pg_ = c10::make_intrusive<c10d::ProcessGroup>(pg_store, e.rank, e.world_size);
        pg_->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, backend_);
        pg_->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
        comm_device_ = device;
#else
        throw std::invalid_argument("backend 'nccl' needs a LibTorch built with CUDA and NCCL (USE_C10D_NCCL); use 'gloo'");
#endif
      } else {
        throw std::invalid_argument(policytrain::detail::format("backend '{}' is unknown; use auto, gloo or nccl", kind));
      }
    } catch (const std::exception& ex) {
      const std::string cause = ex.what();
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::parallel::DataParallel", policytrain::detail::format(
              "rank {} of {} could not form the {} process group (MASTER_ADDR={} "
          "MASTER_PORT={}, timeout {} ms): {}", e.rank, e.world_size, kind, e.master_addr, e.master_port,
          o_.timeout.count(), cause.substr(0, cause.find('\n')))));
    }
  }

  /// A collective before connect(): a named error instead of a null process group.
  void require_connected(const std::string& what) const {
    if (!backend_)
      throw std::logic_error(policytrain::detail::error_message(
          "policytrain::parallel::DataParallel", policytrain::detail::format(
              "{}: {} before this rank joined the job; call connect() first (fit "
          "and evaluate join by themselves)", who(), what)));
  }

  /// Where this rank is, for the messages of failed collectives and for the heartbeat: the Trainer's global_step
  /// (optimizer steps done) and epoch (0-based), and the phase ("training", "validation", "a checkpoint", "a
  /// step-boundary agreement"). The parallel policies call it from their hooks (two integers and a pointer; at
  /// most once per heartbeat_interval a store write).
  template <class State>
  void at(const State& s, const char* phase = "training") {
    at_step(s.global_step, s.epoch, phase);
  }
  /// at() with the numbers themselves.
  void at_step(int64_t global_step, int64_t epoch, const char* phase) {
    step_ = global_step;
    epoch_ = epoch;
    phase_ = phase;
    if (!store_ || heartbeat_failed_) return;
    const int64_t now = detail::now_ns();
    if (last_beat_ns_ != 0 && now - last_beat_ns_ < kHeartbeatNs) return;
    last_beat_ns_ = now;
    const std::string v = policytrain::detail::format("{} {} {} {}", step_, epoch_, wall_ms(), phase_);
    try {
      store_->set(policytrain::detail::format("policytrain/beat/{}", env_.rank), std::vector<uint8_t>(v.begin(), v.end()));
    } catch (const std::exception&) {
      // The store is gone (rank 0 died) or hung: the next collective fails and its message says so (diagnose
      // reaches the store too); no further heartbeats, each would wait for the timeout again.
      heartbeat_failed_ = true;
    }
  }
  /// "training at global_step 3, epoch 0", or "before training" until at() was called.
  std::string position() const {
    if (step_ < 0) return "before training";
    return policytrain::detail::format("{} at global_step {}, epoch {}", phase_, step_, epoch_);
  }

  /// After a failed collective: every surviving rank checks in on the store; those that do not within a short
  /// grace period are named, with where their last heartbeat (at most heartbeat_interval old while they ran)
  /// placed them. Returns a sentence for the error message.
  std::string diagnose() {
    if (!store_) return "";
    if (store_silent_) return store_silent_message();
    // The store's check and get wait for its answer without a timeout of their own: a stopped (SIGSTOP) rank 0,
    // which hosts it, kept them waiting for ever (seen: ranks 1 and 2 hung until rank 0 was killed). The diagnosis
    // runs on a thread of its own, holding the store, and is given up after its longest normal duration (the grace
    // period, twice on rank 0) + 2 s; that thread is left waiting, and this rank says that the store is silent.
    const auto grace = std::min<std::chrono::milliseconds>(o_.timeout, std::chrono::seconds(3));
    const auto bound = grace * (env_.rank == 0 ? 2 : 1) + std::chrono::seconds(2);
    auto result = std::make_shared<std::promise<std::string>>();
    auto answer = result->get_future();
    std::thread([result, env = env_, timeout = o_.timeout, store = store_] {
      result->set_value(diagnose_on_store(env, timeout, store));
    }).detach();
    if (answer.wait_for(bound) == std::future_status::ready) return answer.get();
    store_silent_ = true;
    heartbeat_failed_ = true;
    silent_after_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(bound).count();
    return store_silent_message();
  }

  /// The diagnosis's sentence when the store did not answer (see diagnose()).
  std::string store_silent_message() const {
    return policytrain::detail::format(
        "the store at MASTER_ADDR={} MASTER_PORT={} does not answer either (no answer within {} ms): {} (it lives in "
        "rank 0's process unless torchrun's agent hosts it)", env_.master_addr, env_.master_port, silent_after_ms_,
        env_.agent_store ? "the torchrun agent is stopped or hung" : "rank 0 is stopped or hung");
  }

  /// diagnose()'s work on the store (on a thread of its own: it uses copies, never this object, which may be gone
  /// when a silent store answers at last).
  static std::string diagnose_on_store(const Environment& env_, std::chrono::milliseconds timeout,
                                       const c10::intrusive_ptr<c10d::Store>& store_) {
    try {
      store_->set(policytrain::detail::format("policytrain/failed/{}", env_.rank), std::vector<uint8_t>{1});
      const auto grace = std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(3));
      const auto until = std::chrono::steady_clock::now() + grace;
      std::vector<int> missing;
      do {
        missing.clear();
        for (int r = 0; r < env_.world_size; ++r)
          if (!store_->check({policytrain::detail::format("policytrain/failed/{}", r)})) missing.push_back(r);
        if (missing.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      } while (std::chrono::steady_clock::now() < until);
      // Rank 0 hosts the store (unless torchrun's agent does): it leaves only once every rank that checked in has
      // read what it needs, or the grace period ends (a rank 0 that exited first took the store with it, and the
      // others' diagnosis said "rank 0 is dead": seen with 3 ranks, one stopped).
      auto done = [&] {
        store_->set(policytrain::detail::format("policytrain/diagnosed/{}", env_.rank), std::vector<uint8_t>{1});
        if (env_.rank != 0 || env_.agent_store) return;
        const auto until_read = std::chrono::steady_clock::now() + grace;
        for (int r = 1; r < env_.world_size && std::chrono::steady_clock::now() < until_read; ++r)
          while (std::find(missing.begin(), missing.end(), r) == missing.end() &&
                 !store_->check({policytrain::detail::format("policytrain/diagnosed/{}", r)}) &&
                 std::chrono::steady_clock::now() < until_read)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
      };
      if (missing.empty()) {
        done();
        return "every rank is alive and saw the failure too (a network error?)";
      }
      std::vector<std::string> last;
      for (int r : missing) {
        const std::string key = policytrain::detail::format("policytrain/beat/{}", r);
        if (!store_->check({key})) {
          last.push_back(policytrain::detail::format("rank {}: no heartbeat", r));
          continue;
        }
        const auto b = store_->get(key);
        std::istringstream in(std::string(b.begin(), b.end()));
        int64_t step = 0, epoch = 0, ms = 0;
        std::string phase;
        in >> step >> epoch >> ms;
        std::getline(in >> std::ws, phase);
        last.push_back(policytrain::detail::format("rank {}: {} at global_step {}, epoch {}, {:.1f} s before this "
                                                   "rank gave up", r, phase, step, epoch,
                                                   static_cast<double>(wall_ms() - ms) / 1000.0));
      }
      done();
      return policytrain::detail::format("rank{} {} did not answer afterwards (dead or hung; last heartbeat: {})",
                                         missing.size() > 1 ? "s" : "", fmt::join(missing, ", "), fmt::join(last, "; "));
    } catch (const std::exception&) {
      return policytrain::detail::format("the store at MASTER_ADDR={} MASTER_PORT={} is gone too: {} (it lives in rank 0's "
                                         "process unless torchrun's agent hosts it)", env_.master_addr, env_.master_port,
                                         env_.agent_store ? "the torchrun agent stopped" : "rank 0 is dead");
    }
  }

  /// The CollectiveError for a failed `what`: this rank, the collective, where the job was (position()), the
  /// cause, and the ranks that did not answer (diagnose()).
  CollectiveError collective_error(const std::string& what, const std::exception& e) {
    const std::string cause = e.what();
    abort_transport();
    return CollectiveError(policytrain::detail::error_message(
        policytrain::detail::format("policytrain::parallel::DataParallel: {}", who()),
        policytrain::detail::format("{} failed or timed out ({}; timeout {} ms): {}; {}", what, position(),
                                    o_.timeout.count(), cause.substr(0, cause.find('\n')), diagnose()),
        "every rank to join each collective within the timeout (ProcessGroupOptions::timeout, "
        "DataParallelOptions::timeout; the example's --dist-timeout)",
        "a dead rank ends the job: restart it from the newest complete checkpoint (LaunchOptions::max_restarts, "
        "--max-restarts, torchrun --max-restarts); a rank that is only slow needs a longer timeout"));
  }

  /// After a failed collective (the group cannot be used again: a failed collective ends the job), closes this
  /// rank's Gloo connections to the other ranks (shutdown(), both ways; once), so that a rank waiting in a
  /// collective for data from this one fails at once and checks in to the diagnosis while the store still lives,
  /// rather than at its own timeout or when this process ends (as NCCL's communicators are aborted on an error).
  /// Before, with 3 ranks and rank 1 killed, rank 2 could be waiting for rank 0 while rank 0 diagnosed: rank 0
  /// named rank 2 among the silent ranks, and rank 2 failed only when rank 0 ended, taking the store (it then said
  /// "rank 0 is dead"); seen in 2 of 10 runs of the kill test. Nothing to do for NCCL or with one process.
  void abort_transport() {
    for (int fd : transport_fds_) ::shutdown(fd, SHUT_RDWR);
    transport_fds_.clear();
  }
  /// How many connections abort_transport() would close (Gloo's, to the other ranks: world size - 1 or more).
  size_t transport_connections() const { return transport_fds_.size(); }

  /// Waits for `w`; on failure rethrows as CollectiveError naming this rank, `what` and the silent ranks.
  void wait(const c10::intrusive_ptr<c10d::Work>& w, const std::string& what) {
    try {
      if (!w->wait(o_.timeout))
        throw std::runtime_error("the collective was aborted");
    } catch (const std::exception& e) {
      throw collective_error(what, e);
    }
  }

  /// Runs `fn`, a collective of c10d's that waits by itself; on failure rethrows as CollectiveError.
  template <class F>
  void guarded(const std::string& what, F&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      throw collective_error(what, e);
    }
  }

  /// Broadcasts `tensors` from rank 0, in place, one collective each.
  void broadcast(std::vector<torch::Tensor> tensors, const std::string& what) {
    if (!active()) return;
    require_connected(what);
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::vector<at::Tensor> ts{tensors[i]};
      wait(backend_->broadcast(ts, c10d::BroadcastOptions{}),
           policytrain::detail::format("broadcast of {} ({} of {})", what, i + 1, tensors.size()));
    }
  }

  /// Broadcasts `tensors` from rank `root` in buckets of up to 250 MiB, in place (c10d::broadcast_coalesced, as
  /// DDP's _sync_module_states and _sync_buffers).
  void broadcast_coalesced(const std::vector<torch::Tensor>& tensors, int root, const std::string& what) {
    if (tensors.empty()) return;
    guarded(what, [&] { c10d::broadcast_coalesced(pg_, tensors, size_t{250} * 1024 * 1024, root); });
  }

  /// Reduces `t` over the ranks with `op`, in place; `what` names the collective in errors.
  void all_reduce(torch::Tensor& t, c10d::ReduceOp op, const std::string& what) {
    if (!active()) return;
    require_connected(what);
    std::vector<at::Tensor> ts{t.device() == comm_device_ ? t : t.to(comm_device_)};
    c10d::AllreduceOptions ao;
    ao.reduceOp = op;
    wait(backend_->allreduce(ts, ao), what);
    if (!ts[0].is_same(t)) t.copy_(ts[0]);
  }

 private:
  Environment env_;
  ProcessGroupOptions o_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;  ///< `backend_` as the Reducer wants it
  torch::Device comm_device_{torch::kCPU};
  /// Heartbeats go to the store at most this often (nanoseconds).
  static constexpr int64_t kHeartbeatNs = 1'000'000'000;
  int64_t step_ = -1, epoch_ = 0;  ///< position(): the last at()
  const char* phase_ = "training";
  int64_t last_beat_ns_ = 0;
  bool heartbeat_failed_ = false;
  bool store_silent_ = false;     // a diagnosis found the store silent: no further store operation
  std::vector<int> transport_fds_;  ///< Gloo's connections to the other ranks (abort_transport())
  int64_t silent_after_ms_ = 0;

  /// Milliseconds since the Unix epoch (heartbeats compare across processes, and hosts).
  static int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace policytrain::parallel
