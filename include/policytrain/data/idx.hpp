#pragma once
/// \file
/// Reader for IDX files (the MNIST / Fashion-MNIST format), gzipped or raw.
/// Validates the magic number, the element type, the dimensions and the length, and throws
/// `IdxError` naming the file and what is wrong for a truncated, wrong-magic, forged or mismatched file
/// (the torch-free parsing layer is data/idx_format.hpp).
#include <array>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/types.h>

#include <policytrain/data/idx_format.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// Reads an IDX file into a tensor of its element type and shape. `expected_ndim` (> 0) is checked.
/// Element types: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64 (big-endian).
/// Validation happens before any allocation (data/idx_format.hpp); the tensor takes the bytes without a copy.
inline torch::Tensor read_idx(const std::filesystem::path& path, int expected_ndim = 0) {
  IdxData d = read_idx_data(path, expected_ndim);
  torch::ScalarType type = torch::kUInt8;
  switch (d.type) {
    case 0x08: type = torch::kUInt8; break;
    case 0x09: type = torch::kInt8; break;
    case 0x0B: type = torch::kInt16; break;
    case 0x0C: type = torch::kInt32; break;
    case 0x0D: type = torch::kFloat32; break;
    case 0x0E: type = torch::kFloat64; break;
  }
  const auto opts = torch::TensorOptions().dtype(type);
  if (d.bytes.empty()) return torch::empty(d.shape, opts);
  auto* owner = new std::vector<unsigned char>(std::move(d.bytes));
  return torch::from_blob(owner->data(), d.shape, [owner](void*) { delete owner; }, opts);
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
    throw IdxError(policytrain::detail::error_message((dir / stem).string(),
                                                      policytrain::detail::format("no such file (nor {}.gz)", stem)));
  };
  const auto img_path = find(prefix + "-images-idx3-ubyte");
  const auto lbl_path = find(prefix + "-labels-idx1-ubyte");
  ImageLabels out;
  out.images = read_idx(img_path, 3);
  out.labels = read_idx(lbl_path, 1);
  if (out.images.scalar_type() != torch::kUInt8 || out.labels.scalar_type() != torch::kUInt8)
    throw IdxError(policytrain::detail::error_message(
        img_path.string(), policytrain::detail::format("expected unsigned byte images and labels")));
  if (out.images.size(0) != out.labels.size(0))
    throw IdxError(policytrain::detail::error_message(
        lbl_path.string(), policytrain::detail::format("{} labels, but {} has {} images", out.labels.size(0),
                                                       img_path.filename().string(), out.images.size(0))));
  out.labels = out.labels.to(torch::kLong);
  if (out.labels.numel() > 0) {
    const auto mx = out.labels.max().item<int64_t>();
    if (mx >= num_classes)
      throw IdxError(policytrain::detail::error_message(
          lbl_path.string(),
          policytrain::detail::format("label {} out of range (expected 0..{})", mx, num_classes - 1)));
  }
  return out;
}

}  // namespace policytrain::data
