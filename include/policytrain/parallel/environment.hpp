#pragma once
/// \file
/// parallel::Environment — where this process stands in a multi-process job, read from the variables its
/// launcher set: torchrun (and a Kubeflow PyTorchJob, which runs torchrun or sets its variables), Slurm's srun,
/// or Open MPI's mpirun (PMIx). One reader, shared by parallel::DataParallel and parallel::launch_ranks.
///
/// Precedence (docs/parallel.md, "Launchers"):
///  1. torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (any of RANK / WORLD_SIZE set);
///  2. Slurm: SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS), SLURM_LOCALID, SLURM_JOB_ID (SLURM_PROCID
///     set); MASTER_ADDR, unless set, is the first host of the step's node list (SLURM_STEP_NODELIST, else
///     SLURM_NODELIST, else the job's SLURM_JOB_NODELIST), bracket ranges expanded; MASTER_PORT,
///     unless set, is 15000 + SLURM_JOB_ID % 10000 (Lightning's SLURMEnvironment: 15000 + the id's last 4 digits);
///  3. Open MPI: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (PMIX_RANK, when set,
///     must agree); MASTER_ADDR and MASTER_PORT must be given (mpirun -x MASTER_ADDR=... -x MASTER_PORT=...).
/// A lower launcher whose variables describe the same number of processes must agree on the rank (else an error:
/// e.g. RANK exported once in a batch script for every task). One that describes another number is an outer
/// launcher and is ignored: srun starting one torchrun per node (WORLD_SIZE > SLURM_NTASKS), or mpirun under
/// sbatch, whose processes inherit the Slurm variables of its daemons (then Open MPI's describe this process).
/// A partial or contradictory environment is std::invalid_argument naming the variables, their values and what
/// was expected. Cost: a few getenv calls when a parallel policy is built.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <policytrain/detail/format.hpp>

