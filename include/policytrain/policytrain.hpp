#pragma once
/// \file
/// Umbrella header: the Trainer, every policy and callback, and the data utilities. Data parallelism is opt-in:
/// include <policytrain/parallel.hpp> as well (c10d and Gloo headers; see that file).
#include <policytrain/core/batch.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/context.hpp>
#include <policytrain/core/hooks.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/monitor.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/core/state.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/trainer.hpp>

#include <policytrain/accumulation/auto_batch.hpp>
#include <policytrain/accumulation/nominal_batch.hpp>
#include <policytrain/accumulation/none.hpp>
#include <policytrain/accumulation/steps.hpp>
#include <policytrain/accumulation/window_mean.hpp>
#include <policytrain/checkpoint/archive.hpp>
#include <policytrain/checkpoint/disk.hpp>
#include <policytrain/checkpoint/export.hpp>
#include <policytrain/checkpoint/format.hpp>
#include <policytrain/checkpoint/none.hpp>
#include <policytrain/memory/peak.hpp>
#include <policytrain/memory/recompute.hpp>
#include <policytrain/parallel/single.hpp>
#include <policytrain/precision/autocast.hpp>
#include <policytrain/precision/autocast_guard.hpp>
#include <policytrain/precision/fp32.hpp>
#include <policytrain/precision/loss_scaler.hpp>
#include <policytrain/schedule/constant.hpp>
#include <policytrain/schedule/lr.hpp>

#include <policytrain/callbacks/divergence_rollback.hpp>
#include <policytrain/callbacks/early_stopping.hpp>
#include <policytrain/callbacks/ema.hpp>
#include <policytrain/callbacks/grad_clip.hpp>
#include <policytrain/callbacks/metrics_log.hpp>
#include <policytrain/callbacks/perf_knobs.hpp>
#include <policytrain/callbacks/profiler.hpp>
#include <policytrain/callbacks/progress_bar.hpp>
#include <policytrain/callbacks/step_phases.hpp>
#include <policytrain/callbacks/tensorboard.hpp>

#include <policytrain/data/fashion_mnist.hpp>
#include <policytrain/data/idx.hpp>
#include <policytrain/data/loader.hpp>
#include <policytrain/data/prefetch_loader.hpp>
#include <policytrain/data/split.hpp>

#include <policytrain/io/digest.hpp>

#include <policytrain/optim/fused_adam.hpp>
#include <policytrain/optim/fused_adamw.hpp>
#include <policytrain/optim/fused_sgd.hpp>
