#pragma once
/// \file
/// callbacks::PerfKnobs — the global performance settings of LibTorch in one place, applied once and reported:
/// channels_last (the model's 4-d parameters; inputs come channels-last from the loader, see
/// data::PrefetchOptions::channels_last), cuDNN benchmark, TF32 for matmul and convolutions, deterministic
/// algorithms, intra- and inter-op thread counts, `seed_everything`, and the CPU memory policy
/// (`keep_freed_cpu_memory`: glibc's malloc keeps the blocks a step frees for the next step).
/// Hooks: on_fit_begin (applies the settings; idempotent, so `apply(module)` may be called earlier, before the
/// model or the loader are built). Cost: nothing per step.
/// Notes: inter-op threads can be set only once per process and before any inter-op work (LibTorch's rule);
/// a second, different request is reported in describe() as not applied. TF32 and cuDNN settings only matter on
/// CUDA, but they are global flags and are set (and read back) on every build.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/nn/module.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <policytrain/optim/state_layout.hpp>

#if defined(__GLIBC__)
#include <dlfcn.h>
#include <malloc.h>
#endif

namespace policytrain {

/// Seeds LibTorch's default generators (CPU and, where built, every CUDA device) and the C library's rand().
inline void seed_everything(uint64_t seed) {
  torch::manual_seed(seed);  // also seeds the CUDA generators when CUDA is available
  std::srand(static_cast<unsigned>(seed));
}

/// The file name of the shared library whose malloc this process calls (the first definition in the global symbol
/// scope: "libc.so.6" for glibc's, "libtcmalloc_minimal.so.4" where the program links tcmalloc with
/// policytrain_link_malloc or runs under LD_PRELOAD), or "" where it cannot be said (not glibc's dynamic loader).
inline std::string malloc_library() {
#if defined(__GLIBC__)
  if (void* f = ::dlsym(RTLD_DEFAULT, "malloc")) {
    Dl_info info{};
    if (::dladdr(f, &info) != 0 && info.dli_fname) {
      const std::string path = info.dli_fname;
      return path.substr(path.find_last_of('/') + 1);
    }
  }
#endif
  return "";
}

/// What keep_freed_cpu_memory() set: whether glibc's malloc took each setting (all false with another C library or
/// another allocator, where nothing is set).
struct CpuMemoryPolicy {
  bool mmap_threshold = false;   ///< M_MMAP_THRESHOLD taken: blocks up to mmap_threshold_bytes come from the heap
  bool trim_threshold = false;   ///< M_TRIM_THRESHOLD taken: the heap's free top is kept, not returned to the system
  bool fastbins_off = false;     ///< M_MXFAST 0 taken: small freed blocks go to the tcache and the bins, no fastbins
  size_t mmap_threshold_bytes = 0;  ///< the threshold asked for
};

/// Makes glibc's malloc keep the memory a training step frees, for the next step: blocks up to `mmap_threshold`
/// bytes (default 32 MiB, the largest glibc takes on 64-bit) come from the heap instead of mmap, and the heap's free
/// top is no longer returned to the system (M_TRIM_THRESHOLD at its maximum). Why: LibTorch's CPU allocator is
/// malloc, a step allocates and frees the same activations and gradients every time, and glibc by default unmaps a
/// large freed block and trims the heap's top, so the next step faults every page of them in again (zeroed by the
/// kernel): tiny_lm took 2x the page faults of the same loop in another process history, 9% of its time in the
/// kernel (bench/RESULTS.md, "tiny_lm"). The cost: the process keeps its peak heap, which a training loop reaches
/// at every step anyway. And glibc's fastbins off (M_MXFAST 0): with the large blocks in the heap, every free of one
/// (and every large request) sweeps the fastbins (malloc_consolidate); oneDNN allocates and frees small descriptors
/// for each of the flash attention backward's block products, so that bf16 tiny_lm spent 6% of its time in those
/// sweeps (bench/RESULTS.md, "tiny_lm", fifth measurement). Small blocks still come from glibc's per-thread cache.
/// Process-wide and for the rest of the process (glibc's dynamic mmap threshold is off from then on); the
/// GLIBC_TUNABLES environment variable (glibc.malloc.mmap_threshold, trim_threshold, mxfast) does the same without a
/// line of code. Another C library, or another allocator in the process (malloc_library() not glibc's: tcmalloc and
/// jemalloc keep freed blocks in their own caches): nothing is set.
inline CpuMemoryPolicy keep_freed_cpu_memory(size_t mmap_threshold = size_t{32} << 20) {
  CpuMemoryPolicy p;
  p.mmap_threshold_bytes = mmap_threshold;
#if defined(__GLIBC__)
  if (malloc_library().rfind("libc.so", 0) != 0) return p;  // another allocator's mallopt is not glibc's
  if (mmap_threshold <= static_cast<size_t>(std::numeric_limits<int>::max()))
    p.mmap_threshold = mallopt(M_MMAP_THRESHOLD, static_cast<int>(mmap_threshold)) == 1;
  p.trim_threshold = mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max()) == 1;
  p.fastbins_off = mallopt(M_MXFAST, 0) == 1;
#endif
  return p;
}

