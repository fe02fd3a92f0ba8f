#pragma once
/// \file
/// precision::AutocastGuard — an RAII autocast scope with the semantics of Python's `torch.autocast`:
/// on entry it records the thread's autocast state for one device type (enabled, dtype, cast cache switch),
/// sets the new one and increments the autocast nesting count; on exit it decrements the count, clears the
/// cast cache when the outermost scope ends, and restores the recorded state. The exit runs in the destructor,
/// so an exception leaving the scope restores the state too.
///
/// Forward passes run inside it; backward passes do not need it (autograd replays the dtypes of the forward).
/// Used by precision::Autocast's around_forward; usable alone. Cost: a few thread-local reads and writes.
/// Requires nothing else; the LibTorch version differences live in detail/torch_compat.hpp.
#include <optional>
#include <stdexcept>

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <fmt/format.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/detail/torch_compat.hpp>

namespace policytrain::precision {

/// The autocast dtype LibTorch uses for `device` when none is given (CPU: bf16, CUDA: fp16).
inline c10::ScalarType default_autocast_dtype(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? c10::ScalarType::Half : c10::ScalarType::BFloat16;
}

/// Whether autocast on `device` supports `dtype` (CPU and CUDA: bf16 and fp16).
inline bool autocast_supports(c10::DeviceType device, c10::ScalarType dtype) {
  const bool device_ok = device == c10::DeviceType::CPU || device == c10::DeviceType::CUDA;
  return device_ok && (dtype == c10::ScalarType::BFloat16 || dtype == c10::ScalarType::Half);
}

/// An autocast scope for one device type. Not copyable or movable: it restores state on the thread that made it.
class AutocastGuard {
 public:
  /// Enters autocast on `device` with `dtype` (default: the device's, see default_autocast_dtype).
  /// `enabled = false` turns autocast off inside the scope (to run a region in full precision within an outer
  /// autocast scope). `cache_enabled` (default: unchanged) switches the cache of casted weights.
  /// Throws std::invalid_argument when `enabled` and the device or dtype is not supported.
  explicit AutocastGuard(c10::DeviceType device, std::optional<c10::ScalarType> dtype = std::nullopt,
                         bool enabled = true, std::optional<bool> cache_enabled = std::nullopt);
  /// Leaves the scope: restores what the constructor found.
  ~AutocastGuard();

  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool prev_enabled_;
  c10::ScalarType prev_dtype_;
  bool prev_cache_enabled_;
};

// AutocastGuard's members: defined here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL AutocastGuard::AutocastGuard(c10::DeviceType device, std::optional<c10::ScalarType> dtype, bool enabled,
                                              std::optional<bool> cache_enabled)
    : device_(device),
      prev_enabled_(detail::autocast_enabled(device)),
      prev_dtype_(detail::autocast_dtype(device)),
      prev_cache_enabled_(detail::autocast_cache_enabled()) {
  const c10::ScalarType fast = dtype.value_or(default_autocast_dtype(device));
  if (enabled && !autocast_supports(device, fast))
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::precision::AutocastGuard",
        policytrain::detail::format("autocast on {} with dtype {} is not supported; "
                                    "use bf16 or fp16 on CPU or CUDA",
                                    c10::DeviceTypeName(device), c10::toString(fast))));
  // Same order as torch.autocast.__enter__.
  detail::set_autocast_enabled(device, enabled);
  detail::set_autocast_dtype(device, fast);
  detail::autocast_increment_nesting();
  detail::set_autocast_cache_enabled(cache_enabled.value_or(prev_cache_enabled_));
}

POLICYTRAIN_DECL AutocastGuard::~AutocastGuard() {
  // Same order as torch.autocast.__exit__: the cache holds casts of leaf tensors that only the outermost scope
  // may drop, since inner scopes reuse them.
  if (detail::autocast_decrement_nesting() == 0) detail::autocast_clear_cache();
  detail::set_autocast_enabled(device_, prev_enabled_);
  detail::set_autocast_dtype(device_, prev_dtype_);
  detail::set_autocast_cache_enabled(prev_cache_enabled_);
}
#endif

}  // namespace policytrain::precision
