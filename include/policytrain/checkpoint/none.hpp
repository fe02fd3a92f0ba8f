#pragma once
/// \file
/// checkpoint::None — nothing is written. The default checkpoint policy.
/// Hooks: none. Cost when used: nothing.
#include <policytrain/core/category.hpp>

namespace policytrain::checkpoint {

/// Writes no checkpoint.
struct None {
  /// The category the policy fills and its name in logs and checkpoints.
  ///@{
  static constexpr Category category = Category::checkpoint;
  static constexpr std::string_view name = "checkpoint::None";
  ///@}
};

}  // namespace policytrain::checkpoint
