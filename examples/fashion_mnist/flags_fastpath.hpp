#pragma once
// Flags of the fast path: the prefetching loader, performance knobs, gradient clipping, profiler, metrics log and
// TensorBoard event files.
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <policytrain/callbacks/grad_clip.hpp>
#include <policytrain/callbacks/metrics_log.hpp>
#include <policytrain/callbacks/perf_knobs.hpp>
#include <policytrain/callbacks/profiler.hpp>
#include <policytrain/callbacks/tensorboard.hpp>
#include <policytrain/data/device_loader.hpp>
#include <policytrain/data/fashion_mnist.hpp>
#include <policytrain/data/prefetch_loader.hpp>

namespace fmnist {

/// The training loader the flags chose, as one type for the Trainer: a PrefetchLoader, or with --data-on-device a
/// DeviceLoader (the dataset on the training device; with --cuda-graph its tickets, made into batches inside the
/// captured step by pt::data::DeviceBatchTask).
class TrainLoader {
 public:
  explicit TrainLoader(std::unique_ptr<policytrain::data::PrefetchLoader> p) : p_(std::move(p)) {}
  explicit TrainLoader(std::unique_ptr<policytrain::data::DeviceLoader> d) : d_(std::move(d)) {}
  void set_epoch(int64_t e) { p_ ? p_->set_epoch(e) : d_->set_epoch(e); }
  /// --elastic's mid-epoch resume on another world size (PrefetchLoader::reshard_after); DeviceLoader has none.
  int64_t reshard_after(int64_t done) {
    if (p_) return p_->reshard_after(done);
    throw std::invalid_argument("--data-on-device: a checkpoint taken mid-epoch at another world size cannot resume "
                                "with it (DeviceLoader does not re-shard an epoch's rest); resume without "
                                "--data-on-device, or from a checkpoint taken at an epoch's end");
  }
  size_t size() const { return p_ ? p_->size() : d_->size(); }
  int64_t num_samples() const { return p_ ? p_->num_samples() : d_->num_samples(); }
  int64_t padding() const { return p_ ? p_->padding() : d_->padding(); }
  /// The DeviceLoader, or null.
  const policytrain::data::DeviceLoader* device_loader() const { return d_.get(); }

  class iterator {
   public:
    using value_type = policytrain::Batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(policytrain::data::PrefetchLoader::iterator p) : p_(p) {}
    explicit iterator(policytrain::data::DeviceLoader::iterator d) : d_(d) {}
    policytrain::Batch operator*() const { return p_ ? **p_ : **d_; }
    iterator& operator++() {
      if (p_) ++*p_;
      else ++*d_;
      return *this;
    }
    iterator operator++(int) { auto t = *this; ++*this; return t; }
    bool operator==(const iterator& o) const { return p_ ? p_ == o.p_ : d_ == o.d_; }
   private:
    std::optional<policytrain::data::PrefetchLoader::iterator> p_;
    std::optional<policytrain::data::DeviceLoader::iterator> d_;
  };
  iterator begin() { return p_ ? iterator(p_->begin()) : iterator(d_->begin()); }
  iterator end() { return p_ ? iterator(p_->end()) : iterator(d_->end()); }

 private:
  std::unique_ptr<policytrain::data::PrefetchLoader> p_;
  std::unique_ptr<policytrain::data::DeviceLoader> d_;
};

struct FastpathFlags {
  int64_t workers = 0;
  int64_t prefetch = 2;
  bool augment = false;
  int64_t crop_padding = 4;
  bool flip = true;
  int64_t cutout = 0;
  bool data_on_device = false;
  bool tta = false;  // test-time augmentation: evaluation averages each image's and its flip's logits
  policytrain::callbacks::PerfKnobs::Options knobs{};
  double clip_norm = 0;   // 0: off
  double clip_value = 0;  // 0: off
  std::string clip_p = "2";
  bool profile = false;
  std::filesystem::path profile_dir{};  // empty: <run-dir>/profile
  int64_t profile_wait = 5, profile_warmup = 2, profile_active = 5, profile_repeat = 1;
  bool profile_stack = false;
  bool tensorboard = false;
  std::filesystem::path tensorboard_dir{};  // empty: <run-dir>/tensorboard
  int64_t tensorboard_every = 1, tensorboard_histograms = 0;
  std::filesystem::path log_dir{};  // empty: <run-dir>/logs

 private:
  // What make_knobs / make_log resolved, for describe().
  mutable std::optional<uint64_t> seed_{};
  mutable std::filesystem::path resolved_log_dir_{};
  mutable std::filesystem::path resolved_profile_dir_{}, resolved_tensorboard_dir_{};

 public:

