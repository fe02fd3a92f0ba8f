#pragma once
/// \file
/// checkpoint::Layout — the one place that knows how a checkpoint directory is laid out: every file name is built
/// here and parsed back here (nowhere else), and so are the listing of a directory's checkpoints, the resume order,
/// the rotation of periodic files (keep the newest k), the removal of a killed write's temporary files, and the
/// set-aside of another run's files into `previous-<run id>/`. checkpoint::Disk reaches its directory only
/// through a Layout, so that another layout (sharded checkpoints: a folder per step with a manifest) replaces this
/// class and nothing else. Knows no Trainer context: paths, metadata and run ids only.
///
/// Names (in `directory`):
///
///     last.ckpt            the newest state (epoch ends, wall-clock saves, fit end)
///     best.ckpt            the state whose validation scored best; best.pt: its evaluated weights, torch.load-able
///     best-e<NNNN>.ckpt    top-k: the k best epochs (1-based epoch number)
///     epoch-<NNNN>.ckpt    every n epochs (1-based epoch number)
///     step-<NNNNNNNN>.ckpt every n optimizer steps
///     final.pt             the weights at fit end, torch.load-able
///     run.lock             the job that holds the directory (checkpoint/run_lock.hpp)
///     .<name>.tmp-<pid>    an atomic write in progress (checkpoint/format.hpp, write_atomic)
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <policytrain/checkpoint/format.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::checkpoint {

/// The checkpoint files of `dir` whose header and metadata are readable, newest first (by global step, then
/// epoch, then data position, then time), and the unreadable ones with their reasons.
struct Candidates {
  /// Readable files with their metadata, newest first.
  std::vector<std::pair<std::filesystem::path, nlohmann::json>> readable;
  /// Unreadable files with the reason each could not be read.
  std::vector<std::pair<std::filesystem::path, std::string>> unreadable;
};

/// A file in the order auto-resume tries it: `skip` says why it is not continued ("" when it is tried).
struct ResumeCandidate {
  std::filesystem::path file;  ///< the checkpoint file
  nlohmann::json meta;         ///< its metadata
  std::string skip;            ///< why it is not continued ("" when it is tried)
};

/// What set_aside moved: `files` files of run `run_id` (empty: without id; its newest step `newest_step`) into
/// `destination`; `resumed_from` is where the file a run took its weights from now is (unchanged if not moved).
struct SetAside {
  size_t files = 0;                    ///< files moved
  std::string run_id;                  ///< the run they belong to ("" without id)
  int64_t newest_step = 0;             ///< that run's newest step
  std::filesystem::path destination;   ///< where they went (`previous-<run id>/`)
  std::filesystem::path resumed_from;  ///< where the file a run took its weights from is now
  bool resumed_from_moved = false;     ///< whether that file was among those moved
};

/// The layout of one checkpoint directory (see the file comment).
class Layout {
 public:
  /// What a name in the directory is.
  enum class Kind { last, best, best_top, epoch, step, final_export, best_export, temporary, other };
  /// A parsed name: its kind and its number (the 1-based epoch of best_top and epoch, the step of step; else -1).
  struct Name {
    Kind kind = Kind::other;  ///< what the name is
    int64_t number = -1;      ///< the 1-based epoch of best_top and epoch, the step of step; else -1
  };

  Layout() = default;
  /// The layout of `directory`.
  explicit Layout(std::filesystem::path directory) : dir_(std::move(directory)) {}
  /// The directory.
  const std::filesystem::path& directory() const { return dir_; }
  /// `name` in the directory.
  std::filesystem::path path(std::string_view name) const { return dir_ / name; }

  // --- names: built here only ---
  /// The newest state.
  static std::string last() { return "last.ckpt"; }
  /// The state whose validation scored best.
  static std::string best() { return "best.ckpt"; }
  /// The top-k file of the epoch numbered `epoch_number` (1-based).
  static std::string best_top(int64_t epoch_number) { return policytrain::detail::format("best-e{:04d}.ckpt", epoch_number); }
  /// The periodic file of the epoch numbered `epoch_number` (1-based).
  static std::string epoch(int64_t epoch_number) { return policytrain::detail::format("epoch-{:04d}.ckpt", epoch_number); }
  /// The periodic file of optimizer step `step`.
  static std::string step(int64_t step) { return policytrain::detail::format("step-{:08d}.ckpt", step); }
  /// The weights at fit end, torch.load-able.
  static std::string final_export() { return "final.pt"; }
  /// The best checkpoint's evaluated weights, torch.load-able.
  static std::string best_export() { return "best.pt"; }

  // --- names: parsed here only ---
  /// What `name` (a file name, no directory) is.
  static Name parse(std::string_view name);
  /// A checkpoint file (*.ckpt, not hidden): listed, resumed from.
  static bool is_checkpoint(std::string_view name);
  /// A file of a run: its checkpoints and its exports (what set_aside moves).
  static bool is_run_file(std::string_view name) {
    const Kind k = parse(name).kind;
    return is_checkpoint(name) || k == Kind::final_export || k == Kind::best_export;
  }

  // --- the directory ---
  /// Creates the directory and removes the temporary files of a killed write (never a checkpoint). Throws
  /// CheckpointError naming the directory when it cannot be created.
  void prepare() const;
  /// Lists the checkpoint files (see Candidates); never throws for a bad file.
  Candidates list() const;
  /// The order auto-resume tries the files of `c` in: newest first; of the files `same_fingerprint` accepts, only
  /// those of the run that wrote last (the run id of the newest by creation time) are tried, the others come with
  /// the reason they are skipped. Files of another fingerprint are tried (the loader reports how they differ).
  static std::vector<ResumeCandidate> resume_order(
      const Candidates& c, const std::function<bool(const std::filesystem::path&, const nlohmann::json&)>& same_fingerprint);
  /// Keeps the newest `keep` periodic files (epoch-, step-) of run `run_id`; another run's files and unreadable
  /// ones stay. `keep` <= 0: keeps all.
  void rotate(const std::string& run_id, int64_t keep) const;
  /// Removes `name` from the directory, if there.
  void remove(std::string_view name) const {
    std::error_code ec;
    std::filesystem::remove(path(name), ec);
  }
  /// A fresh run's start: moves the run files (is_run_file) already in the directory to `previous-<run id>/` (the
  /// id of the newest readable one; a UTC time stamp when none records a usable id); `refuse`: throws
  /// CheckpointError naming them and the choices instead, touching nothing. `resumed_from`: the file the new run
  /// took its weights from (empty: none), followed if it moves. Returns what was moved (files == 0: nothing).
  SetAside set_aside(bool refuse, const std::filesystem::path& resumed_from) const;

 private:
  std::filesystem::path dir_;
};

#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL Layout::Name Layout::parse(std::string_view name) {
  auto number = [&](std::string_view prefix, size_t digits) -> std::optional<int64_t> {
    if (!name.starts_with(prefix) || !name.ends_with(".ckpt")) return std::nullopt;
    const std::string_view n = name.substr(prefix.size(), name.size() - prefix.size() - 5);
    if (n.size() < digits || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }) || n.size() > 18)
      return std::nullopt;
    return std::stoll(std::string(n));
  };
  if (name == last()) return {Kind::last, -1};
  if (name == best()) return {Kind::best, -1};
  if (name == final_export()) return {Kind::final_export, -1};
  if (name == best_export()) return {Kind::best_export, -1};
  if (detail::is_temporary_name(name)) return {Kind::temporary, -1};
  if (auto n = number("best-e", 4)) return {Kind::best_top, *n};
  if (auto n = number("epoch-", 4)) return {Kind::epoch, *n};
  if (auto n = number("step-", 8)) return {Kind::step, *n};
  return {Kind::other, -1};
}

