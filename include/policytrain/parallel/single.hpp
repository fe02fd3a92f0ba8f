#pragma once
/// \file
/// parallel::Single — one process, one device. The default parallel policy.
/// Hooks: none. Cost when used: nothing.
#include <policytrain/core/category.hpp>

namespace policytrain::parallel {

/// One process trains alone: nothing to broadcast, reduce or agree on.
struct Single {
  /// The category the policy fills and its name in logs and checkpoints.
  ///@{
  static constexpr Category category = Category::parallel;
  static constexpr std::string_view name = "parallel::Single";
  ///@}
};

}  // namespace policytrain::parallel