namespace policytrain::parallel {

/// Expands a Slurm host list ("node1", "gpu[01-04,07]", "a[1-2],b3", "rack[1-2]-gpu[3-4]") into host names, in
/// Slurm's order (the first bracket varies slowest); a range keeps the zero padding of its first bound ("gpu[08-10]":
/// gpu08, gpu09, gpu10). Throws std::invalid_argument naming the list and what is wrong with it (an unbalanced
/// bracket, a range whose end is below its start, a bound that is not a number, an empty name, over 1M hosts).
inline std::vector<std::string> expand_slurm_nodelist(const std::string& list) {
  auto fail = [&](const std::string& why) {
    return std::invalid_argument(
        policytrain::detail::error_message("policytrain::parallel::expand_slurm_nodelist",
                                           policytrain::detail::format("'{}' is not a Slurm host list: {}", list, why),
                                           "names such as node1, gpu[01-04,07] or a[1-2],b3"));
  };
  constexpr size_t kMaxHosts = size_t{1} << 20;
  // Split at the commas outside brackets.
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char ch : list) {
    if (ch == '[') ++depth;
    if (ch == ']' && --depth < 0) throw fail("a ']' without its '['");
    if (depth > 1) throw fail("a '[' inside brackets");
    if (ch == ',' && depth == 0) {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (depth != 0) throw fail("a '[' without its ']'");
  items.push_back(cur);
  std::vector<std::string> hosts;
  for (const auto& item : items) {
    if (item.empty()) throw fail("an empty host name");
    // The item's expansions, the brackets from left to right (the first varies slowest).
    std::vector<std::string> partial{""};
    size_t i = 0;
    while (i < item.size()) {
      const size_t open = item.find('[', i);
      const std::string literal = item.substr(i, open == std::string::npos ? std::string::npos : open - i);
      for (auto& p : partial) p += literal;
      if (open == std::string::npos) break;
      const size_t close = item.find(']', open);
      const std::string inside = item.substr(open + 1, close - open - 1);
      if (inside.empty()) throw fail("empty brackets");
      std::vector<std::string> values;
      size_t s = 0;
      while (s <= inside.size()) {
        const size_t comma = std::min(inside.find(',', s), inside.size());
        const std::string part = inside.substr(s, comma - s);
        const size_t dash = part.find('-');
        const std::string lo = part.substr(0, dash), hi = dash == std::string::npos ? lo : part.substr(dash + 1);
        auto number = [&](const std::string& t) {
          if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos)
            throw fail(policytrain::detail::format("'{}' in [{}] is not a number or a range a-b", part, inside));
          return std::stoll(t);
        };
        const long long a = number(lo), b = number(hi);
        if (b < a) throw fail(policytrain::detail::format("the range {} ends below its start", part));
        if (static_cast<unsigned long long>(b - a) >= kMaxHosts) throw fail("over 1048576 hosts");
        for (long long v = a; v <= b; ++v) {
          std::string t = std::to_string(v);
          if (t.size() < lo.size()) t.insert(0, lo.size() - t.size(), '0');
          values.push_back(std::move(t));
        }
        s = comma + 1;
      }
      if (partial.size() * values.size() > kMaxHosts) throw fail("over 1048576 hosts");
      std::vector<std::string> next;
      next.reserve(partial.size() * values.size());
      for (const auto& p : partial)
        for (const auto& v : values) next.push_back(p + v);
      partial = std::move(next);
      i = close + 1;
    }
    for (auto& p : partial) hosts.push_back(std::move(p));
    if (hosts.size() > kMaxHosts) throw fail("over 1048576 hosts");
  }
  return hosts;
}

/// The store's port of a Slurm job when MASTER_PORT is not set: 15000 + job_id % 10000 (Lightning's
/// SLURMEnvironment: 15000 plus the id's last four digits), so every task of a job derives the same port.
inline int slurm_master_port(long long job_id) { return 15000 + static_cast<int>(job_id % 10000); }

namespace detail {

/// How one launcher describes a rank: the variables Environment::from reads for it, and the others it sets per
/// rank. The one list of launcher variables: Environment reads a launcher's rank, world size and local rank by
/// these names, and launch_local removes every one of them (LauncherVariables::each) from its ranks' environments,
/// so that a rank it starts is its own, not an outer launcher's task. A new launcher is one more entry of
/// kLaunchers (docs/writing-a-policy.md, "A launcher environment").
struct LauncherVariables {
  const char* source;      ///< Environment::source when it describes this process: "torchrun", "slurm", "mpi"
  const char* launcher;    ///< the program that sets them, in messages: "torchrun", "srun", "mpirun"
  const char* rank;        ///< this process's rank
  const char* world;       ///< the number of processes
  const char* local_rank;  ///< the rank on this node
  /// The launcher's other per-rank variables (nullptr-padded): read for a check (PMIX_RANK, agent store) or not read.
  std::array<const char*, 5> others;

  /// Calls f(name) for every variable of every launcher of kLaunchers.
  template <class F>
  static constexpr void each(F&& f);
};

/// The launchers, in Environment's precedence: torchrun (and a Kubeflow PyTorchJob), Slurm's srun, Open MPI's mpirun.
inline constexpr LauncherVariables kLaunchers[] = {
    {"torchrun", "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK",
     {"LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE", "TORCHELASTIC_USE_AGENT_STORE"}},
    {"slurm", "srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", {"SLURM_NPROCS", "SLURM_STEP_NUM_TASKS"}},
    {"mpi", "mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     {"OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_RANK"}},
};
inline constexpr const LauncherVariables& kTorchrunVariables = kLaunchers[0];
inline constexpr const LauncherVariables& kSlurmVariables = kLaunchers[1];
inline constexpr const LauncherVariables& kMpiVariables = kLaunchers[2];

template <class F>
constexpr void LauncherVariables::each(F&& f) {
  for (const auto& l : kLaunchers) {
    f(l.rank);
    f(l.world);
    f(l.local_rank);
    for (const char* v : l.others)
      if (v) f(v);
  }
}

}  // namespace detail

/// Where this process stands in the job (see the file comment for the launchers read and their precedence).
struct Environment {
  /// This process's rank (0 when no launcher's variables are set).
  int rank = 0;
  /// Number of processes in the job (1 when no launcher's variables are set).
  int world_size = 1;
  /// Rank on this node (selects the device; defaults to the rank).
  int local_rank = 0;
  /// Host of the store, MASTER_ADDR (rank 0's node).
  std::string master_addr = "127.0.0.1";
  /// TCP port of the store, MASTER_PORT.
  int master_port = 29500;
  bool agent_store = false;   ///< TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent hosts the store
  int restart_count = 0;      ///< TORCHELASTIC_RESTART_COUNT: prefixes the keys of this attempt
  /// Whose variables described this process: "torchrun", "slurm", "mpi", or "none" (one process).
  std::string source = "none";

