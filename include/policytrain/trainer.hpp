#pragma once
/// \file
/// `Trainer<Task, Policies...>`: one generic training loop whose features are compile-time policies.
///
/// Policies are unordered. Each declares a category (parallel, accumulation, precision, schedule,
/// checkpoint) or none (a callback). A category that is not named gets its default, which has no hooks
/// and so compiles to nothing. Within one hook the Trainer calls the policies in a fixed order —
/// parallel, accumulation, precision, schedule, checkpoint, then the callbacks in the order given —
/// so the order of the template arguments matters only among callbacks.
///
/// The step pipeline, fixed and correct by construction:
///   forward (around_forward: autocast) → transform_loss (accumulation normalisation, loss scale)
///   → should_step? → backward (around_backward: no-sync on non-final micro-steps)
///   → [last micro-step] before_step (reduce, normalise, unscale, clip) → step (skipped on inf/NaN)
///   → after_step (scale update, schedule, EMA, logging) → zero_grad → [every val_every_steps steps] the step's
///   validation (evaluate, on_validation_end) → on_step_end (checkpoints).
/// A step policy (step::CudaGraph) may capture forward to step into one CUDA graph and replay it; the host part
/// (counters, after_step, on_step_end) then runs beside the replay. Every hook inside the captured part must be
/// graph-safe (core/hooks.hpp), checked at compile time.
///
/// The Trainer's pieces live in trainer/ (docs/trainer.md, "File map"): composition.hpp (which policy fills each
/// category), dispatch.hpp (the hooks called over the policies), state.hpp (state_dict plumbing),
/// metric_contract.hpp (what a validation reports, and its checks), trainer.hpp (the class and its loops).
#include <policytrain/trainer/trainer.hpp>
