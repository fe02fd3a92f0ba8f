#pragma once
/// \file
/// data::DeviceLoader — an in-memory dataset kept on the training device: batches gathered, normalised and
/// augmented there, a whole batch at a time, with no host work per batch beyond launching the kernels.
///
/// - Storage: the inputs and targets are moved to `device` once, in their own dtype (uint8 images stay uint8: a
///   quarter of float's memory; Fashion-MNIST's 60k images are 47 MB). A batch is converted to float and
///   standardised per channel on the fly: x = float(src) * input_scale, then (x - mean[c]) / std[c], computed as
///   float(src) * a[c] + b[c].
/// - Order: TensorLoader's (seed, epoch, rank, world_size) sharding, with the epoch's permutation made on the
///   device by a generator of the device seeded as TensorLoader seeds its own. On the CPU that is TensorLoader's
///   order exactly; a CUDA generator permutes differently (equally seeded and reproducible): `host_order` takes
///   TensorLoader's permutation from the host instead (one copy of N indices per epoch).
/// - Augmentation: the options of PrefetchLoader's (AugmentOptions: random crop with padding, i.e. a translation
///   by up to `crop_padding` pixels with `fill` outside the image; horizontal flip with probability 1/2), plus
///   cutout (a `cutout` x `cutout` square set to `fill` at a uniform centre, clipped at the borders). A batch is
///   augmented by one gather over the padded batch and one masked fill, whatever its size.
/// - Draws: once per epoch, on the device, from a generator seeded with (seed, epoch, rank): one row of
///   (dy, dx, flip, cutout y, cutout x) per position of the rank's epoch. A batch reads its rows. So a batch
///   depends only on (seed, epoch, batch index): a resumed run (Trainer: epoch and batch in the checkpoint; the
///   skipped batches are passed over with `++it`, never assembled) gets the same batches bit for bit, and the
///   per-batch work has no RNG call at all (nothing to register with a CUDA graph, no generator state to save).
/// - CUDA graphs (`in_step`): the iterator yields tickets, Batch{x: the batch's positions in the epoch (int64
///   [n], on the device), y: its targets}, and DeviceBatchTask turns a ticket into the batch inside the training
///   step (`materialize`). Under step::CudaGraph the gather and the augmentation are captured with the step (fixed
///   shapes, every per-epoch tensor rewritten in place), so one replay does data and step; the short last batch
///   has another shape and runs eagerly, as any short batch does.
/// - No host synchronisation per batch: the positions are an arange on the device; nothing is read back.
/// Interface the Trainer uses: a range of Batch, size(), set_epoch(e), num_samples(), padding().
/// Cost when unused: none (a separate class, opt-in header).
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/core/hooks.hpp>
#include <policytrain/data/loader.hpp>
#include <policytrain/data/prefetch_loader.hpp>
#include <policytrain/detail/format.hpp>

#include <ATen/detail/CUDAHooksInterface.h>

namespace policytrain::data {

/// Options of DeviceLoader beyond LoaderOptions (order, sharding, batch size).
struct DeviceLoaderOptions {
  /// Where the dataset lives and batches are made (the training device).
  torch::Device device = torch::kCPU;
  /// Source values are multiplied by this before standardisation (1/255 for uint8 pixels in [0, 1] units).
  double input_scale = 1.0;
  /// Per-channel mean and standard deviation (in input_scale units); one value stands for every channel; empty:
  /// no standardisation.
  ///@{
  std::vector<double> mean{};
  std::vector<double> std{};
  ///@}
  /// Random crop (translation) and horizontal flip, as PrefetchLoader's; `fill` is in standardised units.
  AugmentOptions augment{};
  /// Cutout: side of the square set to `augment.fill` (0: none). Needs augment.enabled.
  int64_t cutout = 0;
  /// Yield inputs in channels-last memory format.
  bool channels_last = false;
  /// TensorLoader's permutation computed on the host and copied (the same order on every device).
  bool host_order = false;
  /// Yield tickets for DeviceBatchTask, which makes the batch inside the training step (CUDA graphs).
  bool in_step = false;
};

namespace detail {

/// Standardisation coefficients [1, C, 1, 1]: x * a + b.
inline std::pair<torch::Tensor, torch::Tensor> device_normalize_coefficients(const DeviceLoaderOptions& o, int64_t c,
                                                                             const torch::Device& device) {
  auto per_channel = [&](const std::vector<double>& v, double none, const char* what) {
    std::vector<float> out(static_cast<size_t>(c), static_cast<float>(none));
    if (v.size() == 1) std::fill(out.begin(), out.end(), static_cast<float>(v[0]));
    else if (v.size() == static_cast<size_t>(c)) for (int64_t i = 0; i < c; ++i) out[static_cast<size_t>(i)] = static_cast<float>(v[static_cast<size_t>(i)]);
    else if (!v.empty())
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::DeviceLoader",
          policytrain::detail::format("{} has {} values for {} channels; give one, or one per channel", what, v.size(),
                                      c)));
    return out;
  };
  const auto mean = per_channel(o.mean, 0.0, "mean");
  const auto sd = per_channel(o.std, 1.0, "std");
  std::vector<float> a(static_cast<size_t>(c)), b(static_cast<size_t>(c));
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(sd[i] > 0))
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::DeviceLoader", policytrain::detail::format("std[{}] is {}, expected > 0", i, sd[i])));
    a[i] = static_cast<float>(o.input_scale / sd[i]);
    b[i] = static_cast<float>(-mean[i] / sd[i]);
  }
  auto t = [&](const std::vector<float>& v) {
    return torch::tensor(v, torch::kFloat).view({1, c, 1, 1}).to(device);
  };
  return {t(a), t(b)};
}

}  // namespace detail

