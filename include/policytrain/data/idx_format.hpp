#pragma once
/// \file
/// The torch-free layer of the IDX reader (the MNIST / Fashion-MNIST format), gzipped or raw: parses and
/// validates the header, then reads the data into host memory in native byte order. data/idx.hpp wraps the
/// result in a tensor. Every size is validated before memory is reserved for it: the element count is
/// computed with overflow checks, a raw file must hold exactly the bytes its header declares, a gzip file
/// cannot declare more than 1032 times its compressed size (deflate's largest ratio), and the data is read in
/// chunks, so a forged header never makes the reader allocate more than about twice what the file really holds.
/// Every failure is an `IdxError` naming the file and the field.
#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// Thrown for a file that is not a valid IDX file; the message starts with the file's path.
struct IdxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {

/// A gzip or raw file read through zlib (gzread reads uncompressed files transparently).
class GzFile {
 public:
  explicit GzFile(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
      throw IdxError(policytrain::detail::error_message(path.string(), policytrain::detail::format("no such file")));
    size_ = std::filesystem::file_size(path, ec);
    if (ec)
      throw IdxError(policytrain::detail::error_message(path.string(),
                                                        policytrain::detail::format("cannot read: {}", ec.message())));
    f_ = gzopen(path.c_str(), "rb");
    if (!f_)
      throw IdxError(
          policytrain::detail::error_message(path.string(), policytrain::detail::format("cannot open for reading")));
    gzbuffer(f_, 1 << 17);
  }
  ~GzFile() { if (f_) gzclose(f_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  /// The size of the file on disk (compressed when it is gzipped).
  uint64_t file_size() const { return size_; }
  /// Whether the file is read as it is (not gzip).
  bool raw() { return gzdirect(f_) != 0; }

  /// Reads up to n bytes; returns how many were read. Throws on a corrupt compressed stream.
  size_t read(void* dst, size_t n) {
    size_t total = 0;
    auto* out = static_cast<unsigned char*>(dst);
    while (total < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - total, 1u << 30));
      const int got = gzread(f_, out + total, chunk);
      if (got < 0) {
        int err = 0;
        const char* msg = gzerror(f_, &err);
        throw IdxError(policytrain::detail::error_message(
            path_.string(), policytrain::detail::format("corrupt data ({})", msg ? msg : "zlib error")));
      }
      if (got == 0) break;
      total += static_cast<size_t>(got);
    }
    return total;
  }

 private:
  std::filesystem::path path_;
  gzFile f_ = nullptr;
  uint64_t size_ = 0;
};

inline uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

/// The largest expansion of deflate (RFC 1951): 1032 output bytes per input byte.
inline constexpr uint64_t kMaxDeflateRatio = 1032;

}  // namespace detail

/// An IDX file's contents in host memory: its element type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
/// 0x0D float32, 0x0E float64), its shape and its data in native byte order.
struct IdxData {
  uint8_t type = 0;                 ///< the element type code of the header
  size_t element_size = 0;          ///< bytes per element
  std::vector<int64_t> shape;       ///< the dimensions
  std::vector<unsigned char> bytes; ///< shape's product times element_size bytes, native byte order
};

