// Hostile input (issue 13): forged checkpoint headers whose sizes wrap around, IDX files that declare more data
// than they hold or whose element count overflows, a directory fsync that fails. Every failure must be the
// documented error type (CheckpointError / IdxError) naming the file and the field, raised before any allocation
// larger than the file, and resume must fall back past a forged file to the previous good one.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>

#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>

#include <policytrain/checkpoint/disk.hpp>
#include <policytrain/data/idx.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace ck = policytrain::checkpoint;
namespace fs = std::filesystem;

// The test binary interposes fsync (symbols of the executable take precedence over libc's): when armed, an
// fsync of a directory fails with EIO, as on a failing disk. Everything else goes to the system call.
static std::atomic<bool> g_fail_dir_fsync{false};
extern "C" int fsync(int fd) {
  struct stat st {};
  if (g_fail_dir_fsync.load() && ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    errno = EIO;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace {

void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_be32(std::string& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t crc(std::string_view s) {
  return static_cast<uint32_t>(::crc32_z(::crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), s.size()));
}
/// A checkpoint header with the given (possibly lying) fields and a valid header checksum: only a size check
/// can refuse it.
std::string forged_header(uint32_t meta_size, uint64_t payload_size, uint32_t meta_crc, uint32_t payload_crc = 0) {
  std::string h(reinterpret_cast<const char*>(ck::kMagic.data()), ck::kMagic.size());
  put_le(h, ck::kFormatVersion, 4);
  put_le(h, meta_size, 4);
  put_le(h, payload_size, 8);
  put_le(h, meta_crc, 4);
  put_le(h, payload_crc, 4);
  put_le(h, crc(h), 4);
  return h;
}
/// The forged file: valid JSON metadata, a header whose metadata length points `over` bytes past the end
/// of the file and whose payload length is 2^64 - over, so that 36 + meta + payload wraps to the file's real size.
std::string forged_wrapping_file(const nlohmann::json& meta, uint32_t over = 10) {
  const std::string m = meta.dump();
  return forged_header(static_cast<uint32_t>(m.size()) + over, ~uint64_t{0} - over + 1, crc(m)) + m;
}

/// Runs `f` in a child process whose address space may grow by at most `headroom` bytes beyond the parent's:
/// an allocation of the size a forged file asks for (GiBs, TiBs) fails there with std::bad_alloc instead of
/// touching the machine. Returns the child's exit code: 0 when `f` threw E, 2 for std::bad_alloc, 3 for
/// another exception, 4 when nothing was thrown.
template <class E, class F>
int in_bounded_child(F f, size_t headroom = size_t{512} << 20) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    long pages = 0;
    if (std::FILE* s = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(s, "%ld", &pages) != 1) pages = 0;
      std::fclose(s);
    }
    const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + headroom;
    const rlimit rl{limit, limit};
    ::setrlimit(RLIMIT_AS, &rl);
    int code = 4;
    try {
      f();
    } catch (const E&) {
      code = 0;
    } catch (const std::bad_alloc&) {
      code = 2;
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

template <class E, class F>
std::string message_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

namespace {
/// What was written to a temporary log file (std::tmpfile), which is then closed.
std::string drain_log(std::FILE* log) {
  std::fflush(log);
  std::rewind(log);
  std::string text;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, log)) text.append(buf, n);
  std::fclose(log);
  return text;
}
}  // namespace

TEST_CASE("a forged header whose sizes wrap around in 64 bits is a CheckpointError naming the file and the field") {
  const auto dir = testing::temp_dir("forged-wrap");
  const auto file = dir / "forged.ckpt";
  const nlohmann::json meta{{"library", "policytrain"}, {"global_step", 100}, {"epoch", 0}, {"pad", std::string(40, 'x')}};
  spit(file, forged_wrapping_file(meta));
  INFO("file size ", fs::file_size(file));
  // read_meta used to accept it (the wrapped sum equals the file size); read_file threw std::out_of_range.
  for (auto reader : {+[](const fs::path& f) { (void)ck::read_meta(f); }, +[](const fs::path& f) { (void)ck::read_file(f); }}) {
    const std::string msg = message_of<ck::CheckpointError>([&] { reader(file); });
    CHECK_MESSAGE(msg.find(file.string()) != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("metadata length") != std::string::npos, msg);
  }
  // The same with the metadata length inside the file and the payload length wrapping instead.
  const std::string m = meta.dump();
  spit(file, forged_header(static_cast<uint32_t>(m.size()), ~uint64_t{0} - 5, crc(m)) + m + "tenbytes..");
  const std::string msg = message_of<ck::CheckpointError>([&] { (void)ck::read_file(file); });
  CHECK_MESSAGE(msg.find(file.string()) != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("payload length") != std::string::npos, msg);
  fs::remove_all(dir);
}

TEST_CASE("a forged 4 GiB metadata length is refused before anything of that size is allocated") {
  const auto dir = testing::temp_dir("forged-huge");
  const auto file = dir / "huge.ckpt";
  // meta_size 0xffffff00 (4 GiB) with a payload length that brings 36 + meta + payload back to the real size.
  const std::string tail(98, '{');
  const uint32_t meta_size = 0xffffff00u;
  const uint64_t payload = uint64_t{0} - (uint64_t{meta_size} - tail.size());
  spit(file, forged_header(meta_size, payload, crc(tail)) + tail);
  REQUIRE(fs::file_size(file) == 134);  // the 134-byte file
  CHECK(in_bounded_child<ck::CheckpointError>([&] { (void)ck::read_meta(file); }) == 0);
  CHECK(in_bounded_child<ck::CheckpointError>([&] { (void)ck::read_file(file); }) == 0);
  fs::remove_all(dir);
}

TEST_CASE("resume falls back past a forged newest checkpoint to the previous good one") {
  const auto dir = testing::temp_dir("forged-resume");
  int64_t good_step = 0;
  {
    testing::MlpTask task(1);
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    pt::Trainer<testing::MlpTask, ck::Disk> t(task, opt, ck::Disk({.directory = dir, .export_final = false, .log = nullptr}));
    auto [x, y] = testing::toy_data(48);
    pt::data::TensorLoader loader(x, y, {.batch_size = 16});
    t.fit(loader, {.epochs = 1});
    good_step = t.state().global_step;
  }
  REQUIRE(fs::exists(dir / "last.ckpt"));
  // A forged file that ranks first (global_step 100) and whose metadata reads fine.
  spit(dir / "step-00000100.ckpt",
       forged_wrapping_file({{"library", "policytrain"}, {"global_step", 100}, {"epoch", 0}, {"batch_in_epoch", 1}}));
  std::FILE* log = std::tmpfile();
  testing::MlpTask task(2);
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  pt::Trainer<testing::MlpTask, ck::Disk> t(task, opt, ck::Disk({.directory = dir, .resume = "auto", .export_final = false, .log = log}));
  auto [x, y] = testing::toy_data(48);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16});
  REQUIRE_NOTHROW(t.fit(loader, {.epochs = 1}));  // already at the end of epoch 1: resumes, trains nothing
  CHECK(t.get<ck::Disk>().resumed_from() == dir / "last.ckpt");
  CHECK(t.state().global_step == good_step);
  const std::string text = drain_log(log);
  CHECK_MESSAGE(text.find("step-00000100.ckpt") != std::string::npos, text);
  CHECK_MESSAGE(text.find("length") != std::string::npos, text);
  fs::remove_all(dir);
}