/// Augments a batch `x` [n, C, H, W] (float) with one row of `draws` [n, 5] (dy, dx, flip, cutout y, cutout x;
/// int64, on x's device) per sample: out[y, x'] = shifted[y, flip ? W-1-x' : x'] with shifted[y, x'] =
/// in[y + dy, x' + dx] (`fill` outside the image), i.e. PrefetchLoader's window of the padded image, then the
/// cutout square [cy - s/2, cy - s/2 + s) x [cx - s/2, cx - s/2 + s) set to `fill`. Fixed shapes, no host sync.
/// `rows` and `cols` are arange(H) and arange(W) on the device (kept by the loader; a graph reads them).
inline torch::Tensor augment_batch(const torch::Tensor& x, const torch::Tensor& draws, const AugmentOptions& a,
                                   int64_t cutout, const torch::Tensor& rows, const torch::Tensor& cols) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3), p = a.crop_padding;
  const int64_t wp = w + 2 * p;
  const auto xp = p > 0 ? torch::constant_pad_nd(x, {p, p, p, p}, a.fill) : x;
  const auto dy = draws.select(1, 0).unsqueeze(1), dx = draws.select(1, 1).unsqueeze(1);
  const auto flip = draws.select(1, 2).unsqueeze(1).ne(0);
  const auto src_rows = rows.unsqueeze(0) + (dy + p);                                            // [n, H]
  const auto src_cols = torch::where(flip, (w - 1) - cols.unsqueeze(0), cols.unsqueeze(0)) + (dx + p);  // [n, W]
  const auto flat = (src_rows * wp).unsqueeze(2) + src_cols.unsqueeze(1);                       // [n, H, W]
  auto out = xp.reshape({n, c, -1}).gather(2, flat.view({n, 1, h * w}).expand({n, c, h * w})).view({n, c, h, w});
  if (cutout > 0) {
    const int64_t half = cutout / 2;
    const auto y0 = draws.select(1, 3).unsqueeze(1) - half, x0 = draws.select(1, 4).unsqueeze(1) - half;
    const auto in_y = rows.unsqueeze(0).ge(y0).logical_and(rows.unsqueeze(0).lt(y0 + cutout));  // [n, H]
    const auto in_x = cols.unsqueeze(0).ge(x0).logical_and(cols.unsqueeze(0).lt(x0 + cutout));  // [n, W]
    out = out.masked_fill(in_y.unsqueeze(2).logical_and(in_x.unsqueeze(1)).unsqueeze(1), a.fill);
  }
  return out;
}