/// Reads and validates an IDX file (see the file comment). `expected_ndim` (> 0) is checked.
inline IdxData read_idx_data(const std::filesystem::path& path, int expected_ndim = 0) {
  detail::GzFile f(path);
  const std::string name = path.string();
  std::array<unsigned char, 4> magic{};
  if (f.read(magic.data(), 4) != 4)
    throw IdxError(policytrain::detail::error_message(
        name, policytrain::detail::format("truncated: shorter than the 4-byte IDX magic number")));
  if (magic[0] != 0 || magic[1] != 0)
    throw IdxError(policytrain::detail::error_message(
        name, policytrain::detail::format(
                  "wrong magic number {:02x} {:02x} {:02x} {:02x}: not an IDX file (expected 00 00 <type> <ndim>)",
                  magic[0], magic[1], magic[2], magic[3])));
  IdxData r;
  r.type = magic[2];
  switch (r.type) {
    case 0x08: case 0x09: r.element_size = 1; break;
    case 0x0B: r.element_size = 2; break;
    case 0x0C: case 0x0D: r.element_size = 4; break;
    case 0x0E: r.element_size = 8; break;
    default:
      throw IdxError(policytrain::detail::error_message(
          name, policytrain::detail::format("unknown IDX element type 0x{:02x}", magic[2])));
  }
  const int ndim = magic[3];
  if (ndim == 0)
    throw IdxError(
        policytrain::detail::error_message(name, policytrain::detail::format("IDX header declares 0 dimensions")));
  if (expected_ndim > 0 && ndim != expected_ndim)
    throw IdxError(policytrain::detail::error_message(
        name, policytrain::detail::format("has {} dimensions, expected {}", ndim, expected_ndim)));
  std::array<unsigned char, 4 * 255> dims_raw{};
  const size_t dims_bytes = 4 * static_cast<size_t>(ndim);
  if (f.read(dims_raw.data(), dims_bytes) != dims_bytes)
    throw IdxError(policytrain::detail::error_message(
        name, policytrain::detail::format("truncated inside the header ({} dimensions declared)", ndim)));
  r.shape.resize(static_cast<size_t>(ndim));
  // The data size in bytes, overflow-checked: at most 2^62 (far beyond any file, well inside int64 and size_t).
  constexpr uint64_t kLimit = uint64_t{1} << 62;
  uint64_t bytes = r.element_size;
  bool overflow = false;
  for (int d = 0; d < ndim; ++d) {
    const uint64_t n = detail::big_endian_u32(&dims_raw[4 * static_cast<size_t>(d)]);
    r.shape[static_cast<size_t>(d)] = static_cast<int64_t>(n);
    if (n != 0 && bytes > kLimit / n) overflow = true;
    else bytes *= n;
  }
  if (overflow && bytes != 0)
    throw IdxError(policytrain::detail::error_message(
        name, policytrain::detail::format(
                  "the header's dimensions [{}] multiply to more than 2^62 bytes of data: corrupt or forged",
                  fmt::join(r.shape, ", "))));
  if (overflow) bytes = 0;  // a zero dimension: no data, whatever the others say
  const uint64_t header = 4 + dims_bytes;
  const uint64_t holds = f.file_size() > header ? f.file_size() - header : 0;
  if (f.raw() && bytes > holds)
    throw IdxError(policytrain::detail::error_message(
        name, policytrain::detail::format("truncated: header declares {} bytes of data, file has {} (dimensions [{}])",
                                          bytes, holds, fmt::join(r.shape, ", "))));
  if (!f.raw() && bytes / detail::kMaxDeflateRatio > f.file_size())
    throw IdxError(policytrain::detail::error_message(
        name, policytrain::detail::format(
                  "the header's dimensions [{}] declare {} bytes of data, more than a gzip file of {} "
                  "bytes can hold: corrupt or forged",
                  fmt::join(r.shape, ", "), bytes, f.file_size())));
  // Read in chunks: memory grows only as data actually arrives.
  constexpr uint64_t kChunk = uint64_t{16} << 20;
  uint64_t got = 0;
  while (got < bytes) {
    const uint64_t want = std::min(kChunk, bytes - got);
    r.bytes.resize(static_cast<size_t>(got + want));
    const size_t n = f.read(r.bytes.data() + got, static_cast<size_t>(want));
    got += n;
    if (n < want) break;
  }
  if (got != bytes)
    throw IdxError(policytrain::detail::error_message(
        name, policytrain::detail::format("truncated: header declares {} bytes of data, file has {} (dimensions [{}])",
                                          bytes, got, fmt::join(r.shape, ", "))));
  unsigned char extra;
  if (f.read(&extra, 1) != 0)
    throw IdxError(policytrain::detail::error_message(
        name, policytrain::detail::format("{} bytes of data expected from the header, but the file is longer", bytes)));
  if (r.element_size > 1) {  // IDX is big-endian
    unsigned char* p = r.bytes.data();
    for (uint64_t i = 0; i < bytes; i += r.element_size) std::reverse(p + i, p + i + r.element_size);
  }
  return r;
}

}  // namespace policytrain::data
