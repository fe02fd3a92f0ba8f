// The pack both variants compute over: ten policies (five with a category, five callbacks), each a template of an
// index I so that every one of kCompositions Trainer-like compositions is a new pack (nothing is reused from an
// earlier instantiation, as with a program's distinct Trainer types).
#pragma once
#include <policytrain/core/category.hpp>

namespace bench {
using policytrain::Category;
struct Ctx {};
template <int I> struct Parallel { static constexpr Category category = Category::parallel; void on_fit_begin(Ctx&) {} };
template <int I> struct Accumulation { static constexpr Category category = Category::accumulation; bool should_step(Ctx&) { return true; } };
template <int I> struct Precision { static constexpr Category category = Category::precision; void around_backward(Ctx&, int) {} };
template <int I> struct Schedule { static constexpr Category category = Category::schedule; void after_step(Ctx&, bool) {} };
template <int I> struct Checkpoint { static constexpr Category category = Category::checkpoint; void on_epoch_end(Ctx&) {} };
template <int I> struct Ema { void after_step(Ctx&, bool) {} };
template <int I> struct EarlyStopping { bool on_epoch_end(Ctx&) { return false; } };
template <int I> struct GradClip { void before_step(Ctx&) {} };
template <int I> struct MetricsLog { void on_epoch_end(Ctx&) {} void after_step(Ctx&, bool) {} };
template <int I> struct ProgressBar { void on_fit_begin(Ctx&) {} };
struct DefaultParallel {};
struct DefaultAccumulation {};
struct DefaultPrecision {};
struct DefaultSchedule {};
struct DefaultCheckpoint {};
inline constexpr int kCompositions = 60;
}  // namespace bench