namespace callbacks {

/// LibTorch's global performance settings, applied once at fit begin and reported (see the file comment).
class PerfKnobs {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = "callbacks::PerfKnobs";
  /// Settings of PerfKnobs; each flag is applied as given.
  struct Options {
    /// Convert the model's 4-d parameters and buffers to channels-last.
    bool channels_last = false;
    /// cuDNN benchmark mode (picks the fastest convolution algorithms for fixed shapes).
    bool cudnn_benchmark = false;
    /// TF32 for CUDA matmuls and convolutions.
    bool tf32 = false;
    /// Deterministic algorithms only (LibTorch and cuDNN).
    bool deterministic = false;
    /// keep_freed_cpu_memory() at the first apply(): glibc's malloc keeps the blocks a step frees (process-wide).
    bool keep_freed_cpu_memory = false;
    int intra_threads = 0;              ///< 0: leave LibTorch's default
    int interop_threads = 0;            ///< 0: leave LibTorch's default
    /// seed_everything(seed) when set, once, at the first apply(). When a checkpoint restores the RNG on resume,
    /// seed before building the model instead (a seed at fit begin would overwrite the restored state).
    std::optional<uint64_t> seed{};
  };
  PerfKnobs() = default;
  /// With the given settings; nothing is applied until apply() or fit begin.
  explicit PerfKnobs(Options o) : o_(o) {}

  /// Applies the global settings (threads, seed, cuDNN, TF32, determinism) and, when given, converts the module's
  /// 4-d parameters and buffers to channels-last.
  void apply(torch::nn::Module* module = nullptr) {
    auto& g = at::globalContext();
    if (!applied_) {
      if (o_.intra_threads > 0) at::set_num_threads(o_.intra_threads);
      if (o_.interop_threads > 0 && static_cast<int>(at::get_num_interop_threads()) != o_.interop_threads) {
        try {
          at::set_num_interop_threads(o_.interop_threads);
        } catch (const std::exception& e) {
          interop_error_ = e.what();
        }
      }
      if (o_.seed) seed_everything(*o_.seed);
      if (o_.keep_freed_cpu_memory) memory_ = policytrain::keep_freed_cpu_memory();
      applied_ = true;
    }
    g.setBenchmarkCuDNN(o_.cudnn_benchmark);
    g.setAllowTF32CuBLAS(o_.tf32);
    g.setAllowTF32CuDNN(o_.tf32);
    g.setDeterministicAlgorithms(o_.deterministic, /*warn_only=*/false);
    g.setDeterministicCuDNN(o_.deterministic);
    if (module && o_.channels_last && !converted_) {
      torch::NoGradGuard ng;
      for (auto& p : module->parameters())
        if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
      for (auto& b : module->buffers())
        if (b.dim() == 4) b.set_data(b.data().contiguous(at::MemoryFormat::ChannelsLast));
      converted_ = true;
    }
  }

  /// Applies the settings and converts the model to channels-last when asked, with the optimizer's state of the
  /// converted parameters (moments restored from a checkpoint a moment ago, or kept from an earlier fit): a state
  /// in another layout than its parameter misleads a fused kernel (optim::match_state_layout).
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    apply(&ctx.module());
    if (o_.channels_last) optim::match_state_layout(ctx.optimizer());
  }

  /// The settings.
  const Options& options() const { return o_; }
  /// The settings requested and the values read back from LibTorch.
  /// A template so that this header needs only <nlohmann/json_fwd.hpp>: include <nlohmann/json.hpp> to call it.
  template <class Json = nlohmann::json>
  Json describe() const {
    auto& g = at::globalContext();
    Json j{{"name", name},
                     {"channels_last", o_.channels_last},
                     {"cudnn_benchmark", g.benchmarkCuDNN()},
                     {"tf32_matmul", g.allowTF32CuBLAS()},
                     {"tf32_cudnn", g.allowTF32CuDNN()},
                     {"deterministic", g.deterministicAlgorithms()},
                     {"intra_threads", at::get_num_threads()},
                     {"interop_threads", at::get_num_interop_threads()}};
    j["seed"] = o_.seed ? Json(*o_.seed) : Json(nullptr);
    // Whether glibc took the settings (false when not asked, or with another C library).
    j["keep_freed_cpu_memory"] = memory_.mmap_threshold && memory_.trim_threshold && memory_.fastbins_off;
    if (!interop_error_.empty()) j["interop_threads_error"] = interop_error_;
    return j;
  }

 private:
  Options o_;
  bool applied_ = false, converted_ = false;
  CpuMemoryPolicy memory_{};
  std::string interop_error_;
};

}  // namespace callbacks
}  // namespace policytrain
