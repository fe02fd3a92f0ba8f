#pragma once
/// \file
/// Differences between LibTorch versions, hidden in one place. Tested: LibTorch 2.13 (CPU, CI) and 2.11 (CUDA).
#include <string>

#include <torch/version.h>

namespace policytrain::detail {

/// "MAJOR.MINOR.PATCH" of the LibTorch this was compiled against.
inline std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

/// True when compiled against LibTorch >= major.minor.
constexpr bool torch_at_least(int major, int minor) {
  return TORCH_VERSION_MAJOR > major || (TORCH_VERSION_MAJOR == major && TORCH_VERSION_MINOR >= minor);
}

}  // namespace policytrain::detail