  void add(CLI::App& app) {
    app.add_option("--workers", workers, "Loader worker threads (0: batches assembled on the training thread)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--prefetch", prefetch, "Batches in flight or ready per loader worker")->check(CLI::PositiveNumber);
    app.add_flag("--augment", augment, "Random crop (--crop-padding) and horizontal flip (--flip), on the loader's workers");
    app.add_option("--crop-padding", crop_padding, "--augment: pad by this many pixels, then crop 28x28 at random (0: no crop)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--flip", flip, "--augment: flip left-right with probability 1/2")->default_str("1");
    app.add_option("--cutout", cutout, "--augment --data-on-device: a square of this side blacked out at random (0: none)")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--data-on-device", data_on_device,
                 "Keep the training images on the training device (uint8) and make each batch there: gather, "
                 "standardise and augment the whole batch at once (data::DeviceLoader; with --cuda-graph inside the "
                 "captured step). --workers and --prefetch do not apply");
    app.add_flag("--tta", tta,
                 "Test-time augmentation: validation and test average the logits of each image and of its left-right "
                 "flip (summary.json also has the test accuracy without it)");
    app.add_flag("--channels-last", knobs.channels_last, "Model weights and inputs in channels-last memory format");
    app.add_flag("--cudnn-benchmark", knobs.cudnn_benchmark, "Let cuDNN pick the fastest convolution algorithms");
    app.add_flag("--tf32", knobs.tf32, "Allow TF32 in matmuls and convolutions (CUDA)");
    app.add_flag("--deterministic", knobs.deterministic, "Use deterministic algorithms only (error where none exists)");
    app.add_option("--interop-threads", knobs.interop_threads, "Inter-op threads (0: LibTorch's default)")
        ->check(CLI::NonNegativeNumber);
    auto* norm = app.add_option("--clip-norm", clip_norm, "Clip gradients to this total norm (0: off)")
                     ->check(CLI::NonNegativeNumber);
    auto* value = app.add_option("--clip-value", clip_value, "Clamp gradient elements to [-v, v] (0: off)")
                      ->check(CLI::NonNegativeNumber);
    norm->excludes(value);
    app.add_option("--clip-p", clip_p, "Order of the clipping norm: a number > 0, or inf");
    app.add_flag("--profile", profile, "Profile a window of steps with PyTorch's profiler (Kineto): a Chrome/Perfetto "
                 "trace and the key-averages table in RUN_DIR/profile");
    app.add_option("--profile-dir", profile_dir, "Profiler: output directory (default: RUN_DIR/profile; implies --profile)");
    app.add_option("--profile-wait", profile_wait, "Profiler: steps skipped first")->check(CLI::NonNegativeNumber);
    app.add_option("--profile-warmup", profile_warmup, "Profiler: steps run, not recorded")->check(CLI::NonNegativeNumber);
    app.add_option("--profile-active", profile_active, "Profiler: steps recorded")->check(CLI::PositiveNumber);
    app.add_option("--profile-repeat", profile_repeat, "Profiler: cycles of wait, warmup and active (0: until the end)")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--profile-stack", profile_stack, "Profiler: record each operator's C++ stack (costly)");
    app.add_flag("--tensorboard", tensorboard, "Write TensorBoard event files to RUN_DIR/tensorboard "
                 "(open with: tensorboard --logdir RUN_DIR/tensorboard)");
    app.add_option("--tensorboard-dir", tensorboard_dir, "TensorBoard: event file directory (default: RUN_DIR/tensorboard; "
                   "implies --tensorboard)");
    app.add_option("--tensorboard-every", tensorboard_every, "TensorBoard: scalars every N optimizer steps")
        ->check(CLI::PositiveNumber);
    app.add_option("--tensorboard-histograms", tensorboard_histograms,
                   "TensorBoard: weight and gradient histograms every N optimizer steps (0: none)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--log-dir", log_dir, "Directory of the per-step and per-epoch metrics logs (default: RUN_DIR/logs)");
  }

  double clip_order() const {
    if (clip_p == "inf" || clip_p == "Inf") return std::numeric_limits<double>::infinity();
    return std::stod(clip_p);
  }

  /// The training loader: TensorLoader's order, batches assembled (and augmented) by `workers` threads.
  std::unique_ptr<policytrain::data::PrefetchLoader> make_loader(const torch::Tensor& x, const torch::Tensor& y,
                                                                  policytrain::data::LoaderOptions lo,
                                                                  torch::Device device = torch::kCPU) const {
    namespace d = policytrain::data;
    d::PrefetchOptions po{.workers = workers, .prefetch = prefetch, .channels_last = knobs.channels_last, .device = device};
    po.augment.enabled = augment;
    po.augment.crop_padding = crop_padding;
    po.augment.horizontal_flip = flip;
    // The images are standardised: pad with the value of a black pixel.
    po.augment.fill = static_cast<float>(-d::kFashionMnistMean / d::kFashionMnistStd);
    return std::make_unique<d::PrefetchLoader>(x, y, lo, po);
  }

