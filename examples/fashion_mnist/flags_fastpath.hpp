#pragma once
// Flags of the fast path: the prefetching loader, performance knobs, gradient clipping, profiler and metrics log.
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <policytrain/callbacks/grad_clip.hpp>
#include <policytrain/callbacks/metrics_log.hpp>
#include <policytrain/callbacks/perf_knobs.hpp>
#include <policytrain/callbacks/profiler.hpp>
#include <policytrain/data/fashion_mnist.hpp>
#include <policytrain/data/prefetch_loader.hpp>

namespace fmnist {

struct FastpathFlags {
  int64_t workers = 0;
  int64_t prefetch = 2;
  bool augment = false;
  policytrain::callbacks::PerfKnobs::Options knobs{};
  double clip_norm = 0;   // 0: off
  double clip_value = 0;  // 0: off
  std::string clip_p = "2";
  std::filesystem::path profile_dir{};
  int64_t profile_wait = 5, profile_warmup = 2, profile_active = 5;
  std::filesystem::path log_dir{};  // empty: <run-dir>/logs

 private:
  // What make_knobs / make_log resolved, for describe().
  mutable std::optional<uint64_t> seed_{};
  mutable std::filesystem::path resolved_log_dir_{};

 public:

  void add(CLI::App& app) {
    app.add_option("--workers", workers, "Loader worker threads (0: batches assembled on the training thread)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--prefetch", prefetch, "Batches in flight or ready per loader worker")->check(CLI::PositiveNumber);
    app.add_flag("--augment", augment, "Random crop (4-pixel padding) and horizontal flip, on the loader's workers");
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
    app.add_option("--profile", profile_dir, "Write a Chrome/Perfetto trace of a window of steps to DIR/trace.json");
    app.add_option("--profile-wait", profile_wait, "Profiler: steps skipped first")->check(CLI::NonNegativeNumber);
    app.add_option("--profile-warmup", profile_warmup, "Profiler: steps run, not recorded")->check(CLI::NonNegativeNumber);
    app.add_option("--profile-active", profile_active, "Profiler: steps recorded")->check(CLI::PositiveNumber);
    app.add_option("--log-dir", log_dir, "Directory of the per-step and per-epoch metrics logs (default RUN_DIR/logs)");
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
    // The images are standardised: pad with the value of a black pixel.
    po.augment.fill = static_cast<float>(-d::kFashionMnistMean / d::kFashionMnistStd);
    return std::make_unique<d::PrefetchLoader>(x, y, lo, po);
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
  policytrain::callbacks::Profiler make_profiler() const {
    return policytrain::callbacks::Profiler(
        {.dir = profile_dir, .wait = profile_wait, .warmup = profile_warmup, .active = profile_active});
  }

  /// For summary.json's "policies": the loader's and the callbacks' settings (knobs read back from LibTorch).
  nlohmann::json describe() const {
    auto o = knobs;
    o.seed = seed_;
    auto knobs_j = policytrain::callbacks::PerfKnobs(o).describe();
    return {{"loader", {{"name", "data::PrefetchLoader"}, {"workers", workers}, {"prefetch", prefetch},
                        {"augment", augment}, {"channels_last", knobs.channels_last}}},
            {"knobs", knobs_j},
            {"grad_clip", make_clip().describe()},
            {"profiler", make_profiler().describe()},
            {"metrics_log", {{"name", "callbacks::MetricsLog"}, {"dir", resolved_log_dir_.string()}}}};
  }
};

}  // namespace fmnist
