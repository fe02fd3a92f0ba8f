#pragma once
/// \file
/// The settings of data::PrefetchLoader: its workers and prefetch depth, the augmentation and normalisation of image
/// batches, a per-sample transform, the device and pinning. Part of <policytrain/data/prefetch_loader.hpp>.
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <torch/data/example.h>
#include <torch/types.h>

namespace policytrain::data {

/// Augmentations of image batches [B, C, H, W], drawn per sample from the batch's RNG.
struct AugmentOptions {
  bool enabled = false;        ///< master switch (`--augment`)
  int64_t crop_padding = 4;    ///< random crop: pad by this many pixels, then take an HxW window (0: no crop)
  bool horizontal_flip = true; ///< flip left-right with probability 1/2
  float fill = 0.0f;           ///< value of the padding (for standardised data: -mean/std is black)
};

/// Standardisation applied before augmentation: x[c] = (x[c] - mean[c]) / std[c] for each channel c of [C, H, W]
/// images, as torchvision's Normalize. `channel_mean` and `channel_std` (C values each) give one mean and one std
/// per channel; left empty, `mean` and `std` apply to every channel.
struct NormalizeOptions {
  /// Master switch.
  bool enabled = false;
  /// Subtracted from every value (when channel_mean is empty).
  float mean = 0.0f;
  /// Divisor after subtracting the mean (> 0; when channel_std is empty).
  float std = 1.0f;
  /// One mean per channel (empty: `mean` for all).
  std::vector<float> channel_mean{};
  /// One std per channel, each > 0 (empty: `std` for all).
  std::vector<float> channel_std{};
  /// The mean of channel c.
  float mean_of(int64_t c) const { return channel_mean.empty() ? mean : channel_mean[static_cast<size_t>(c)]; }
  /// The std of channel c.
  float std_of(int64_t c) const { return channel_std.empty() ? std : channel_std[static_cast<size_t>(c)]; }
};

/// A user's transform of one sample (input and target), run in PrefetchLoader's workers after normalisation and the
/// built-in augmentations, once per sample. `rng` is the sample's own generator, seeded by (seed, epoch, batch,
/// position in the batch) (transform_seed), so a run gives the same batches with 0, 1 or N workers. The result must
/// keep the input's shape and dtype; it is written back into the batch.
using SampleTransform = std::function<torch::data::Example<>(torch::data::Example<>, std::mt19937_64& rng)>;

/// Options of PrefetchLoader beyond LoaderOptions: workers, augmentation, normalisation, target device.
struct PrefetchOptions {
  int64_t workers = 0;          ///< worker threads (0: batches are assembled on the consuming thread)
  int64_t prefetch = 2;         ///< batches in flight or ready per worker
  /// Augmentations of image batches.
  AugmentOptions augment{};
  /// Standardisation applied before augmentation.
  NormalizeOptions normalize{};
  /// The user's transform of each sample (empty: none); see SampleTransform.
  SampleTransform transform{};
  bool channels_last = false;   ///< yield inputs in channels-last memory format
  /// Target device. For a CUDA device (with POLICYTRAIN_WITH_CUDA) batches are pinned and copied on a side
  /// stream one batch ahead; otherwise batches stay on the CPU and the Trainer moves them.
  torch::Device device = torch::kCPU;
  /// CUDA: assemble into page-locked (pinned) host memory, so that copies to the device are asynchronous.
  bool pin_memory = true;
  /// CUDA: copy the next batch on a side stream while the current step runs (false: copy each batch on the
  /// training stream when it is read).
  bool side_stream = true;
};

}  // namespace policytrain::data