  /// The training loader: make_loader's PrefetchLoader, or with --data-on-device a DeviceLoader over the uint8
  /// images `x_u8` (tickets for a captured step when `in_step`).
  std::unique_ptr<TrainLoader> make_train_loader(const torch::Tensor& x, const torch::Tensor& x_u8, const torch::Tensor& y,
                                                 policytrain::data::LoaderOptions lo, torch::Device device,
                                                 bool in_step) const {
    namespace d = policytrain::data;
    if (!data_on_device) {
      if (cutout > 0) throw std::invalid_argument("--cutout needs --data-on-device (PrefetchLoader has no cutout)");
      return std::make_unique<TrainLoader>(make_loader(x, y, lo, device));
    }
    d::DeviceLoaderOptions o{.device = device, .input_scale = 1.0 / 255, .mean = {d::kFashionMnistMean},
                             .std = {d::kFashionMnistStd}, .cutout = augment ? cutout : 0,
                             .channels_last = knobs.channels_last, .in_step = in_step};
    o.augment = {.enabled = augment, .crop_padding = crop_padding, .horizontal_flip = flip,
                 .fill = static_cast<float>(-d::kFashionMnistMean / d::kFashionMnistStd)};
    return std::make_unique<TrainLoader>(std::make_unique<d::DeviceLoader>(x_u8, y, lo, o));
  }

  policytrain::callbacks::PerfKnobs make_knobs(uint64_t seed, int intra_threads) const {
    auto o = knobs;
    // main() seeds before building the model (pt::seed_everything); seeding again at fit begin would overwrite
    // the RNG state a resumed checkpoint restores, so the knob only reports the seed.
    o.intra_threads = intra_threads;
    seed_ = seed;
    return policytrain::callbacks::PerfKnobs(o);
  }
  policytrain::callbacks::GradClip make_clip() const {
    using C = policytrain::callbacks::GradClip;
    if (clip_norm > 0) return C({.mode = C::Mode::norm, .max_norm = clip_norm, .p = clip_order()});
    if (clip_value > 0) return C({.mode = C::Mode::value, .clip_value = clip_value});
    return C{};
  }
  policytrain::callbacks::MetricsLog make_log(const std::filesystem::path& run_dir) const {
    resolved_log_dir_ = log_dir.empty() ? run_dir / "logs" : log_dir;
    return policytrain::callbacks::MetricsLog({.dir = resolved_log_dir_});
  }
  policytrain::callbacks::Profiler make_profiler(const std::filesystem::path& run_dir) const {
    resolved_profile_dir_ = !profile_dir.empty() ? profile_dir : profile ? run_dir / "profile" : std::filesystem::path{};
    return policytrain::callbacks::Profiler({.dir = resolved_profile_dir_, .wait = profile_wait,
                                             .warmup = profile_warmup, .active = profile_active,
                                             .repeat = profile_repeat, .with_stack = profile_stack});
  }
  /// `settings`: the command line (shown as text); `hparams`: the hyperparameters for the HParams tab.
  policytrain::callbacks::TensorBoard make_tensorboard(const std::filesystem::path& run_dir, const std::string& settings,
                                                       const nlohmann::json& hparams) const {
    resolved_tensorboard_dir_ =
        !tensorboard_dir.empty() ? tensorboard_dir : tensorboard ? run_dir / "tensorboard" : std::filesystem::path{};
    return policytrain::callbacks::TensorBoard({.dir = resolved_tensorboard_dir_, .every = tensorboard_every,
                                                .histogram_every = tensorboard_histograms, .settings = settings,
                                                .hparams = hparams});
  }

  /// For summary.json's "policies": the loader's and the callbacks' settings (knobs read back from LibTorch).
  nlohmann::json describe() const {
    auto o = knobs;
    o.seed = seed_;
    auto knobs_j = policytrain::callbacks::PerfKnobs(o).describe();
    nlohmann::json loader{{"name", data_on_device ? "data::DeviceLoader" : "data::PrefetchLoader"},
                          {"augment", augment}, {"crop_padding", crop_padding}, {"flip", flip},
                          {"channels_last", knobs.channels_last}};
    if (data_on_device) loader["cutout"] = cutout;
    else loader.update({{"workers", workers}, {"prefetch", prefetch}});
    return {{"loader", loader},
            {"tta", tta ? "flip" : "none"},
            {"knobs", knobs_j},
            {"grad_clip", make_clip().describe()},
            {"profiler", policytrain::callbacks::Profiler(
                             {.dir = resolved_profile_dir_, .wait = profile_wait, .warmup = profile_warmup,
                              .active = profile_active, .repeat = profile_repeat, .with_stack = profile_stack})
                             .describe()},
            {"tensorboard", {{"name", "callbacks::TensorBoard"}, {"dir", resolved_tensorboard_dir_.string()},
                             {"every", tensorboard_every}, {"histogram_every", tensorboard_histograms}}},
            {"metrics_log", {{"name", "callbacks::MetricsLog"}, {"dir", resolved_log_dir_.string()}}}};
  }
};

}  // namespace fmnist