POLICYTRAIN_DECL bool Layout::is_checkpoint(std::string_view name) {
  return !name.empty() && name.front() != '.' && name.ends_with(".ckpt") && name.size() > 5;
}

POLICYTRAIN_DECL void Layout::prepare() const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw CheckpointError(policytrain::detail::format("policytrain::checkpoint: cannot create the directory {}: {}",
                                                            dir_.string(), ec.message()));
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (parse(e.path().filename().string()).kind == Kind::temporary) fs::remove(e.path(), ec);
}

POLICYTRAIN_DECL Candidates Layout::list() const {
  namespace fs = std::filesystem;
  Candidates c;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_regular_file() || !is_checkpoint(e.path().filename().string())) continue;
    try {
      auto meta = read_meta(e.path());
      for (const char* k : {"global_step", "epoch", "batch_in_epoch", "created_unix_ns"}) (void)meta_int(e.path(), meta, k, 0);
      (void)meta_string(e.path(), meta, "run_id", "");
      c.readable.emplace_back(e.path(), std::move(meta));
    } catch (const CheckpointError& err) {
      c.unreadable.emplace_back(e.path(), err.what());
    }
  }
  auto key = [](const std::pair<fs::path, nlohmann::json>& f) {
    const auto& [p, m] = f;  // fields validated above
    return std::tuple(meta_int(p, m, "global_step", -1), meta_int(p, m, "epoch", -1), meta_int(p, m, "batch_in_epoch", -1),
                      meta_int(p, m, "created_unix_ns", 0));
  };
  std::stable_sort(c.readable.begin(), c.readable.end(), [&](const auto& a, const auto& b) { return key(a) > key(b); });
  return c;
}

