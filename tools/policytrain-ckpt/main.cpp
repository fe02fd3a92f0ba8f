// policytrain-ckpt: inspect, verify and consolidate checkpoints (docs/checkpoint.md, "Sharded checkpoints").
//
//   policytrain-ckpt verify DIR                  a sharded checkpoint's folder, a checkpoint file, or a run directory
//                                                (every checkpoint in it): digests, sizes, headers; exit 1 if any is bad
//   policytrain-ckpt info DIR                    a checkpoint's metadata; a sharded one's files and partition
//   policytrain-ckpt consolidate DIR OUT [PT]    a sharded checkpoint as one file in the single-file format (what a
//                                                consolidated save writes) and, with PT, its weights for torch.load
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <policytrain/checkpoint.hpp>

namespace ck = policytrain::checkpoint;
namespace fs = std::filesystem;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: policytrain-ckpt verify DIR | info DIR | consolidate DIR OUT [WEIGHTS.pt]\n"
               "  DIR: a sharded checkpoint's folder (holding manifest.json), a checkpoint file, or (verify) a run directory\n");
  return 2;
}

/// Verifies one checkpoint (a folder or a file); prints a line; returns whether it is good.
bool verify_one(const fs::path& p) {
  try {
    if (ck::Layout::is_sharded(p)) {
      const auto man = ck::verify_sharded(p);
      // Stage 3: the rows of every sharded parameter and state entry (callbacks::Ema's average) put together, so that
      // a shard lacking one, or rows that do not make up the recorded shape, fail here rather than at a resume.
      const auto& sh = man["sharded"];
      const size_t params = sh.contains("model") ? sh["model"].size() : 0, state = sh.contains("state") ? sh["state"].size() : 0;
      if (params + state > 0)
        (void)ck::merge_model(p, man, ck::read_file(p / sh["common"]["file"].get<std::string>()));
      const std::string rows = params + state == 0 ? std::string()
                                                   : "; the rows of " + std::to_string(params) + " parameter(s) and " +
                                                         std::to_string(state) + " state entr" + (state == 1 ? "y" : "ies") +
                                                         " make up their shapes";
      std::printf("ok   %s: sharded, step %lld, %zu shard(s) of world size %lld, stage %lld; every SHA-256 matches%s\n",
                  p.string().c_str(), static_cast<long long>(man.value("global_step", int64_t{0})),
                  sh["shards"].size(), static_cast<long long>(sh.value("world_size", int64_t{0})),
                  static_cast<long long>(sh.value("stage", int64_t{0})), rows.c_str());
    } else {
      const auto raw = ck::read_file(p);  // header, both CRC-32s and the length
      std::printf("ok   %s: single file, step %lld\n", p.string().c_str(),
                  static_cast<long long>(raw.meta.value("global_step", int64_t{0})));
    }
    return true;
  } catch (const std::exception& e) {
    std::printf("BAD  %s\n", e.what());
    return false;
  }
}

int verify(const fs::path& target) {
  if (fs::is_regular_file(target) || fs::exists(target / ck::Layout::manifest())) return verify_one(target) ? 0 : 1;
  if (!fs::is_directory(target)) {
    std::fprintf(stderr, "policytrain-ckpt: %s: no such file or directory\n", target.string().c_str());
    return 1;
  }
  bool good = true;
  const ck::Candidates c = ck::Layout(target).list();
  for (const auto& [file, meta] : c.readable) good = verify_one(file) && good;
  for (const auto& [file, why] : c.unreadable) {
    std::printf("BAD  %s\n", why.c_str());
    good = false;
  }
  for (const auto& folder : c.incomplete)
    std::printf("--   %s: no %s (a sharded save that did not finish): no checkpoint\n", folder.string().c_str(),
                ck::Layout::manifest().c_str());
  return good ? 0 : 1;
}

int info(const fs::path& target) {
  const auto meta = ck::Layout::read_checkpoint_meta(target);
  std::printf("%s\n  step %lld, epoch %lld, batch in epoch %lld, run %s, kind %s\n", target.string().c_str(),
              static_cast<long long>(meta.value("global_step", int64_t{0})),
              static_cast<long long>(meta.value("epoch", int64_t{0})),
              static_cast<long long>(meta.value("batch_in_epoch", int64_t{0})), meta.value("run_id", "").c_str(),
              meta.value("kind", "").c_str());
  if (!meta.contains("sharded")) return 0;
  const auto& s = meta["sharded"];
  std::printf("  sharded: world size %lld, stage %lld\n  common  %s  %s  %llu bytes\n",
              static_cast<long long>(s.value("world_size", int64_t{0})), static_cast<long long>(s.value("stage", int64_t{0})),
              s["common"].value("file", "").c_str(), s["common"].value("sha256", "").c_str(),
              static_cast<unsigned long long>(s["common"].value("bytes", uint64_t{0})));
  for (const auto& r : s["shards"])
    std::printf("  rank %lld  %s  %s  %llu bytes  %zu parameter(s)\n", static_cast<long long>(r.value("rank", int64_t{0})),
                r.value("file", "").c_str(), r.value("sha256", "").c_str(),
                static_cast<unsigned long long>(r.value("bytes", uint64_t{0})), r["indices"].size());
  std::printf("  index group position shape dtype file\n");
  for (const auto& p : s["params"])
    std::printf("  %lld %lld %lld %s %s %s\n", static_cast<long long>(p.value("index", int64_t{0})),
                static_cast<long long>(p.value("group", int64_t{0})), static_cast<long long>(p.value("position", int64_t{0})),
                p["shape"].dump().c_str(), p.value("dtype", "").c_str(),
                p["file"].is_null() ? "(no state)" : p["file"].get<std::string>().c_str());
  // Stage 3: what the shards hold as rows (chunk rows per rank on dim 0).
  for (const auto* list : {"model", "state"})
    if (s.contains(list))
      for (const auto& m : s[list])
        std::printf("  rows (%s) %s %s %s chunk %lld of world size %lld\n", list, m.value("name", "").c_str(),
                    m["shape"].dump().c_str(), m.value("dtype", "").c_str(),
                    static_cast<long long>(m.value("chunk", int64_t{0})),
                    static_cast<long long>(m.value("world_size", int64_t{0})));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if (a.size() == 2 && a[0] == "verify") return verify(a[1]);
    if (a.size() == 2 && a[0] == "info") return info(a[1]);
    if ((a.size() == 3 || a.size() == 4) && a[0] == "consolidate") {
      const auto man = ck::consolidate(a[1], a[2], a.size() == 4 ? fs::path(a[3]) : fs::path());
      std::printf("wrote %s (step %lld, the state of %zu shard(s))%s\n", a[2].c_str(),
                  static_cast<long long>(man.value("global_step", int64_t{0})), man["sharded"]["shards"].size(),
                  a.size() == 4 ? (" and " + a[3]).c_str() : "");
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "policytrain-ckpt: %s\n", e.what());
    return 1;
  }
  return usage();
}