TEST_CASE("a failing fsync of the directory after the rename is reported") {
  const auto dir = testing::temp_dir("dir-fsync");
  const auto file = dir / "last.ckpt";
  g_fail_dir_fsync = true;
  const std::string msg = message_of<ck::CheckpointError>([&] { ck::write_file(file, {{"kind", "last"}}, "payload"); });
  g_fail_dir_fsync = false;
  CHECK_MESSAGE(msg.find(file.string()) != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("directory") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("Input/output error") != std::string::npos, msg);
  // Unarmed, the same write succeeds and reads back.
  CHECK_NOTHROW(ck::write_file(file, {{"kind", "last"}}, "payload"));
  CHECK(ck::read_meta(file)["kind"] == "last");
  fs::remove_all(dir);
}

namespace {
std::string idx_header(uint8_t type, std::initializer_list<uint32_t> dims) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) put_be32(s, d);
  return s;
}
}  // namespace

TEST_CASE("an IDX file that declares more data than it holds is an IdxError before any allocation") {
  const auto dir = testing::temp_dir("idx-huge");
  const auto file = dir / "huge-idx2-ubyte";
  spit(file, idx_header(0x08, {1u << 20, 1u << 20}));  // 12 bytes that ask for 2^40 elements (1 TiB)
  REQUIRE(fs::file_size(file) == 12);
  CHECK(in_bounded_child<pt::data::IdxError>([&] { (void)pt::data::read_idx(file); }) == 0);
  const std::string msg = message_of<pt::data::IdxError>([&] { (void)pt::data::read_idx(file); });
  CHECK_MESSAGE(msg.find(file.string()) != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("1099511627776") != std::string::npos, msg);  // the declared data size, in bytes
  // A float64 file whose byte count (not its element count) exceeds what the file holds.
  const auto f64 = dir / "f64-idx1-ubyte";
  spit(f64, idx_header(0x0E, {1000}) + std::string(1000, '\0'));
  const std::string m64 = message_of<pt::data::IdxError>([&] { (void)pt::data::read_idx(f64); });
  CHECK_MESSAGE(m64.find("8000") != std::string::npos, m64);
  fs::remove_all(dir);
}

