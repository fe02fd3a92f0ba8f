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
///
/// A sharded checkpoint (checkpoint::Disk::Options::sharded, checkpoint/sharded.hpp) is a folder of the same name
/// (`last.ckpt/`, `step-<NNNNNNNN>.ckpt/`, ...), which holds:
///
///     manifest.json                           written last (atomic rename): without it the folder is no checkpoint
///     common-<step>.bin                       rank 0's part: model, Trainer state, generators, optimizer groups
///     shard-<step>-r<rank>-of-<world>.bin     a rank's optimizer state, keyed by global parameter index
///     shard-<step>-r<rank>-of-<world>.json    its digest, until the manifest holds it
///
/// Every listing, rotation, removal and set-aside below takes such a folder as one checkpoint; its metadata is the
/// manifest's (read_checkpoint_meta).
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
  /// Sharded checkpoint folders without their manifest (a save that did not finish): no checkpoint, skipped.
  std::vector<std::filesystem::path> incomplete;
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

  // --- the files of a sharded checkpoint's folder: built and parsed here only ---
  /// What a file in a sharded checkpoint's folder is.
  enum class PartKind { manifest, common, shard, shard_info, temporary, other };
  /// A parsed part name: its kind, step, rank and world size (-1 where the kind has none).
  struct Part {
    PartKind kind = PartKind::other;  ///< what the file is
    int64_t step = -1;                ///< the save's optimizer step (common, shard, shard_info)
    int64_t rank = -1;                ///< the writing rank (shard, shard_info)
    int64_t world = -1;               ///< the world size of the save (shard, shard_info)
  };
  /// The manifest, written last.
  static std::string manifest() { return "manifest.json"; }
  /// Rank 0's common part of the save at optimizer step `step`.
  static std::string common(int64_t step) { return policytrain::detail::format("common-{:08d}.bin", step); }
  /// Rank `rank`'s shard (of `world`) of the save at step `step`.
  static std::string shard(int64_t step, int64_t rank, int64_t world) {
    return policytrain::detail::format("shard-{:08d}-r{:05d}-of-{:05d}.bin", step, rank, world);
  }
  /// The digest of that shard, read by rank 0 to write the manifest, then removed.
  static std::string shard_info(int64_t step, int64_t rank, int64_t world) {
    return policytrain::detail::format("shard-{:08d}-r{:05d}-of-{:05d}.json", step, rank, world);
  }
  /// What `name` (a file name in a sharded checkpoint's folder) is.
  static Part parse_part(std::string_view name);
  /// Whether `p` is a sharded checkpoint's folder (a directory; complete or not).
  static bool is_sharded(const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_directory(p, ec);
  }
  /// The manifest of the sharded checkpoint `folder`, parsed and bounded (kMaxMetaBytes, kMaxMetaDepth); its
  /// files' digests are not checked here (checkpoint/sharded.hpp, verify_sharded). Throws CheckpointError naming
  /// the folder when it has none (a save that did not finish) or it is malformed.
  static nlohmann::json read_manifest(const std::filesystem::path& folder);
  /// The metadata of a checkpoint: a file's (read_meta), or a sharded folder's manifest.
  static nlohmann::json read_checkpoint_meta(const std::filesystem::path& p) {
    return is_sharded(p) ? read_manifest(p) : read_meta(p);
  }

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
  /// Removes `name` from the directory (a file, or a sharded checkpoint's folder), if there.
  void remove(std::string_view name) const {
    std::error_code ec;
    std::filesystem::remove_all(path(name), ec);
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

POLICYTRAIN_DECL Layout::Part Layout::parse_part(std::string_view name) {
  if (name == manifest()) return {PartKind::manifest};
  if (detail::is_temporary_name(name)) return {PartKind::temporary};
  auto digits = [](std::string_view n) -> std::optional<int64_t> {
    if (n.empty() || n.size() > 18 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    return std::stoll(std::string(n));
  };
  if (name.starts_with("common-") && name.ends_with(".bin")) {
    if (auto st = digits(name.substr(7, name.size() - 11))) return {PartKind::common, *st};
    return {};
  }
  if (!name.starts_with("shard-")) return {};
  const bool info = name.ends_with(".json");
  if (!info && !name.ends_with(".bin")) return {};
  // shard-<step>-r<rank>-of-<world>
  const std::string_view body = name.substr(6, name.size() - 6 - (info ? 5 : 4));
  const size_t r = body.find("-r"), of = body.find("-of-");
  if (r == std::string_view::npos || of == std::string_view::npos || of < r) return {};
  const auto st = digits(body.substr(0, r)), rk = digits(body.substr(r + 2, of - r - 2)), w = digits(body.substr(of + 4));
  if (!st || !rk || !w) return {};
  return {info ? PartKind::shard_info : PartKind::shard, *st, *rk, *w};
}

POLICYTRAIN_DECL nlohmann::json Layout::read_manifest(const std::filesystem::path& folder) {
  namespace fs = std::filesystem;
  const fs::path file = folder / manifest();
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw CheckpointError(policytrain::detail::error_message(
        policytrain::detail::format("policytrain::checkpoint: {}", folder.string()),
        policytrain::detail::format("has no {}: a sharded save that did not finish (its manifest is written last)",
                                    manifest()),
        "a sharded checkpoint folder with its manifest", "it is no checkpoint; resume from another one"));
  const uint64_t size = detail::file_size_of(file);
  if (size > kMaxMetaBytes) detail::fail(file, policytrain::detail::format("the manifest has {} bytes, more than the limit of {}", size, kMaxMetaBytes));
  const std::string text = detail::read_bytes(file, 0, size, size, "the manifest");
  detail::check_meta_bounds(file, text);
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    detail::fail(file, policytrain::detail::format("the manifest is not valid JSON: {}", e.what()));
  }
  if (!m.is_object() || !m.contains("sharded") || !m["sharded"].is_object())
    detail::fail(file, "the manifest has no \"sharded\" object; it was not written by a sharded checkpoint::Disk save");
  return m;
}

POLICYTRAIN_DECL bool Layout::is_checkpoint(std::string_view name) {
  return !name.empty() && name.front() != '.' && name.ends_with(".ckpt") && name.size() > 5;
}

POLICYTRAIN_DECL void Layout::prepare() const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw CheckpointError(policytrain::detail::error_message(
      "policytrain::checkpoint", policytrain::detail::format(
          "cannot create the directory {}: {}",
                                                            dir_.string(), ec.message())));
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (parse(e.path().filename().string()).kind == Kind::temporary) fs::remove(e.path(), ec);
    if (is_checkpoint(e.path().filename().string()) && is_sharded(e.path()))  // a killed sharded save's temporaries
      for (const auto& f : fs::directory_iterator(e.path(), ec))
        if (parse_part(f.path().filename().string()).kind == PartKind::temporary) fs::remove(f.path(), ec);
  }
}

