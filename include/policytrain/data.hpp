#pragma once
/// \file
/// Data loading beyond the Trainer's own TensorLoader, opt-in (not in the cheap <policytrain/policytrain.hpp>):
/// data::PrefetchLoader (worker threads assembling batches into a ring of pinned buffers, copies on a side stream,
/// augmentation), data::DeviceLoader (the dataset kept on the training device, batches gathered and augmented there,
/// capturable in a CUDA graph), data::stratified_split (a seeded class-balanced train/validation split),
/// data::TokenStream (random windows of a token file or tensor, for a language model trained by steps) and
/// data::check_exact_resume (a loader of one's own checked against what exact resume needs).
#include <policytrain/policytrain.hpp>

#include <policytrain/data/device_loader.hpp>
#include <policytrain/data/prefetch_loader.hpp>
#include <policytrain/data/resume_check.hpp>
#include <policytrain/data/split.hpp>
#include <policytrain/data/token_stream.hpp>