POLICYTRAIN_DECL std::vector<ResumeCandidate> Layout::resume_order(
    const Candidates& c, const std::function<bool(const std::filesystem::path&, const nlohmann::json&)>& same_fingerprint) {
  // Of the files this run's fingerprint matches, only those of the run that wrote last are continued: the run id
  // of the newest such file by creation time. Another run of the same program is never a candidate, however far
  // its steps go (a fresh run's step 63 beats an older run's 740).
  std::optional<std::string> latest;
  int64_t newest = std::numeric_limits<int64_t>::min();
  for (const auto& [file, meta] : c.readable)
    if (const int64_t t = meta_int(file, meta, "created_unix_ns", 0); t > newest && same_fingerprint(file, meta)) {
      newest = t;
      latest = meta_string(file, meta, "run_id", "");
    }
  std::vector<ResumeCandidate> order;
  for (const auto& [file, meta] : c.readable) {
    const std::string id = meta_string(file, meta, "run_id", "");
    std::string skip;
    if (latest && id != *latest && same_fingerprint(file, meta))
      skip = policytrain::detail::format(
          "policytrain::checkpoint: {}: written by another run (run {}, step {}) than the one that wrote last "
          "(run {}); not continued (a fresh run moves such files to previous-<run id>/, "
          "checkpoint::Disk::Options::existing)", file.string(), id.empty() ? "without id" : id,
          meta_int(file, meta, "global_step", 0), latest->empty() ? "without id" : *latest);
    order.push_back({file, meta, std::move(skip)});
  }
  return order;
}

POLICYTRAIN_DECL void Layout::rotate(const std::string& run_id, int64_t keep) const {
  if (keep <= 0) return;
  namespace fs = std::filesystem;
  std::vector<std::pair<std::tuple<int64_t, int64_t>, fs::path>> periodic;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const Kind k = parse(e.path().filename().string()).kind;
    if (k != Kind::epoch && k != Kind::step) continue;
    // Only this run's files count: another run's (left beside a resumed run, or copied in) neither outrank this
    // run's newest files nor go. An unreadable file is not known to be this run's (its writes are atomic): it stays.
    try {
      const auto m = read_meta(e.path());
      if (meta_string(e.path(), m, "run_id", "") != run_id) continue;
      periodic.push_back({{meta_int(e.path(), m, "global_step", 0), meta_int(e.path(), m, "epoch", 0)}, e.path()});
    } catch (const CheckpointError&) {
      continue;
    }
  }
  std::sort(periodic.begin(), periodic.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t i = static_cast<size_t>(keep); i < periodic.size(); ++i) fs::remove(periodic[i].second, ec);
}

POLICYTRAIN_DECL SetAside Layout::set_aside(bool refuse, const std::filesystem::path& resumed_from) const {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  SetAside r;
  r.resumed_from = resumed_from;
  int64_t newest = std::numeric_limits<int64_t>::min();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (e.is_regular_file() && is_run_file(e.path().filename().string())) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const Candidates c = list();
  for (const auto& [file, meta] : c.readable)
    if (const int64_t t = meta_int(file, meta, "created_unix_ns", 0); t > newest) {
      newest = t;
      r.run_id = meta_string(file, meta, "run_id", "");
      r.newest_step = meta_int(file, meta, "global_step", 0);
    }
  if (!files.empty() && refuse) {
    std::vector<std::string> names;
    for (size_t i = 0; i < files.size() && i < 5; ++i) names.push_back(files[i].filename().string());
    if (files.size() > 5) names.push_back(policytrain::detail::format("and {} more", files.size() - 5));
    throw CheckpointError(policytrain::detail::format(
        "policytrain::checkpoint: {} holds {} checkpoint file(s) of another run (run {}, newest step {}: {}), and "
        "this run starts fresh{}; continue that run (resume = \"auto\"), choose another directory, remove them, or "
        "set checkpoint::Disk::Options::existing = Existing::rotate to move them to previous-<run id>/ "
        "(existing is refuse)", dir_.string(), files.size(), r.run_id.empty() ? "without id" : r.run_id,
        r.newest_step, fmt::join(names, ", "),
        resumed_from.empty() ? std::string() : policytrain::detail::format(" from the weights of {}", resumed_from.string())));
  }
  if (files.empty()) return r;
  // The id names a folder: only letters, digits, '-' and '_' (a forged file's id could hold "../").
  const std::string& id = r.run_id;
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
  fs::path dest = dir_ / base;
  for (int i = 2; fs::exists(dest); ++i) dest = dir_ / policytrain::detail::format("{}-{}", base, i);
  fs::create_directories(dest, ec);
  if (ec) throw CheckpointError(policytrain::detail::format("policytrain::checkpoint: cannot create {} to move another run's files "
                                                            "into: {}", dest.string(), ec.message()));
  for (const auto& f : files) {
    fs::rename(f, dest / f.filename(), ec);
    if (ec) throw CheckpointError(policytrain::detail::format("policytrain::checkpoint: cannot move {} to {}: {}", f.string(),
                                                              dest.string(), ec.message()));
    if (!resumed_from.empty() &&
        fs::absolute(f, ec).lexically_normal() == fs::absolute(resumed_from, ec).lexically_normal()) {
      r.resumed_from = dest / f.filename();
      r.resumed_from_moved = true;
    }
  }
  r.files = files.size();
  r.destination = dest;
  return r;
}
#endif

}  // namespace policytrain::checkpoint