POLICYTRAIN_DECL Candidates Layout::list() const {
  namespace fs = std::filesystem;
  Candidates c;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!(e.is_regular_file() || e.is_directory()) || !is_checkpoint(e.path().filename().string())) continue;
    if (e.is_directory() && !fs::exists(e.path() / manifest(), ec)) {
      c.incomplete.push_back(e.path());  // a sharded save that did not finish: no checkpoint
      continue;
    }
    try {
      auto meta = read_checkpoint_meta(e.path());
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
      const auto m = read_checkpoint_meta(e.path());
      if (meta_string(e.path(), m, "run_id", "") != run_id) continue;
      periodic.push_back({{meta_int(e.path(), m, "global_step", 0), meta_int(e.path(), m, "epoch", 0)}, e.path()});
    } catch (const CheckpointError&) {
      continue;
    }
  }
  std::sort(periodic.begin(), periodic.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t i = static_cast<size_t>(keep); i < periodic.size(); ++i) fs::remove_all(periodic[i].second, ec);
}

POLICYTRAIN_DECL SetAside Layout::set_aside(bool refuse, const std::filesystem::path& resumed_from) const {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  SetAside r;
  r.resumed_from = resumed_from;
  int64_t newest = std::numeric_limits<int64_t>::min();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if ((e.is_regular_file() || (e.is_directory() && is_checkpoint(e.path().filename().string()))) &&
        is_run_file(e.path().filename().string()))
      files.push_back(e.path());
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
    throw CheckpointError(policytrain::detail::error_message(
        "policytrain::checkpoint", policytrain::detail::format(
            "{} holds {} checkpoint file(s) of another run (run {}, newest step {}: {}), and "
        "this run starts fresh{}; continue that run (resume = \"auto\"), choose another directory, remove them, or "
        "set checkpoint::Disk::Options::existing = Existing::rotate to move them to previous-<run id>/ "
        "(existing is refuse)", dir_.string(), files.size(), r.run_id.empty() ? "without id" : r.run_id,
        r.newest_step, fmt::join(names, ", "),
        resumed_from.empty() ? std::string() : policytrain::detail::format(" from the weights of {}", resumed_from.string()))));
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
  if (ec) throw CheckpointError(policytrain::detail::error_message(
      "policytrain::checkpoint", policytrain::detail::format(
          "cannot create {} to move another run's files "
                                                            "into: {}", dest.string(), ec.message())));
  for (const auto& f : files) {
    fs::rename(f, dest / f.filename(), ec);
    if (ec) throw CheckpointError(policytrain::detail::error_message(
        "policytrain::checkpoint", policytrain::detail::format(
            "cannot move {} to {}: {}", f.string(),
                                                              dest.string(), ec.message())));
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
