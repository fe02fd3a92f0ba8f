#pragma once
/// \file
/// accumulate::None — every micro-batch is an optimizer step. The default accumulation policy.
/// Hooks: none. Cost when used: nothing.
#include <policytrain/core/category.hpp>

namespace policytrain::accumulate {

/// No gradient accumulation: one optimizer step per batch.
struct None {
  /// The category the policy fills and its name in logs and checkpoints.
  ///@{
  static constexpr Category category = Category::accumulation;
  static constexpr std::string_view name = "accumulate::None";
  ///@}
};

}  // namespace policytrain::accumulate
