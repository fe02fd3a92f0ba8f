// libFuzzer target: the IDX reader's torch-free layer (data/idx_format.hpp), raw and gzipped.
// The input is written to a file (the reader takes a path) and read; the only allowed failure is IdxError, and
// no allocation may exceed what the file can hold (ASan's allocation limit, -malloc_limit_mb, enforces it).
// With POLICYTRAIN_FUZZ_SEEDS=<dir> set, writes a seed corpus of valid files there and exits.
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <policytrain/data/idx_format.hpp>

namespace {
std::string g_file;

void spit(const std::string& path, const std::string& s) { std::ofstream(path, std::ios::binary) << s; }
std::string header(uint8_t type, std::initializer_list<uint32_t> dims) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((d >> (8 * i)) & 0xff));
  return s;
}
void make_seeds(const std::string& dir) {
  spit(dir + "/u8-images", header(0x08, {2, 3, 4}) + std::string(24, '\x7f'));
  spit(dir + "/u8-labels", header(0x08, {5}) + std::string("\x00\x01\x02\x03\x09", 5));
  spit(dir + "/i16", header(0x0B, {3}) + std::string("\x00\x01\xff\xfe\x01\x2c", 6));
  spit(dir + "/i32", header(0x0C, {1, 2}) + std::string(8, '\x01'));
  spit(dir + "/f32", header(0x0D, {2}) + std::string("\x3f\xc0\x00\x00\xbf\x80\x00\x00", 8));
  spit(dir + "/f64", header(0x0E, {1}) + std::string("\xbf\xd0\x00\x00\x00\x00\x00\x00", 8));
  spit(dir + "/i8-zero-dim", header(0x09, {0, 7}));
  const std::string gz_body = header(0x08, {4, 4}) + std::string(16, 'a');
  gzFile gz = gzopen((dir + "/u8.gz").c_str(), "wb");
  gzwrite(gz, gz_body.data(), static_cast<unsigned>(gz_body.size()));
  gzclose(gz);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* d = std::getenv("POLICYTRAIN_FUZZ_SEEDS")) {
    make_seeds(d);
    std::exit(0);
  }
  g_file = (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/policytrain-fuzz-idx-") + std::to_string(::getpid());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spit(g_file, std::string(reinterpret_cast<const char*>(data), size));
  try {
    auto d = policytrain::data::read_idx_data(g_file);
    // What came back is consistent with the header.
    uint64_t n = d.element_size;
    for (int64_t s : d.shape) n *= static_cast<uint64_t>(s);
    if (n != d.bytes.size()) std::abort();
  } catch (const policytrain::data::IdxError&) {
  }
  return 0;
}
