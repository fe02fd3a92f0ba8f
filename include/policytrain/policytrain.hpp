#pragma once
/// \file
/// The umbrella header, kept cheap to compile: the Trainer and every policy and callback that needs nothing beyond
/// what torch/torch.h already parses (bench/compile_cost.py measures it against torch/torch.h alone). Heavier
/// facilities are opt-in, each one include away, as {fmt} separates base.h from format.h:
/// - <policytrain/checkpoint.hpp>: checkpoint::Disk (files, run fingerprints, JSON metadata), the exports,
///   in-memory snapshots and callbacks::DivergenceRollback, SHA-256 digests;
/// - <policytrain/observe.hpp>: MetricsLog, Profiler (Kineto) and TensorBoard;
/// - <policytrain/datasets.hpp>: IDX files and Fashion-MNIST;
/// - <policytrain/data.hpp>: data::PrefetchLoader (worker threads, pinned buffers, augmentation) and
///   data::stratified_split;
/// - <policytrain/memory.hpp>: activation recompute (memory::recompute, memory::Recomputed) and the peak-memory
///   probes;
/// - <policytrain/parallel.hpp>: data parallelism (c10d and Gloo headers);
/// - <policytrain/all.hpp>: all of them but parallel.hpp.
/// (data.hpp and memory.hpp left the umbrella in 0.x: together they made torch.h + umbrella 1.27x torch.h alone;
/// without them 1.09x, bench/RESULTS.md "Compile cost".)
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
#include <policytrain/checkpoint/none.hpp>
#include <policytrain/memory/peak.hpp>
#include <policytrain/parallel/single.hpp>
#include <policytrain/precision/autocast.hpp>
#include <policytrain/precision/autocast_guard.hpp>
#include <policytrain/precision/fp32.hpp>
#include <policytrain/precision/loss_scaler.hpp>
#include <policytrain/schedule/constant.hpp>
#include <policytrain/schedule/lr.hpp>

#include <policytrain/callbacks/early_stopping.hpp>
#include <policytrain/callbacks/ema.hpp>
#include <policytrain/callbacks/grad_clip.hpp>
#include <policytrain/callbacks/perf_knobs.hpp>
#include <policytrain/callbacks/preemption.hpp>
#include <policytrain/callbacks/progress_bar.hpp>
#include <policytrain/callbacks/step_phases.hpp>

#include <policytrain/data/loader.hpp>

#include <policytrain/optim/fused_adam.hpp>
#include <policytrain/optim/fused_adamw.hpp>
#include <policytrain/optim/fused_sgd.hpp>
