#pragma once
/// \file
/// data::ImageFolder: a LibTorch dataset of image files laid out as torchvision's ImageFolder reads them,
/// `root/CLASS/FILE` (FILE at any depth below the class's directory), decoded (PNG, JPEG: data/image_decode.hpp)
/// when a sample is asked for, so that a DataLoader's worker threads (data::from_torch) decode in parallel. Opt-in:
/// link policytrain::images.
/// - Classes: the names of root's sub-directories, sorted (byte order, as Python sorts str); a class's index is its
///   place in that order, as in torchvision's `find_classes`.
/// - Samples: per class in that order, the files under its directory (followed recursively) whose names end in
///   .png, .jpg or .jpeg (any case), sorted by directory then name, as torchvision's `make_dataset` walks them.
/// - A sample: the image decoded to RGB, its shorter side resized to `resize` (bilinear, antialiased, as
///   torchvision's Resize on tensors) and a centre crop of `crop` x `crop` (0: either step skipped), scaled to [0, 1],
///   normalised per channel by `mean` and `std` (3 values each), then the user's `transform` (any callable on the
///   Example) — all inside the worker that loads it.
/// A file that cannot be decoded is an ImageError naming it (never a crash, never a silent skip).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/types.h>

#include <policytrain/data/image_decode.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// How ImageFolder makes a sample of a file.
struct ImageFolderOptions {
  int64_t resize = 0;                        ///< shorter side resized to this (0: not resized)
  int64_t crop = 0;                          ///< centre crop to crop x crop (0: no crop)
  std::vector<double> mean{0.0, 0.0, 0.0};   ///< per channel, subtracted after scaling to [0, 1]
  std::vector<double> std{1.0, 1.0, 1.0};    ///< per channel, divided by after the mean
  /// The user's transform of a finished sample (augmentation; runs in the loader's worker). Empty: none.
  std::function<torch::data::Example<>(torch::data::Example<>)> transform{};
};