TEST_CASE("an IDX element count that overflows 64 bits is an IdxError naming the dimensions") {
  const auto dir = testing::temp_dir("idx-overflow");
  const auto file = dir / "overflow-idx3-ubyte";
  // 2^20 * 2^20 * 2^24 = 2^64: the product wraps to 0 in uint64 arithmetic.
  spit(file, idx_header(0x08, {1u << 20, 1u << 20, 1u << 24}));
  CHECK(in_bounded_child<pt::data::IdxError>([&] { (void)pt::data::read_idx(file); }) == 0);
  const std::string msg = message_of<pt::data::IdxError>([&] { (void)pt::data::read_idx(file); });
  CHECK_MESSAGE(msg.find(file.string()) != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("dimensions") != std::string::npos, msg);
  fs::remove_all(dir);
}

TEST_CASE("valid IDX files of every element type still read, raw and gzipped, big-endian values decoded") {
  const auto dir = testing::temp_dir("idx-valid");
  // int16 values 1, -2, 300 big-endian; float32 1.5; float64 -0.25 (hand-encoded).
  const std::string i16 = idx_header(0x0B, {3}) + std::string("\x00\x01\xff\xfe\x01\x2c", 6);
  spit(dir / "i16", i16);
  auto t = pt::data::read_idx(dir / "i16", 1);
  REQUIRE((t.scalar_type() == torch::kInt16));
  CHECK(t[0].item<int>() == 1);
  CHECK(t[1].item<int>() == -2);
  CHECK(t[2].item<int>() == 300);
  spit(dir / "f32", idx_header(0x0D, {1, 1}) + std::string("\x3f\xc0\x00\x00", 4));
  CHECK(pt::data::read_idx(dir / "f32", 2)[0][0].item<float>() == 1.5f);
  const std::string f64 = idx_header(0x0E, {1}) + std::string("\xbf\xd0\x00\x00\x00\x00\x00\x00", 8);
  gzFile gz = gzopen((dir / "f64.gz").c_str(), "wb");
  gzwrite(gz, f64.data(), static_cast<unsigned>(f64.size()));
  gzclose(gz);
  CHECK(pt::data::read_idx(dir / "f64.gz", 1)[0].item<double>() == -0.25);
  // A uint8 image file: shape and bytes.
  spit(dir / "u8", idx_header(0x08, {2, 2, 3}) + std::string("abcdefghijkl"));
  auto u = pt::data::read_idx(dir / "u8", 3);
  CHECK(u.sizes() == torch::IntArrayRef({2, 2, 3}));
  CHECK(u[1][1][2].item<uint8_t>() == 'l');
  // Truncated and overlong files still say so.
  spit(dir / "short", idx_header(0x08, {5}) + "abc");
  CHECK_THROWS_WITH_AS(pt::data::read_idx(dir / "short"), doctest::Contains("truncated"), pt::data::IdxError);
  spit(dir / "long", idx_header(0x08, {2}) + "abc");
  CHECK_THROWS_WITH_AS(pt::data::read_idx(dir / "long"), doctest::Contains("longer"), pt::data::IdxError);
  fs::remove_all(dir);
}

