// libFuzzer target: the checkpoint file's header and metadata parser (checkpoint/format.hpp, torch-free):
// parse_header and parse_file on the bytes in memory, read_meta and read_file on them written to a file, and the
// typed metadata getters. The only allowed failure is CheckpointError; no allocation beyond the input's size.
// With POLICYTRAIN_FUZZ_SEEDS=<dir> set, writes a seed corpus of valid checkpoint files there and exits.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <policytrain/checkpoint/format.hpp>

namespace ck = policytrain::checkpoint;

namespace {
std::string g_file;

void make_seeds(const std::string& dir) {
  const nlohmann::json meta{{"library", "policytrain"}, {"format", 1}, {"epoch", 2}, {"batch_in_epoch", 0},
                            {"global_step", 12}, {"kind", "last"}, {"half_weights", false},
                            {"fingerprint", {{"model", std::string(64, 'a')}, {"optimizer", "torch::optim::SGD"},
                                             {"world_size", 1}, {"batch_size", 16}}}};
  ck::write_file(dir + "/last.ckpt", meta, "PK\x03\x04 not really an archive");
  ck::write_file(dir + "/empty-payload.ckpt", {{"kind", "best"}}, "");
  ck::write_file(dir + "/empty-meta.ckpt", nlohmann::json::object(), std::string(100, '\0'));
}

void check_meta(const nlohmann::json& m) {
  for (const char* k : {"global_step", "epoch", "batch_in_epoch", "created_unix_ns"}) (void)ck::meta_int(g_file, m, k, 0);
  for (const char* k : {"half_weights", "half_optimizer"}) (void)ck::meta_bool(g_file, m, k, false);
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
