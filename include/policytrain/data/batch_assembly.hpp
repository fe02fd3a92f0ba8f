#pragma once
/// \file
/// How data::PrefetchLoader assembles a batch on a worker, as plain functions: the per-batch RNG seeds, the
/// augmentations drawn for each sample and applied plane by plane, the per-sample transform, normalisation, and the
/// copy of the samples into a batch's buffers (assemble_into, assemble_batch). Plain loops over the pixels, no ATen op
/// per sample. Part of <policytrain/data/prefetch_loader.hpp>.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <torch/data/example.h>
#include <torch/types.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/data/prefetch_options.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::data {

namespace detail {

/// A 64-bit mix (splitmix64 finaliser), so nearby (seed, epoch, index) give unrelated streams.
constexpr uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
constexpr uint64_t batch_seed(uint64_t seed, int64_t epoch, int64_t index) {
  return mix64(mix64(mix64(seed ^ 0xA5A5A5A5ull) + static_cast<uint64_t>(epoch)) + static_cast<uint64_t>(index));
}

/// One sample's draw: shift of the window (dy, dx in [-pad, pad]) and whether to flip.
struct SampleAug {
  int64_t dy = 0, dx = 0;
  bool flip = false;
};

/// The draws of batch `index` of `epoch`: one per sample, in sample order.
inline std::vector<SampleAug> draw_augmentations(const AugmentOptions& a, uint64_t seed, int64_t epoch, int64_t index,
                                                 int64_t n) {
  std::vector<SampleAug> out(static_cast<size_t>(n));
  if (!a.enabled) return out;
  std::mt19937_64 rng(batch_seed(seed, epoch, index));
  const int64_t p = a.crop_padding;
  for (auto& s : out) {
    // Fixed number of draws per sample, so the stream does not depend on which augmentations are on.
    const uint64_t r0 = rng(), r1 = rng(), r2 = rng();
    if (p > 0) {
      s.dy = static_cast<int64_t>(r0 % static_cast<uint64_t>(2 * p + 1)) - p;
      s.dx = static_cast<int64_t>(r1 % static_cast<uint64_t>(2 * p + 1)) - p;
    }
    s.flip = a.horizontal_flip && (r2 >> 63) != 0;
  }
  return out;
}

/// One HxW plane: out = flip_if(shift(in)), where shift(in)[y, x] = in[y + dy, x + dx] (`fill` outside the
/// image), i.e. a window of the zero-padded image; normalisation (x * scale + shift) is applied to image pixels.
inline void augment_plane(const float* in, float* out, int64_t h, int64_t w, const SampleAug& s, float fill,
                          float scale, float shift) {
  for (int64_t y = 0; y < h; ++y) {
    const int64_t sy = y + s.dy;
    float* o = out + y * w;
    if (sy < 0 || sy >= h) {
      std::fill(o, o + w, fill);
      continue;
    }
    const float* row = in + sy * w;
    for (int64_t x = 0; x < w; ++x) {
      const int64_t sx = (s.flip ? w - 1 - x : x) + s.dx;
      o[x] = (sx < 0 || sx >= w) ? fill : row[sx] * scale + shift;
    }
  }
}

}  // namespace detail

/// The seed of the generator PrefetchOptions::transform gets for sample `j` of batch `index` of `epoch`
/// (independent of the augmentation's stream).
constexpr uint64_t transform_seed(uint64_t seed, int64_t epoch, int64_t index, int64_t j) {
  return detail::mix64(detail::batch_seed(seed ^ 0x7F4A7C15ull, epoch, index) + static_cast<uint64_t>(j));
}

namespace detail {

/// Runs the user's transform on every sample of an assembled batch (views of its buffers), writing the result
/// back in place.
inline void apply_transform(Batch& out, const PrefetchOptions& o, uint64_t seed, int64_t epoch, int64_t index) {
  if (!o.transform) return;
  const int64_t n = out.x.size(0);
  for (int64_t j = 0; j < n; ++j) {
    std::mt19937_64 rng(transform_seed(seed, epoch, index, j));
    auto xj = out.x[j];
    auto yj = out.y[j];
    auto r = o.transform(torch::data::Example<>{xj, yj}, rng);
    if (!r.data.defined() || r.data.sizes() != xj.sizes() || r.data.scalar_type() != xj.scalar_type() ||
        !r.target.defined() || r.target.numel() != 1 || r.target.scalar_type() != yj.scalar_type())
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::PrefetchLoader",
          policytrain::detail::format("the transform returned an input {} of {} and a target {} of {} for "
                                      "sample {} of batch {}; expected an input {} of {} and a target of one {}",
                                      r.data.defined() ? c10::str(r.data.sizes()) : std::string("(undefined)"),
                                      r.data.defined() ? c10::toString(r.data.scalar_type()) : "-",
                                      r.target.defined() ? c10::str(r.target.sizes()) : std::string("(undefined)"),
                                      r.target.defined() ? c10::toString(r.target.scalar_type()) : "-", j, index,
                                      c10::str(xj.sizes()), c10::toString(xj.scalar_type()),
                                      c10::toString(yj.scalar_type()))));
    if (!r.data.is_same(xj)) xj.copy_(r.data);
    if (!r.target.is_same(yj)) yj.copy_(r.target.reshape({}));
  }
}

}  // namespace detail

