#pragma once
/// \file
/// Data loading beyond the Trainer's own TensorLoader, opt-in (not in the cheap <policytrain/policytrain.hpp>):
/// data::PrefetchLoader (worker threads assembling batches into a ring of pinned buffers, copies on a side stream,
/// augmentation), data::DeviceLoader (the dataset kept on the training device, batches gathered and augmented there,
/// capturable in a CUDA graph) and data::stratified_split (a seeded class-balanced train/validation split).
#include <policytrain/policytrain.hpp>

#include <policytrain/data/device_loader.hpp>
#include <policytrain/data/prefetch_loader.hpp>
#include <policytrain/data/split.hpp>
