// libFuzzer target: the checkpoint file's header and metadata parser (checkpoint/format.hpp, torch-free):
// parse_header and parse_file on the bytes in memory, read_meta and read_file on them written to a file, the
// typed metadata getters, and the run fingerprint's check and comparison with this run's, message included
// (checkpoint/fingerprint.hpp), as auto-resume does. The only allowed failure is CheckpointError; no allocation
// beyond the input's size.
// With POLICYTRAIN_FUZZ_SEEDS=<dir> set, writes a seed corpus of valid checkpoint files there and exits.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <fmt/ranges.h>

#include <policytrain/checkpoint/fingerprint.hpp>
#include <policytrain/checkpoint/format.hpp>

namespace ck = policytrain::checkpoint;

namespace {
std::string g_file;

/// The fingerprint of "this run", which every input's is compared with.
nlohmann::json this_run() {
  const nlohmann::json group{{"params", 4}, {"elements", 211}, {"momentum", 0.9}, {"dampening", 0.0},
                             {"weight_decay", 0.0}, {"nesterov", false}};
  return {{"model", std::string(64, 'a')}, {"model_tensors", 4}, {"model_elements", 211},
          {"optimizer", {{"family", "sgd"}, {"param_groups", {group}}}}, {"world_size", 1}, {"batch_size", 16}};
}

void make_seeds(const std::string& dir) {
  nlohmann::json meta{{"library", "policytrain"}, {"format", 1}, {"epoch", 2}, {"batch_in_epoch", 0},
                      {"global_step", 12}, {"kind", "last"}, {"half_weights", false}, {"fingerprint", this_run()}};
  ck::write_file(dir + "/last.ckpt", meta, "PK\x03\x04 not really an archive");
  meta["fingerprint"]["optimizer"]["param_groups"][0]["momentum"] = 0.0;
  meta["fingerprint"]["world_size"] = 2;
  meta["fingerprint"]["model"] = std::string(64, 'b');
  ck::write_file(dir + "/other-run.ckpt", meta, "");
  meta["fingerprint"]["optimizer"] = "policytrain::optim::FusedSgd";  // a file of an older version: the type
  ck::write_file(dir + "/older.ckpt", meta, "");
  ck::write_file(dir + "/empty-payload.ckpt", {{"kind", "best"}}, "");
  ck::write_file(dir + "/empty-meta.ckpt", nlohmann::json::object(), std::string(100, '\0'));
}

void check_meta(const nlohmann::json& m) {
  for (const char* k : {"global_step", "epoch", "batch_in_epoch", "created_unix_ns"}) (void)ck::meta_int(g_file, m, k, 0);
  for (const char* k : {"half_weights", "half_optimizer"}) (void)ck::meta_bool(g_file, m, k, false);
  // What Disk's resume does with a file's fingerprint: check it, compare it, format the differences.
  if (const auto it = m.find("fingerprint"); it != m.end()) {
    ck::check_fingerprint(g_file, *it);
    static const nlohmann::json now = this_run();
    const auto diff = ck::fingerprint_differences(*it, now);
    if (fmt::format("{}", fmt::join(diff, "; ")).size() > (size_t{1} << 24)) std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* d = std::getenv("POLICYTRAIN_FUZZ_SEEDS")) {
    make_seeds(d);
    std::exit(0);
  }
  g_file = (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/policytrain-fuzz-ckpt-") + std::to_string(::getpid()) + ".ckpt";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    (void)ck::parse_header(g_file, std::string_view(bytes).substr(0, std::min<size_t>(size, ck::kHeaderSize)), size);
  } catch (const ck::CheckpointError&) {
  }
  try {
    auto raw = ck::parse_file(g_file, bytes);
    if (raw.payload_offset > raw.bytes.size()) std::abort();
    (void)raw.payload();
    check_meta(raw.meta);
  } catch (const ck::CheckpointError&) {
  }
  std::ofstream(g_file, std::ios::binary | std::ios::trunc) << bytes;
  try {
    check_meta(ck::read_meta(g_file));
  } catch (const ck::CheckpointError&) {
  }
  try {
    (void)ck::read_file(g_file);
  } catch (const ck::CheckpointError&) {
  }
  return 0;
}