namespace detail {

/// Normalises and augments the n = out.x.size(0) images [c, h, w] at `sample(j)` into out.x.
template <class SampleAt>
void transform_images(Batch& out, SampleAt&& sample, int64_t c, int64_t h, int64_t w, const PrefetchOptions& o,
                      uint64_t seed, int64_t epoch, int64_t index) {
  const int64_t n = out.x.size(0), per = c * h * w;
  const auto& nm = o.normalize;
  if (nm.enabled && ((!nm.channel_mean.empty() && static_cast<int64_t>(nm.channel_mean.size()) != c) ||
                     (!nm.channel_std.empty() && static_cast<int64_t>(nm.channel_std.size()) != c)))
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::PrefetchLoader",
        policytrain::detail::format("normalise has {} channel means and {} channel stds for images of {} "
                                    "channels; expected {} of each (or none: then mean and std apply to every channel)",
                                    nm.channel_mean.size(), nm.channel_std.size(), c, c)));
  std::vector<float> scale(static_cast<size_t>(c), 1.0f), shift(static_cast<size_t>(c), 0.0f);
  if (o.normalize.enabled)
    for (int64_t ch = 0; ch < c; ++ch) {
      scale[static_cast<size_t>(ch)] = 1.0f / o.normalize.std_of(ch);
      shift[static_cast<size_t>(ch)] = -o.normalize.mean_of(ch) / o.normalize.std_of(ch);
    }
  const auto draws = draw_augmentations(o.augment, seed, epoch, index, n);
  float* dst = out.x.data_ptr<float>();
  for (int64_t j = 0; j < n; ++j) {
    const float* s = sample(j);
    for (int64_t ch = 0; ch < c; ++ch)
      augment_plane(s + ch * h * w, dst + j * per + ch * h * w, h, w, draws[static_cast<size_t>(j)], o.augment.fill,
                    scale[static_cast<size_t>(ch)], shift[static_cast<size_t>(ch)]);
  }
}

}  // namespace detail

/// Assembles batch `index` of `epoch` into `out` (tensors of the batch's shapes, contiguous, allocated by the
/// caller): gather, normalise, augment. No channels-last conversion (assemble_batch does it).
inline void assemble_into(Batch& out, const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& idx,
                          const PrefetchOptions& o, uint64_t seed, int64_t epoch, int64_t index) {
  const int64_t n = idx.size(0);
  const bool images = x.dim() == 4 && x.scalar_type() == torch::kFloat && x.is_contiguous();
  const bool transform = o.augment.enabled || o.normalize.enabled;
  if (transform && !images)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::PrefetchLoader",
        policytrain::detail::format("augmentation and normalisation need contiguous float images [N, C, H, W], "
                                    "got {} of {}; disable them or convert the inputs",
                                    c10::str(x.sizes()), c10::toString(x.scalar_type()))));
  const auto idxc = idx.contiguous();  // a data-parallel shard's indices are a strided view
  const auto* ip = idxc.data_ptr<int64_t>();
  {
    // Targets: a scalar per sample.
    const auto yc = y.contiguous();
    const int64_t es = yc.element_size();
    const auto* src = static_cast<const char*>(yc.data_ptr());
    auto* dst = static_cast<char*>(out.y.data_ptr());
    for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * es, src + ip[j] * es, static_cast<size_t>(es));
  }
  const int64_t per = x.numel() / std::max<int64_t>(x.size(0), 1);
  if (!transform) {
    const int64_t bytes = per * x.element_size();
    const auto xc = x.contiguous();
    const auto* src = static_cast<const char*>(xc.data_ptr());
    auto* dst = static_cast<char*>(out.x.data_ptr());
    for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * bytes, src + ip[j] * bytes, static_cast<size_t>(bytes));
  } else {
    const float* src = x.data_ptr<float>();
    detail::transform_images(out, [&](int64_t j) { return src + ip[j] * per; }, x.size(1), x.size(2), x.size(3), o,
                             seed, epoch, index);
  }
  detail::apply_transform(out, o, seed, epoch, index);
}

/// Assembles batch `index` of `epoch` from `x`, `y` and its sample indices `idx` into new tensors: gather,
/// normalise, augment, then channels-last if asked. Exposed so tests and benchmarks can check one batch against an
/// independent computation.
inline Batch assemble_batch(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& idx,
                            const PrefetchOptions& o, uint64_t seed, int64_t epoch, int64_t index, bool pinned = false) {
  auto xs = x.sizes().vec();
  xs[0] = idx.size(0);
  Batch b{torch::empty(xs, x.options().pinned_memory(pinned)),
          torch::empty({idx.size(0)}, y.options().pinned_memory(pinned))};
  assemble_into(b, x, y, idx, o, seed, epoch, index);
  if (o.channels_last && b.x.dim() == 4) b.x = b.x.contiguous(at::MemoryFormat::ChannelsLast);
  return b;
}

}  // namespace policytrain::data
