#pragma once
/// \file
/// Observability callbacks, opt-in (not in the cheap <policytrain/policytrain.hpp>): MetricsLog (JSONL / CSV),
/// Profiler (Kineto, Chrome traces) and TensorBoard (event files). Costs a translation unit nlohmann/json and
/// the profiler's headers (bench/RESULTS.md, "Compile cost").
#include <policytrain/policytrain.hpp>

#include <policytrain/callbacks/metrics_log.hpp>
#include <policytrain/callbacks/profiler.hpp>
#include <policytrain/callbacks/tensorboard.hpp>