  /// Reads the process environment. Throws std::invalid_argument naming the variables, their values and what
  /// was expected.
  static Environment from_env() {
    return from([](const char* n) -> std::optional<std::string> {
      const char* v = std::getenv(n);
      return v ? std::optional<std::string>(v) : std::nullopt;
    });
  }

  /// Reads `vars` instead of the process environment (a variable absent from the map is unset).
  static Environment from(const std::map<std::string, std::string>& vars) {
    return from([&](const char* n) -> std::optional<std::string> {
      const auto it = vars.find(n);
      return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    });
  }

  /// Reads the variables through `get` (nullopt: unset).
  static Environment from(const std::function<std::optional<std::string>(const char*)>& get);
};

namespace detail {

inline std::invalid_argument env_error(const std::string& what) {
  return std::invalid_argument(policytrain::detail::error_message("policytrain::parallel::Environment", what));
}

inline int env_int(const char* name, const std::string& v, long long lo, long long hi, const char* launcher) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (errno || end == v.c_str() || *end != '\0' || x < lo || x > hi)
    throw env_error(policytrain::detail::format("{}='{}' is not an integer in [{}, {}]; set it as {} does", name, v,
                                                lo, hi, launcher));
  return static_cast<int>(x);
}

/// One launcher's view of this process: rank, world size, local rank, and how it names them in messages.
struct LauncherView {
  std::string source;
  int rank = 0, world = 1, local = 0;
  std::string rank_var, world_var;
};

}  // namespace detail

inline Environment Environment::from(const std::function<std::optional<std::string>(const char*)>& get) {
  using detail::env_error;
  using detail::env_int;
  constexpr long long kMax = 1 << 20;
  Environment e;
  const auto& tv = detail::kTorchrunVariables;
  const auto& sv = detail::kSlurmVariables;
  const auto& mv = detail::kMpiVariables;
  const auto world_s = get(tv.world), rank_s = get(tv.rank);
  // The step's task count before the job's: srun inside an allocation may start fewer tasks than it holds.
  const auto step_ntasks_s = get("SLURM_STEP_NUM_TASKS");
  const auto procid_s = get(sv.rank), ntasks_s = step_ntasks_s ? step_ntasks_s : get(sv.world);
  const auto orank_s = get(mv.rank), osize_s = get(mv.world);

  // Each launcher's view, read only when its variables are there.
  std::optional<detail::LauncherView> torchrun, slurm, mpi;
  if (world_s || rank_s) {
    detail::LauncherView v{tv.source, 0, 1, 0, tv.rank, tv.world};
    if (world_s) v.world = env_int(tv.world, *world_s, 1, kMax, tv.launcher);
    if (rank_s) {
      v.rank = env_int(tv.rank, *rank_s, 0, kMax, tv.launcher);
    } else if (v.world > 1) {
      throw env_error(policytrain::detail::format(
          "WORLD_SIZE={} but RANK is not set; set RANK to 0..{} in each process, or launch with torchrun or "
          "parallel::launch_local (LaunchOptions::nproc = {})", v.world, v.world - 1, v.world));
    }
    if (v.rank >= v.world)
      throw env_error(policytrain::detail::format("RANK={} but WORLD_SIZE={}; RANK must be in 0..{}", v.rank, v.world,
                                                  v.world - 1));
    v.local = v.rank;
    if (const auto l = get(tv.local_rank)) v.local = env_int(tv.local_rank, *l, 0, kMax, tv.launcher);
    torchrun = v;
  }
  if (procid_s) {
    const char* world_var = step_ntasks_s ? "SLURM_STEP_NUM_TASKS" : sv.world;
    detail::LauncherView v{sv.source, 0, 1, 0, sv.rank, world_var};
    v.rank = env_int(sv.rank, *procid_s, 0, kMax, sv.launcher);
    if (ntasks_s) {
      v.world = env_int(world_var, *ntasks_s, 1, kMax, sv.launcher);
      if (v.rank >= v.world)
        throw env_error(policytrain::detail::format(
            "SLURM_PROCID={} but {}={}; SLURM_PROCID must be in 0..{} (srun sets both)", v.rank, world_var, v.world,
            v.world - 1));
      v.local = v.rank;
      if (const auto l = get(sv.local_rank)) v.local = env_int(sv.local_rank, *l, 0, kMax, sv.launcher);
      slurm = v;
    } else if (!torchrun) {
      throw env_error(policytrain::detail::format(
          "SLURM_PROCID={} is set but SLURM_NTASKS is not; expected both, as srun sets them (run the program "
          "through srun, e.g. srun --ntasks=4 ./app, or unset SLURM_PROCID)", v.rank));
    }
  }
  if (orank_s || osize_s) {
    detail::LauncherView v{mv.source, 0, 1, 0, mv.rank, mv.world};
    if (!orank_s || !osize_s) {
      if (!torchrun && !slurm)
        throw env_error(policytrain::detail::format(
            "{}='{}' is set but {} is not; expected both, as Open MPI's mpirun sets them", orank_s ? "OMPI_COMM_WORLD_RANK" : "OMPI_COMM_WORLD_SIZE",
            orank_s ? *orank_s : *osize_s, orank_s ? "OMPI_COMM_WORLD_SIZE" : "OMPI_COMM_WORLD_RANK"));
    } else {
      v.rank = env_int(mv.rank, *orank_s, 0, kMax, mv.launcher);
      v.world = env_int(mv.world, *osize_s, 1, kMax, mv.launcher);
      if (v.rank >= v.world)
        throw env_error(policytrain::detail::format(
            "OMPI_COMM_WORLD_RANK={} but OMPI_COMM_WORLD_SIZE={}; the rank must be in 0..{} (mpirun sets both)",
            v.rank, v.world, v.world - 1));
      if (const auto p = get("PMIX_RANK"); p && env_int("PMIX_RANK", *p, 0, kMax, "mpirun") != v.rank)
        throw env_error(policytrain::detail::format(
            "OMPI_COMM_WORLD_RANK={} and PMIX_RANK={} disagree; both are this process's rank in mpirun's job: "
            "unset the one set by hand", v.rank, *p));
      v.local = v.rank;
      if (const auto l = get(mv.local_rank)) v.local = env_int(mv.local_rank, *l, 0, kMax, mv.launcher);
      mpi = v;
    }
  }

  // The chosen launcher; the others, when they describe as many processes, must agree with it.
  std::optional<detail::LauncherView> chosen;
  if (torchrun) chosen = torchrun;
  else if (slurm && mpi && mpi->world != slurm->world) chosen = mpi;  // mpirun under sbatch: Slurm's are its daemons'
  else if (slurm) chosen = slurm;
  else chosen = mpi;
  if (!chosen) return e;
  for (const auto* other : {&slurm, &mpi}) {
    if (!*other || (*other)->source == chosen->source || (*other)->world != chosen->world) continue;
    if ((*other)->rank != chosen->rank)
      throw env_error(policytrain::detail::format(
          "{}={} and {}={} disagree while {}={} and {}={} describe the same {} processes; expected the same rank "
          "from both launchers. Unset the variables set by hand (e.g. RANK exported once in a batch script "
          "reaches every task with one value: let srun's SLURM_PROCID give each its own)",
          chosen->rank_var, chosen->rank, (*other)->rank_var, (*other)->rank, chosen->world_var, chosen->world,
          (*other)->world_var, (*other)->world, chosen->world));
  }
  e.source = chosen->source;
  e.rank = chosen->rank;
  e.world_size = chosen->world;
  e.local_rank = chosen->local;

  const auto addr = get("MASTER_ADDR"), port = get("MASTER_PORT");
  if (e.world_size > 1) {
    if (addr && !addr->empty()) {
      e.master_addr = *addr;
    } else if (e.source == "slurm") {
      // The step's nodes before the job's: `srun -N2 -r2` in an allocation of dev[7-10] runs task 0 on dev9, the
      // step's first node (srun sets SLURM_STEP_NODELIST and SLURM_NODELIST to the step's; Lightning's
      // SLURMEnvironment reads SLURM_NODELIST); the job's list names dev7, where no task of the step runs.
      std::optional<std::string> nodes;
      const char* nodes_var = nullptr;
      for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST"}) {
        nodes = get(var);
        nodes_var = var;
        if (nodes && !nodes->empty()) break;
      }
      if (!nodes || nodes->empty())
        throw env_error(policytrain::detail::format(
            "SLURM_NTASKS={} but neither MASTER_ADDR nor SLURM_STEP_NODELIST, SLURM_NODELIST or SLURM_JOB_NODELIST "
            "is set; run the program through srun, which sets the node list, or set MASTER_ADDR to the host of rank 0",
            e.world_size));
      try {
        e.master_addr = expand_slurm_nodelist(*nodes).front();
      } catch (const std::invalid_argument& x) {
        throw env_error(policytrain::detail::error_message(
            nodes_var, policytrain::detail::format("{}; set MASTER_ADDR to the host of rank 0", x.what())));
      }
    } else if (e.source == "mpi") {
      throw env_error(policytrain::detail::format(
          "OMPI_COMM_WORLD_SIZE={} but MASTER_ADDR is not set (Open MPI gives no store address); set MASTER_ADDR "
          "and MASTER_PORT for every rank, e.g. mpirun -np {} -x MASTER_ADDR=$(hostname) -x MASTER_PORT=29500 ./app",
          e.world_size, e.world_size));
    } else {
      throw env_error(policytrain::detail::format(
          "WORLD_SIZE={} but MASTER_ADDR is not set; set it to the address of the node that runs rank 0", e.world_size));
    }
    if (port) {
      e.master_port = env_int("MASTER_PORT", *port, 1, 65535, e.source == "torchrun" ? "torchrun" : "a TCP port");
    } else if (e.source == "slurm") {
      const auto job = get("SLURM_JOB_ID");
      if (!job)
        throw env_error(policytrain::detail::format(
            "SLURM_NTASKS={} but neither MASTER_PORT nor SLURM_JOB_ID is set; run the program through srun, or set "
            "MASTER_PORT to a free TCP port on MASTER_ADDR={}", e.world_size, e.master_addr));
      e.master_port = slurm_master_port(env_int("SLURM_JOB_ID", *job, 0, (1LL << 31) - 1, "Slurm"));
    } else if (e.source == "mpi") {
      throw env_error(policytrain::detail::format(
          "OMPI_COMM_WORLD_SIZE={} but MASTER_PORT is not set (Open MPI gives no store port); set it for every rank, "
          "e.g. mpirun -x MASTER_ADDR={} -x MASTER_PORT=29500 ./app", e.world_size, e.master_addr));
    } else {
      throw env_error(policytrain::detail::format(
          "WORLD_SIZE={} but MASTER_PORT is not set; set it to a free TCP port on MASTER_ADDR={}", e.world_size,
          e.master_addr));
    }
  }
  if (e.source == "torchrun") {
    if (const auto v = get("TORCHELASTIC_USE_AGENT_STORE")) e.agent_store = *v == "True";
    if (const auto v = get("TORCHELASTIC_RESTART_COUNT"))
      e.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", *v, 0, 1 << 30, "torchrun");
  }
  return e;
}

}  // namespace policytrain::parallel