/// Batches of an in-memory (inputs, targets) pair kept on the training device (see the file's description).
class DeviceLoader {
 public:
  /// Moves `x` and `y` to `o.device`; throws std::invalid_argument on bad options (the messages name the value).
  DeviceLoader(const torch::Tensor& x, const torch::Tensor& y, LoaderOptions lo = {}, DeviceLoaderOptions o = {})
      : lo_(lo), o_(std::move(o)) {
    TensorLoader check(x, y, lo_);  // the same checks of sizes, batch size, rank and world size
    const bool images = x.dim() == 4;
    const bool convertible = x.scalar_type() == torch::kByte || x.is_floating_point();
    transform_ = !o_.mean.empty() || !o_.std.empty() || o_.input_scale != 1.0 || o_.augment.enabled ||
                 x.scalar_type() == torch::kByte;
    if (transform_ && !(images && convertible))
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::DeviceLoader",
          policytrain::detail::format("standardisation, augmentation and uint8 conversion need images [N, C, H, "
                                      "W] of uint8 or floating type, got {} of {}; disable them or convert the inputs",
                                      c10::str(x.sizes()), c10::toString(x.scalar_type()))));
    if (o_.cutout < 0 || o_.augment.crop_padding < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::DeviceLoader", policytrain::detail::format("crop_padding {} and cutout {}; expected >= 0",
                                                                         o_.augment.crop_padding, o_.cutout)));
    if (o_.cutout > 0 && !o_.augment.enabled)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::DeviceLoader",
          policytrain::detail::format("cutout {} with augment.enabled false; enable augmentation or set cutout 0",
                                      o_.cutout)));
    x_ = x.contiguous().to(o_.device);
    y_ = y.contiguous().to(o_.device);
    if (images && transform_) {
      std::tie(a_, b_) = detail::device_normalize_coefficients(o_, x_.size(1), o_.device);
      const auto lopt = torch::TensorOptions().dtype(torch::kLong).device(o_.device);
      rows_ = torch::arange(x_.size(2), lopt);
      cols_ = torch::arange(x_.size(3), lopt);
    }
    set_epoch(0);
  }

  /// Reshuffles for `epoch` and makes its draws (rewriting the loader's tensors in place: a captured graph reads
  /// the new epoch's).
  void set_epoch(int64_t epoch) {
    epoch_ = epoch;
    const int64_t n = x_.size(0);
    const uint64_t seed = lo_.seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(epoch + 1);  // TensorLoader's
    const auto lopt = torch::TensorOptions().dtype(torch::kLong).device(o_.device);
    torch::Tensor order;
    if (!lo_.shuffle) {
      order = torch::arange(n, lopt);
    } else if (o_.host_order || o_.device.is_cpu()) {
      auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
      order = torch::randperm(n, gen, torch::kLong).to(o_.device);
    } else {
      auto gen = device_generator(seed);
      order = torch::randperm(n, gen, lopt);
    }
    padding_ = 0;
    if (lo_.world_size > 1) {
      const int64_t per_rank = (n + lo_.world_size - 1) / lo_.world_size;
      const int64_t total = per_rank * lo_.world_size;
      if (total > n) order = torch::cat({order, order.slice(0, 0, total - n)});
      order = order.slice(0, lo_.rank, total, lo_.world_size);
      for (int64_t p = n; p < total; ++p) padding_ += p % lo_.world_size == lo_.rank ? 1 : 0;
    }
    if (!order_.defined()) order_ = order.contiguous();
    else order_.copy_(order);
    if (o_.augment.enabled) {
      const int64_t m = order_.size(0), p = o_.augment.crop_padding;
      auto gen = o_.device.is_cpu() ? torch::make_generator<at::CPUGeneratorImpl>(draw_seed())
                                    : device_generator(draw_seed());
      auto draws = torch::stack({torch::randint(-p, p + 1, {m}, gen, lopt), torch::randint(-p, p + 1, {m}, gen, lopt),
                                 torch::randint(0, o_.augment.horizontal_flip ? 2 : 1, {m}, gen, lopt),
                                 torch::randint(0, x_.size(2), {m}, gen, lopt),
                                 torch::randint(0, x_.size(3), {m}, gen, lopt)},
                                1);
      if (!draws_.defined()) draws_ = draws;
      else draws_.copy_(draws);
    }
  }

  /// The epoch of the current order.
  int64_t epoch() const { return epoch_; }
  /// Samples this rank sees per epoch.
  int64_t num_samples() const { return order_.size(0); }
  /// Of them, the repeated samples that pad this rank's shard (TensorLoader::padding).
  int64_t padding() const { return padding_; }
  /// Batches per epoch.
  size_t size() const {
    const int64_t n = num_samples(), b = lo_.batch_size;
    return static_cast<size_t>(lo_.drop_last ? n / b : (n + b - 1) / b);
  }
  /// The options it was built with.
  ///@{
  const LoaderOptions& options() const { return lo_; }
  const DeviceLoaderOptions& device_options() const { return o_; }
  ///@}
  /// The dataset's tensors on the device (inputs in their source dtype).
  ///@{
  const torch::Tensor& inputs() const { return x_; }
  const torch::Tensor& targets() const { return y_; }
  ///@}

  /// Positions of batch i in the epoch's order (int64, on the device; an arange, no host sync).
  torch::Tensor positions(size_t i) const {
    const int64_t b = lo_.batch_size, start = static_cast<int64_t>(i) * b;
    return torch::arange(start, std::min(start + b, num_samples()),
                         torch::TensorOptions().dtype(torch::kLong).device(o_.device));
  }
  /// The sample indices of batch i (TensorLoader::indices), on the device.
  torch::Tensor indices(size_t i) const { return order_.index_select(0, positions(i)); }
  /// The augmentation draws of batch i, [n, 5]: dy, dx, flip, cutout y, cutout x (undefined without augmentation).
  torch::Tensor draws(size_t i) const { return draws_.defined() ? draws_.index_select(0, positions(i)) : torch::Tensor(); }

  /// The batch at `positions` (int64 on the device) of the current epoch: gather, standardise, augment,
  /// channels-last. Capturable: fixed shapes for fixed positions' shape, no host sync, no RNG call.
  Batch gather(const torch::Tensor& positions) const {
    const auto idx = order_.index_select(0, positions);
    return {make_inputs(idx, positions), y_.index_select(0, idx)};
  }
  /// Batch i of the current epoch.
  Batch batch(size_t i) const { return gather(positions(i)); }
  /// Batch i as a ticket (in_step): Batch{positions, targets}.
  Batch ticket(size_t i) const {
    auto pos = positions(i);
    return {pos, y_.index_select(0, order_.index_select(0, pos))};
  }
  /// The batch a ticket stands for (its targets are the ticket's own). Throws std::invalid_argument for a
  /// batch that is not a ticket (int64 positions [n] on the loader's device).
  Batch materialize(const Batch& t) const {
    if (t.x.dim() != 1 || t.x.scalar_type() != torch::kLong || t.x.device() != o_.device)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::DeviceLoader::materialize",
          policytrain::detail::format(
              "expected a ticket (int64 positions [n] on {}), got {} of {} on "
              "{}; build the loader with in_step = true, or do not wrap the task in DeviceBatchTask",
              o_.device.str(), c10::str(t.x.sizes()), c10::toString(t.x.scalar_type()), t.x.device().str())));
    return {make_inputs(order_.index_select(0, t.x), t.x), t.y};
  }

  /// Input iterator over the batches (tickets with in_step) of the current epoch; `++it` makes nothing.
  class iterator {
   public:
    /// What std::input_iterator requires.
    ///@{
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const DeviceLoader* l, size_t i) : l_(l), i_(i) {}
    Batch operator*() const { return l_->o_.in_step ? l_->ticket(i_) : l_->batch(i_); }
    iterator& operator++() { ++i_; return *this; }
    iterator operator++(int) { auto t = *this; ++i_; return t; }
    bool operator==(const iterator& o) const { return i_ == o.i_; }
    ///@}
   private:
    const DeviceLoader* l_ = nullptr;
    size_t i_ = 0;
  };
  /// The batches of the current epoch, in order.
  ///@{
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }
  ///@}

 private:
  uint64_t draw_seed() const {
    return detail::mix64(detail::batch_seed(lo_.seed, epoch_, 0) ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(lo_.rank + 1)));
  }
  torch::Generator device_generator(uint64_t seed) const {
    if (!o_.device.is_cuda())
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::DeviceLoader",
          policytrain::detail::format("no generator for device {}; use the CPU or a CUDA device", o_.device.str())));
    auto gen = at::detail::getCUDAHooks().getNewGenerator(o_.device.index() < 0 ? 0 : o_.device.index());
    gen.set_current_seed(seed);
    return gen;
  }
  torch::Tensor make_inputs(const torch::Tensor& idx, const torch::Tensor& positions) const {
    auto x = x_.index_select(0, idx);
    if (transform_) {
      x = x.to(torch::kFloat).mul_(a_).add_(b_);
      if (o_.augment.enabled) x = augment_batch(x, draws_.index_select(0, positions), o_.augment, o_.cutout, rows_, cols_);
    }
    if (o_.channels_last && x.dim() == 4) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    return x;
  }

  LoaderOptions lo_;
  DeviceLoaderOptions o_;
  torch::Tensor x_, y_, order_, draws_, a_, b_, rows_, cols_;
  bool transform_ = false;
  int64_t epoch_ = 0;
  int64_t padding_ = 0;
};