TEST_CASE("auto-resume does not pick the newer file of a run with another optimizer kind (Adam vs AdamW)") {
  // Adam and AdamW have the same parameter-group option keys and state layout: only the run fingerprint tells
  // their checkpoints apart.
  const auto dir = testing::temp_dir("other-optimizer");
  auto [x, y] = testing::toy_data(48);
  std::string own_sha;
  {
    testing::MlpTask task(1);
    torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
    pt::Trainer<testing::MlpTask, ck::Disk> t(task, opt, ck::Disk({.directory = dir, .export_final = false, .log = nullptr}));
    pt::data::TensorLoader loader(x, y, {.batch_size = 16});
    t.fit(loader, {.epochs = 1});  // last.ckpt at step 3
    own_sha = pt::io::params_sha256(task.module());
  }
  {
    testing::MlpTask task(4);
    torch::optim::Adam opt(task.module().parameters(), torch::optim::AdamOptions(0.01));
    pt::Trainer<testing::MlpTask, ck::Disk> t(
        task, opt, ck::Disk({.directory = dir / "adam", .every_steps = 6, .export_final = false, .log = nullptr}));
    pt::data::TensorLoader loader(x, y, {.batch_size = 16});
    t.fit(loader, {.epochs = 2});  // step-00000006.ckpt
  }
  fs::copy_file(dir / "adam" / "step-00000006.ckpt", dir / "step-00000006.ckpt");
  fs::remove_all(dir / "adam");
  std::FILE* log = std::tmpfile();
  testing::MlpTask task(2);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
  pt::Trainer<testing::MlpTask, ck::Disk> t(task, opt, ck::Disk({.directory = dir, .resume = "auto", .export_final = false, .log = log}));
  pt::data::TensorLoader loader(x, y, {.batch_size = 16});
  t.fit(loader, {.epochs = 1});
  const std::string text = drain_log(log);
  CHECK(t.get<ck::Disk>().resumed_from() == dir / "last.ckpt");
  CHECK(t.state().global_step == 3);
  CHECK(pt::io::params_sha256(task.module()) == own_sha);
  CHECK_MESSAGE(text.find("optimizer: adam in the checkpoint, adamw in this run") != std::string::npos, text);
  fs::remove_all(dir);
}

