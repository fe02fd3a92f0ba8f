#pragma once
/// \file
/// memory::PeakMemory — peak memory of a span of work (a training step): on the CPU the process's peak
/// resident set size (Linux `VmHWM` in /proc/self/status, reset by writing "5" to /proc/self/clear_refs, Linux
/// >= 4.0); on a GPU (POLICYTRAIN_WITH_CUDA, CUDA in use) also the CUDA caching allocator's peak of allocated
/// bytes (`memory_stats()["allocated_bytes.all.peak"]` in Python), reset with `resetPeakStats`.
/// RSS counts everything the process touches (code, LibTorch's allocator slack, malloc caches), so it is an
/// upper bound of tensor memory; memory::TensorBytesMeter counts LibTorch's CPU tensor allocations exactly.
/// Used by callbacks::MetricsLog (peak per step) and callbacks::ProgressBar. Cost: one read of
/// /proc/self/status (about 20 µs) and one write of clear_refs per step.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#ifdef POLICYTRAIN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace policytrain::memory {

namespace detail {
/// A "Name:   1234 kB" line of /proc/self/status, in bytes; nullopt when absent (not Linux).
inline std::optional<int64_t> proc_status_kb(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return std::nullopt;
  char line[256];
  const size_t n = std::strlen(key);
  std::optional<int64_t> v;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      long long kb = 0;
      if (std::sscanf(line + n + 1, "%lld", &kb) == 1) v = static_cast<int64_t>(kb) * 1024;
      break;
    }
  }
  std::fclose(f);
  return v;
}
}  // namespace detail

/// Peak resident set size of the process since it started or since the last reset_peak_rss(), in bytes
/// (VmHWM); nullopt where /proc/self/status is missing.
inline std::optional<int64_t> peak_rss_bytes() { return detail::proc_status_kb("VmHWM"); }
/// Current resident set size in bytes (VmRSS); nullopt where /proc/self/status is missing.
inline std::optional<int64_t> current_rss_bytes() { return detail::proc_status_kb("VmRSS"); }
/// Resets the peak RSS to the current RSS (writes "5" to /proc/self/clear_refs). False where that is not
/// possible (not Linux, kernel < 4.0, or no permission): the peak then covers the whole process's life.
inline bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

/// Whether the CUDA caching allocator is in use (compiled with CUDA, a device present and initialised).
inline bool cuda_in_use() {
#ifdef POLICYTRAIN_WITH_CUDA
  // The allocator is set up with the first CUDA tensor; its statistics exist only from then on.
  return c10::cuda::device_count() > 0 && c10::cuda::CUDACachingAllocator::get() != nullptr &&
         c10::cuda::CUDACachingAllocator::get()->initialized();
#else
  return false;
#endif
}

/// Peak bytes allocated by the CUDA caching allocator on the current device since the last reset; nullopt
/// without CUDA.
inline std::optional<int64_t> cuda_peak_allocated_bytes() {
#ifdef POLICYTRAIN_WITH_CUDA
  if (!cuda_in_use()) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
  return stats.allocated_bytes[0].peak;  // [0]: StatType::AGGREGATE (all pools), in every LibTorch version
#else
  return std::nullopt;
#endif
}
/// Resets the CUDA caching allocator's peak statistics on the current device (nothing without CUDA).
inline void reset_cuda_peak() {
#ifdef POLICYTRAIN_WITH_CUDA
  if (cuda_in_use()) c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
#endif
}

/// One reading of PeakMemory: peak RSS and (with CUDA) the CUDA allocator's peak, in bytes.
struct PeakReading {
  std::optional<int64_t> rss;   ///< peak resident set size (VmHWM) of the span
  std::optional<int64_t> cuda;  ///< peak bytes allocated by the CUDA caching allocator in the span
  bool rss_whole_process = false;  ///< true when the RSS peak could not be reset: it covers the process's life
};

/// Peak memory of a span: reset() at its start, read() at its end (see the file comment for the sources).
class PeakMemory {
 public:
  /// Starts a span.
  void reset() {
    rss_reset_ok_ = reset_peak_rss();
    reset_cuda_peak();
  }
  /// Peaks since the last reset().
  PeakReading read() const { return {peak_rss_bytes(), cuda_peak_allocated_bytes(), !rss_reset_ok_}; }

 private:
  bool rss_reset_ok_ = false;
};

/// Counts the bytes of CPU tensor memory LibTorch allocates and frees on this thread (and the threads that
/// inherit its debug info: the autograd engine's) while it is alive, exactly, through the allocator's memory
/// reporting hook (the one the profiler's `profile_memory` uses). Memory allocated before it began and freed
/// inside is not counted (LibTorch may log a warning about such blocks). Not to be nested with a profiler
/// that records memory. For tests and benchmarks; a training run uses PeakMemory.
class TensorBytesMeter {
 public:
  TensorBytesMeter() : info_(std::make_shared<Info>()), guard_(c10::DebugInfoKind::PROFILER_STATE, info_) {}
  TensorBytesMeter(const TensorBytesMeter&) = delete;
  TensorBytesMeter& operator=(const TensorBytesMeter&) = delete;
  /// Bytes allocated now minus bytes freed since the meter began.
  int64_t live() const {
    std::lock_guard<std::mutex> l(info_->m);
    return info_->live;
  }
  /// Highest live() since the meter began or since the last reset_peak().
  int64_t peak() const {
    std::lock_guard<std::mutex> l(info_->m);
    return info_->peak;
  }
  /// Sets the peak to the current live bytes.
  void reset_peak() {
    std::lock_guard<std::mutex> l(info_->m);
    info_->peak = info_->live;
  }

 private:
  struct Info : c10::MemoryReportingInfoBase {
    void reportMemoryUsage(void*, int64_t alloc_size, size_t, size_t, c10::Device device) override {
      if (device.type() != c10::DeviceType::CPU) return;
      std::lock_guard<std::mutex> l(m);
      live += alloc_size;
      if (live > peak) peak = live;
    }
    bool memoryProfilingEnabled() const override { return true; }
    mutable std::mutex m;
    int64_t live = 0, peak = 0;
  };
  std::shared_ptr<Info> info_;
  c10::DebugInfoGuard guard_;
};

}  // namespace policytrain::memory