/// The files and classes of an image folder; see the file's description.
class ImageFolder : public torch::data::datasets::Dataset<ImageFolder> {
 public:
  /// Scans `root`. Throws std::invalid_argument when it is not a directory, has no class directory, or a class
  /// has no image; or when the options are inconsistent.
  explicit ImageFolder(const std::filesystem::path& root, ImageFolderOptions o = {}) : o_(std::move(o)) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(root))
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::ImageFolder", root.string() + " is not a directory", "root/<class>/<image files>"));
    if (o_.mean.size() != 3 || o_.std.size() != 3)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::ImageFolder", policytrain::detail::format("{} means and {} stds; "
                                                                        "expected 3 of each (R, G, B)",
                                                                        o_.mean.size(), o_.std.size())));
    for (double s : o_.std)
      if (!(s > 0))
        throw std::invalid_argument(policytrain::detail::error_message("policytrain::data::ImageFolder",
                                                                       "a std is not > 0; expected 3 positive stds"));
    if (o_.resize < 0 || o_.crop < 0)
      throw std::invalid_argument(policytrain::detail::error_message("policytrain::data::ImageFolder",
                                                                     "resize and crop are sizes; expected >= 0"));
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory()) classes_.push_back(e.path().filename().string());
    std::sort(classes_.begin(), classes_.end());
    if (classes_.empty())
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::ImageFolder", root.string() + " has no class directory", "root/<class>/<image files>"));
    for (size_t c = 0; c < classes_.size(); ++c) {
      std::vector<std::pair<std::string, std::string>> found;  // (directory, name), sorted as torchvision walks
      for (const auto& e : fs::recursive_directory_iterator(root / classes_[c], fs::directory_options::follow_directory_symlink))
        if (e.is_regular_file() && is_image_name(e.path().filename().string()))
          found.emplace_back(e.path().parent_path().string(), e.path().filename().string());
      std::sort(found.begin(), found.end());
      if (found.empty())
        throw std::invalid_argument(policytrain::detail::error_message(
            "policytrain::data::ImageFolder",
            "the class directory " + (root / classes_[c]).string() + " holds no .png, .jpg or .jpeg file",
            "at least one image per class"));
      for (auto& [dir, name] : found) samples_.emplace_back((fs::path(dir) / name).string(), static_cast<int64_t>(c));
    }
  }

  /// Sample i: the image tensor [3, H, W] (float) and its class index (int64 scalar); see the file's description.
  torch::data::Example<> get(size_t i) override {
    const auto& [file, label] = samples_.at(i);
    RgbImage img = read_image(file);
    // Channels first and contiguous: LibTorch's antialiased bilinear resize of a channels-last tensor to a width of
    // 1 is wrong (up to 0.48 off, in 2.13 and 2.14; torchvision's resize meets it: docs/your-data.md, "Departures").
    // Then x / 255 as torchvision's to_dtype computes it (x * (1 / 255)), to the bit.
    auto x = torch::from_blob(img.pixels.data(), {img.height, img.width, 3}, torch::kUInt8)
                 .permute({2, 0, 1}).contiguous().to(torch::kFloat32).mul_(1.0 / 255.0);
    const int64_t h = img.height, w = img.width;
    const int64_t nh = h <= w ? o_.resize : std::max<int64_t>(1, o_.resize * h / w);
    const int64_t nw = h <= w ? std::max<int64_t>(1, o_.resize * w / h) : o_.resize;
    if (o_.resize > 0 && (nh != h || nw != w)) {  // torchvision's resize leaves an image of that size as it is
      // What torch::nn::functional::interpolate(size, bilinear, align_corners false, antialias) calls, without its
      // options object (a temporary that GCC 12 at -O2 warns about: -Wmaybe-uninitialized, a false positive).
      x = torch::_upsample_bilinear2d_aa(x.unsqueeze(0), {nh, nw}, /*align_corners=*/false, std::nullopt, std::nullopt)
              .squeeze(0);
    }
    if (o_.crop > 0) {
      const int64_t h = x.size(1), w = x.size(2);
      if (h < o_.crop || w < o_.crop)
        throw ImageError(policytrain::detail::error_message(
            "policytrain::data::ImageFolder", policytrain::detail::format("{}: {}x{} after resizing, smaller "
                                                                          "than the crop {}x{}; set resize >= crop",
                                                                          file, h, w, o_.crop, o_.crop)));
      const int64_t top = crop_start(h, o_.crop), left = crop_start(w, o_.crop);
      x = x.slice(1, top, top + o_.crop).slice(2, left, left + o_.crop);
    }
    const auto mean = torch::tensor(o_.mean, torch::kFloat32).view({3, 1, 1});
    const auto sd = torch::tensor(o_.std, torch::kFloat32).view({3, 1, 1});
    torch::data::Example<> ex{((x - mean) / sd).contiguous(), torch::tensor(label, torch::kLong)};
    return o_.transform ? o_.transform(std::move(ex)) : ex;
  }
  /// Number of images.
  std::optional<size_t> size() const override { return samples_.size(); }

  /// The class names, sorted: class i is classes()[i].
  const std::vector<std::string>& classes() const { return classes_; }
  /// (file, class index) of every sample, in order.
  const std::vector<std::pair<std::string, int64_t>>& samples() const { return samples_; }

  /// Where a centre crop of `crop` starts in a side of `size` (>= crop): torchvision's center_crop,
  /// int(round((size - crop) / 2.0)), Python's round taking a half to the even neighbour (117 / 2 gives 58, not 59).
  static int64_t crop_start(int64_t size, int64_t crop) {
    const int64_t d = size - crop, half = d / 2;
    return half + (d % 2 == 1 && half % 2 == 1 ? 1 : 0);
  }

  /// Whether torchvision's ImageFolder would take a file of this name as an image of the formats decoded here.
  static bool is_image_name(const std::string& name) {
    std::string lower(name);
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    auto ends = [&](const char* ext) {
      const std::string e(ext);
      return lower.size() >= e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0;
    };
    return ends(".png") || ends(".jpg") || ends(".jpeg");
  }

 private:
  ImageFolderOptions o_;
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, int64_t>> samples_;
};

}  // namespace policytrain::data
