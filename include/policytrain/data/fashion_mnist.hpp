#pragma once
/// \file
/// Fashion-MNIST (and MNIST) from IDX files: images as float [N, 1, 28, 28], normalised, labels int64.
#include <array>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <torch/types.h>

#include <policytrain/data/idx.hpp>

namespace policytrain::data {

/// Where Debian's dataset-fashion-mnist puts the files; $FASHION_MNIST_DIR overrides it.
inline std::filesystem::path default_fashion_mnist_dir() {
  if (const char* d = std::getenv("FASHION_MNIST_DIR"); d && *d) return d;
  return "/usr/share/datasets/fashion-mnist";
}

/// The ten class names, in label order.
inline const std::vector<std::string>& fashion_mnist_labels() {
  static const std::vector<std::string> labels{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                               "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return labels;
}

/// Fashion-MNIST's mean and standard deviation of the training pixels (in [0, 1]).
///@{
inline constexpr double kFashionMnistMean = 0.2860, kFashionMnistStd = 0.3530;
///@}

/// Images and labels of one split.
struct TensorPair {
  /// Images [N, 1, 28, 28] (float, standardised) and labels [N] (int64).
  ///@{
  torch::Tensor x, y;
  ///@}
};

/// Reads one split (`train` or `test`) from `dir`; pixels scaled to [0,1] then standardised.
inline TensorPair load_fashion_mnist(const std::filesystem::path& dir, bool train) {
  auto raw = read_idx_pair(dir, train ? "train" : "t10k", 10);
  auto x = raw.images.unsqueeze(1).to(torch::kFloat).div_(255.0).sub_(kFashionMnistMean).div_(kFashionMnistStd);
  return {x.contiguous(), raw.labels};
}

}  // namespace policytrain::data