TEST_CASE("a forged string length inside the archive's pickle is refused before LibTorch reserves it (fuzz_archive)") {
  // fuzz_archive found it: LibTorch's unpickler reserves a BINUNICODE string's declared length before reading
  // it, so a 14 KiB payload whose data.pkl declares a 2 GiB string made the loader allocate 2 GiB. The file's
  // checksums are valid: only a bound on the pickle can refuse it. Oracle: a child process whose address space may
  // grow by 512 MiB must see CheckpointError, not std::bad_alloc, and the message names the record and the length.
  const auto dir = testing::temp_dir("forged-pickle");
  testing::MlpTask task(1);
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  const pt::StateDict state{{"trainer/global_step", pt::scalar_tensor(int64_t{1})}};
  std::string payload = ck::make_payload(task.module(), opt, state, {});
  caffe2::serialize::PyTorchStreamReader reader(
      std::make_shared<caffe2::serialize::MemoryReadAdapter>(payload.data(), static_cast<off_t>(payload.size())));
  const size_t off = reader.getRecordOffset("data.pkl"), size = reader.getRecordSize("data.pkl");
  const size_t x = payload.find('X', off);  // the first BINUNICODE opcode of data.pkl
  REQUIRE(x < off + size);
  std::string forged = payload;
  const uint32_t huge = 0x7ffffff0u;
  for (int i = 0; i < 4; ++i) forged[x + 1 + i] = static_cast<char>((huge >> (8 * i)) & 0xff);

  // The untouched payload still loads: the bound refuses nothing valid.
  ck::RawFile good;
  good.bytes = payload;
  CHECK_NOTHROW((void)ck::read_payload(good, "good.ckpt", task.module(), opt, state));

  ck::RawFile raw;
  raw.bytes = forged;
  CHECK(in_bounded_child<ck::CheckpointError>([&] { (void)ck::read_payload(raw, "forged.ckpt", task.module(), opt, state); }) == 0);
  const auto msg = message_of<ck::CheckpointError>([&] { (void)ck::read_payload(raw, "forged.ckpt", task.module(), opt, state); });
  CHECK_MESSAGE(msg.find("forged.ckpt") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("record 'data.pkl' declares a string of 2147483632 bytes") != std::string::npos, msg);

  // The same payload in a file with valid checksums: load_weights refuses it the same way.
  const auto file = dir / "forged.ckpt";
  ck::write_file(file, nlohmann::json::object(), forged);
  CHECK(in_bounded_child<ck::CheckpointError>([&] { (void)ck::load_weights(task.module(), file); }) == 0);
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint whose fingerprint is JSON nested 1,000,000 deep (valid checksums) is skipped by auto-resume, "
          "which resumes from the next file, and malformed metadata is a CheckpointError naming the file and the value") {
  const auto dir = testing::temp_dir("deep-meta");
  auto [x, y] = testing::toy_data(48);
  std::string good_sha;
  int64_t good_step = 0;
  {
    testing::MlpTask task(1);
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    pt::Trainer<testing::MlpTask, ck::Disk> t(task, opt, ck::Disk({.directory = dir, .export_final = false, .log = nullptr}));
    pt::data::TensorLoader loader(x, y, {.batch_size = 16});
    t.fit(loader, {.epochs = 1});  // last.ckpt at step 3
    good_sha = pt::io::params_sha256(task.module());
    good_step = t.state().global_step;
  }
  // Forged from last.ckpt itself (its payload, its metadata ranked newest), with both checksums valid: only the
  // metadata's shape can refuse them. The deep one: the fingerprint's optimizer field is arrays nested a million
  // deep (formatting it as the mismatching field overflowed the stack: SIGSEGV).
  const auto good = ck::read_file(dir / "last.ckpt");
  const std::string payload(good.payload());
  const auto forge = [&](const fs::path& file, int64_t step, const nlohmann::json& fingerprint, std::string_view raw = {}) {
    auto meta = good.meta;
    meta["global_step"] = step;
    meta["fingerprint"] = fingerprint;
    std::string m = meta.dump();
    if (!raw.empty()) m.replace(m.find("\"RAW\""), 5, raw);  // text nlohmann could not even dump
    spit(file, ck::make_header(m, payload) + m + payload);
  };
  constexpr size_t kDepth = 1'000'000;
  auto fp = good.meta["fingerprint"];
  fp["optimizer"] = "RAW";
  forge(dir / "step-00000100.ckpt", 100, fp, std::string(kDepth, '[') + std::string(kDepth, ']'));
  // Shallow but malformed: a fingerprint that is not an object, and one whose world size is a string.
  forge(dir / "step-00000099.ckpt", 99, 5);
  auto bad_field = good.meta["fingerprint"];
  bad_field["world_size"] = "two";
  forge(dir / "step-00000098.ckpt", 98, bad_field);

  const auto resume = [&](std::FILE* log) {
    testing::MlpTask task(2);
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    pt::Trainer<testing::MlpTask, ck::Disk> t(task, opt, ck::Disk({.directory = dir, .resume = "auto", .export_final = false, .log = log}));
    pt::data::TensorLoader loader(x, y, {.batch_size = 16});
    t.fit(loader, {.epochs = 1});  // already at the end of epoch 1: resumes, trains nothing
    if (t.get<ck::Disk>().resumed_from() != dir / "last.ckpt" || t.state().global_step != good_step ||
        pt::io::params_sha256(task.module()) != good_sha)
      throw std::logic_error("resumed from " + t.get<ck::Disk>().resumed_from().string());
  };
  // In a child first: before the fix it died of SIGSEGV (exit code 111 here).
  const int code = in_bounded_child<ck::CheckpointError>([&] { resume(nullptr); });
  REQUIRE_MESSAGE(code == 4, "the child's exit code: " << code << " (4: resumed from last.ckpt; 100 + signal: killed)");
  std::FILE* log = std::tmpfile();
  REQUIRE_NOTHROW(resume(log));
  const std::string text = drain_log(log);
  CHECK_MESSAGE(text.find("step-00000100.ckpt: the metadata is nested more than 64 levels deep") != std::string::npos, text);
  CHECK_MESSAGE(text.find("step-00000099.ckpt: the metadata field 'fingerprint' is 5 (a number); expected an object") !=
                    std::string::npos, text);
  CHECK_MESSAGE(text.find("step-00000098.ckpt: the metadata field 'fingerprint.world_size' is \"two\" (a string); "
                          "expected an integer") != std::string::npos, text);
  // The bounds, read directly: the deep file, and a metadata block over the size limit (refused from its header).
  const auto msg = message_of<ck::CheckpointError>([&] { (void)ck::read_meta(dir / "step-00000100.ckpt"); });
  CHECK_MESSAGE(msg.find((dir / "step-00000100.ckpt").string()) != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("expected at most 64") != std::string::npos, msg);
  const std::string big(ck::kMaxMetaBytes + 1, ' ');
  const auto big_msg = message_of<ck::CheckpointError>(
      [&] { (void)ck::parse_header("big.ckpt", ck::make_header(big, ""), ck::kHeaderSize + big.size()); });
  CHECK_MESSAGE(big_msg.find("big.ckpt: the header's metadata length (16777217 bytes) exceeds the limit of 16777216") !=
                    std::string::npos, big_msg);
  // Every malformed field names the file, the value and what was expected.
  const auto step_msg = message_of<ck::CheckpointError>(
      [&] { (void)ck::meta_int("x.ckpt", nlohmann::json{{"global_step", "12"}}, "global_step", 0); });
  CHECK_MESSAGE(step_msg.find("x.ckpt: the metadata field 'global_step' is \"12\" (a string); expected an integer") !=
                    std::string::npos, step_msg);
  const std::string arr = "[1,2]";
  const auto arr_msg = message_of<ck::CheckpointError>([&] { (void)ck::parse_file("a.ckpt", ck::make_header(arr, "") + arr); });
  CHECK_MESSAGE(arr_msg.find("a.ckpt: the metadata is [1,2] (an array); expected a JSON object") != std::string::npos, arr_msg);
  // Nesting up to the limit still reads (a run's settings may be nested).
  nlohmann::json nested = 1;
  for (int i = 0; i < 60; ++i) nested = nlohmann::json::array({nested});
  ck::write_file(dir / "nested.ckpt", {{"settings", nested}}, payload);
  CHECK_NOTHROW((void)ck::read_file(dir / "nested.ckpt"));
  fs::remove_all(dir);
}
