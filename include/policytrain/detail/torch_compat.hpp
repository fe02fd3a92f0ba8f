#pragma once
/// \file
/// Differences between LibTorch versions, hidden in one place. Tested: LibTorch 2.13 (CPU, CI) and 2.11 (CUDA).
///
/// Autocast: LibTorch 2.4 replaced the per-backend functions (`at::autocast::is_cpu_enabled()`,
/// `set_autocast_gpu_dtype(dtype)`, ...) by device-generic ones (`is_autocast_enabled(device_type)`, ...), and
/// deprecated the old ones (each call then warns). The `autocast_*` functions below call whichever exists.
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::detail {

/// "MAJOR.MINOR.PATCH" of the LibTorch this was compiled against.
inline std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

/// True when compiled against a LibTorch built with CUDA (POLICYTRAIN_WITH_CUDA, decided by CMake from the LibTorch
/// found). Whether a GPU is present is torch::cuda::is_available()'s question.
constexpr bool built_with_cuda() {
#ifdef POLICYTRAIN_WITH_CUDA
  return true;
#else
  return false;
#endif
}

/// Builds a c10d::Reducer (the engine under DDP) with the arguments every LibTorch since 2.5 takes (parameters,
/// bucket indices, process group, expect_sparse_gradients, bucket_bytes_cap, find_unused_parameters,
/// gradient_as_bucket_view, parameter names, first_bucket_bytes_cap, skip_all_reduce_unused_params,
/// use_python_reducer). LibTorch 2.13 adds `bucket_bytes_cap_list` (empty: the Reducer's default rule) and a
/// defaulted `batched_grad_copy`; older ones take neither. A template, so that this header needs no c10d.
template <class Reducer, class... Args>
std::unique_ptr<Reducer> make_reducer(Args&&... args) {
  if constexpr (std::is_constructible_v<Reducer, Args..., std::vector<int64_t>>)
    return std::make_unique<Reducer>(std::forward<Args>(args)..., std::vector<int64_t>{});
  else
    return std::make_unique<Reducer>(std::forward<Args>(args)...);
}

/// True when compiled against LibTorch >= major.minor.
constexpr bool torch_at_least(int major, int minor) {
  return TORCH_VERSION_MAJOR > major || (TORCH_VERSION_MAJOR == major && TORCH_VERSION_MINOR >= minor);
}

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define POLICYTRAIN_TORCH_DEVICE_GENERIC_AUTOCAST 1
#else
#define POLICYTRAIN_TORCH_DEVICE_GENERIC_AUTOCAST 0
#endif

// --- autocast state of the calling thread, per device type ---

inline bool autocast_enabled(c10::DeviceType device) {
#if POLICYTRAIN_TORCH_DEVICE_GENERIC_AUTOCAST
  return at::autocast::is_autocast_enabled(device);
#else
  if (device == c10::DeviceType::CPU) return at::autocast::is_cpu_enabled();
  TORCH_CHECK(device == c10::DeviceType::CUDA,
              policytrain::detail::error_message(
                  "policytrain", c10::str("autocast on ", device, " needs LibTorch >= 2.4"), {}, "use CPU or CUDA"));
  return at::autocast::is_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
#if POLICYTRAIN_TORCH_DEVICE_GENERIC_AUTOCAST
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CPU) return at::autocast::set_cpu_enabled(enabled);
  TORCH_CHECK(device == c10::DeviceType::CUDA,
              policytrain::detail::error_message(
                  "policytrain", c10::str("autocast on ", device, " needs LibTorch >= 2.4"), {}, "use CPU or CUDA"));
  at::autocast::set_enabled(enabled);
#endif
}

inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
#if POLICYTRAIN_TORCH_DEVICE_GENERIC_AUTOCAST
  return at::autocast::get_autocast_dtype(device);
#else
  if (device == c10::DeviceType::CPU) return at::autocast::get_autocast_cpu_dtype();
  TORCH_CHECK(device == c10::DeviceType::CUDA,
              policytrain::detail::error_message(
                  "policytrain", c10::str("autocast on ", device, " needs LibTorch >= 2.4"), {}, "use CPU or CUDA"));
  return at::autocast::get_autocast_gpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
#if POLICYTRAIN_TORCH_DEVICE_GENERIC_AUTOCAST
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CPU) return at::autocast::set_autocast_cpu_dtype(dtype);
  TORCH_CHECK(device == c10::DeviceType::CUDA,
              policytrain::detail::error_message(
                  "policytrain", c10::str("autocast on ", device, " needs LibTorch >= 2.4"), {}, "use CPU or CUDA"));
  at::autocast::set_autocast_gpu_dtype(dtype);
#endif
}

// Unchanged since LibTorch 1.10 (nesting, cache) and 1.12 (cache switch); here so that callers include one header.
inline int autocast_increment_nesting() { return at::autocast::increment_nesting(); }
inline int autocast_decrement_nesting() { return at::autocast::decrement_nesting(); }
inline void autocast_clear_cache() { at::autocast::clear_cache(); }
inline bool autocast_cache_enabled() { return at::autocast::is_autocast_cache_enabled(); }
inline void set_autocast_cache_enabled(bool enabled) { at::autocast::set_autocast_cache_enabled(enabled); }

}  // namespace policytrain::detail
