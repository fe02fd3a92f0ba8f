#pragma once
/// \file
/// schedule::Constant — the learning rate the optimizer was built with, unchanged. The default schedule.
/// Hooks: none. Cost when used: nothing.
#include <policytrain/core/category.hpp>

namespace policytrain::schedule {

/// Keeps each param group's learning rate as the optimizer was constructed.
struct Constant {
  /// The category the policy fills and its name in logs and checkpoints.
  ///@{
  static constexpr Category category = Category::schedule;
  static constexpr std::string_view name = "schedule::Constant";
  ///@}
};

}  // namespace policytrain::schedule