/// A task whose training step receives DeviceLoader tickets (in_step) and makes each batch inside the step, so
/// that step::CudaGraph captures the gather and the augmentation with it. Without a loader it forwards batches
/// unchanged. Validation batches are forwarded as they are (evaluate with an ordinary loader).
template <class Task>
class DeviceBatchTask {
 public:
  /// Wraps `task` (kept by reference); `loader` null: a pass-through.
  explicit DeviceBatchTask(Task& task, const DeviceLoader* loader = nullptr) : task_(task), loader_(loader) {}
  /// The wrapped task's model.
  torch::nn::Module& module() { return task_.module(); }
  /// The wrapped task's step on the batch the ticket stands for.
  torch::Tensor training_step(const Batch& b) { return task_.training_step(loader_ ? loader_->materialize(b) : b); }
  /// The wrapped task's validation step, unchanged.
  Prediction validation_step(const Batch& b)
    requires EvaluableTask<Task>
  { return task_.validation_step(b); }
  /// The wrapped task's metric names.
  std::vector<std::string> metric_names()
    requires DeclaresMetrics<Task>
  { return task_.metric_names(); }
  /// The wrapped task.
  Task& task() { return task_; }

 private:
  Task& task_;
  const DeviceLoader* loader_;
};

}  // namespace policytrain::data
