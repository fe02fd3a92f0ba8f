#pragma once
/// \file
/// Reader for IDX files (the MNIST / Fashion-MNIST format), gzipped or raw.
/// Validates the magic number, the element type, the dimensions and the length, and throws
/// `IdxError` naming the file and what is wrong for a truncated, wrong-magic, or mismatched file.
#include <array>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/types.h>
#include <zlib.h>

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
    if (!std::filesystem::exists(path)) throw IdxError(fmt::format("{}: no such file", path.string()));
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) throw IdxError(fmt::format("{}: cannot open for reading", path.string()));
    gzbuffer(f_, 1 << 17);
  }
  ~GzFile() { if (f_) gzclose(f_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

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
        throw IdxError(fmt::format("{}: corrupt data ({})", path_.string(), msg ? msg : "zlib error"));
      }
      if (got == 0) break;
      total += static_cast<size_t>(got);
    }
    return total;
  }

 private:
  std::filesystem::path path_;
  gzFile f_ = nullptr;
};

inline uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace detail

/// Reads an IDX file into a tensor of its element type and shape. `expected_ndim` (> 0) is checked.
/// Element types: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64 (big-endian).
inline torch::Tensor read_idx(const std::filesystem::path& path, int expected_ndim = 0) {
  detail::GzFile f(path);
  const std::string name = path.string();
  std::array<unsigned char, 4> magic{};
  if (f.read(magic.data(), 4) != 4) throw IdxError(fmt::format("{}: truncated: shorter than the 4-byte IDX magic number", name));
  if (magic[0] != 0 || magic[1] != 0)
    throw IdxError(fmt::format("{}: wrong magic number {:02x} {:02x} {:02x} {:02x}: not an IDX file (expected 00 00 <type> <ndim>)",
                               name, magic[0], magic[1], magic[2], magic[3]));
  torch::ScalarType type;
  size_t elem = 0;
  switch (magic[2]) {
    case 0x08: type = torch::kUInt8; elem = 1; break;
    case 0x09: type = torch::kInt8; elem = 1; break;
    case 0x0B: type = torch::kInt16; elem = 2; break;
    case 0x0C: type = torch::kInt32; elem = 4; break;
    case 0x0D: type = torch::kFloat32; elem = 4; break;
    case 0x0E: type = torch::kFloat64; elem = 8; break;
    default: throw IdxError(fmt::format("{}: unknown IDX element type 0x{:02x}", name, magic[2]));
  }
  const int ndim = magic[3];
  if (ndim == 0) throw IdxError(fmt::format("{}: IDX header declares 0 dimensions", name));
  if (expected_ndim > 0 && ndim != expected_ndim)
    throw IdxError(fmt::format("{}: has {} dimensions, expected {}", name, ndim, expected_ndim));
  std::vector<unsigned char> dims_raw(4 * ndim);
  if (f.read(dims_raw.data(), dims_raw.size()) != dims_raw.size())
    throw IdxError(fmt::format("{}: truncated inside the header ({} dimensions declared)", name, ndim));
  std::vector<int64_t> shape(ndim);
  uint64_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    shape[d] = detail::big_endian_u32(&dims_raw[4 * d]);
    count *= static_cast<uint64_t>(shape[d]);
    if (count > (uint64_t(1) << 40)) throw IdxError(fmt::format("{}: implausible dimensions in header", name));
  }
  auto t = torch::empty(shape, torch::TensorOptions().dtype(type));
  const size_t bytes = count * elem;
  const size_t got = f.read(t.data_ptr(), bytes);
  if (got != bytes)
    throw IdxError(fmt::format("{}: truncated: header declares {} bytes of data, file has {}", name, bytes, got));
  unsigned char extra;
  if (f.read(&extra, 1) != 0)
    throw IdxError(fmt::format("{}: {} bytes of data expected from the header, but the file is longer", name, bytes));
  if (elem > 1) {  // IDX is big-endian
    auto* p = static_cast<unsigned char*>(t.data_ptr());
    for (size_t i = 0; i < count; ++i) std::reverse(p + i * elem, p + (i + 1) * elem);
  }
  return t;
}

/// Images and labels of one split, as read from an IDX pair.
struct ImageLabels {
  torch::Tensor images;  ///< uint8 [N, rows, cols]
  torch::Tensor labels;  ///< int64 [N]
};

/// Reads `<prefix>-images-idx3-ubyte[.gz]` and `<prefix>-labels-idx1-ubyte[.gz]` from `dir` (prefix "train" or
/// "t10k") and checks that they agree (same count; labels within [0, num_classes)).
inline ImageLabels read_idx_pair(const std::filesystem::path& dir, const std::string& prefix, int num_classes = 10) {
  auto find = [&](const std::string& stem) {
    for (auto name : {stem + ".gz", stem}) {
      auto p = dir / name;
      if (std::filesystem::exists(p)) return p;
    }
    throw IdxError(fmt::format("{}: no such file (nor {}.gz)", (dir / stem).string(), stem));
  };
  const auto img_path = find(prefix + "-images-idx3-ubyte");
  const auto lbl_path = find(prefix + "-labels-idx1-ubyte");
  ImageLabels out;
  out.images = read_idx(img_path, 3);
  out.labels = read_idx(lbl_path, 1);
  if (out.images.scalar_type() != torch::kUInt8 || out.labels.scalar_type() != torch::kUInt8)
    throw IdxError(fmt::format("{}: expected unsigned byte images and labels", img_path.string()));
  if (out.images.size(0) != out.labels.size(0))
    throw IdxError(fmt::format("{}: {} labels, but {} has {} images", lbl_path.string(), out.labels.size(0),
                               img_path.filename().string(), out.images.size(0)));
  out.labels = out.labels.to(torch::kLong);
  if (out.labels.numel() > 0) {
    const auto mx = out.labels.max().item<int64_t>();
    if (mx >= num_classes)
      throw IdxError(fmt::format("{}: label {} out of range (expected 0..{})", lbl_path.string(), mx, num_classes - 1));
  }
  return out;
}

}  // namespace policytrain::data
