#pragma once
/// \file
/// Data parallelism, opt-in: `parallel::DataParallel` (gradient all-reduce over PyTorch's c10d: Gloo on the CPU,
/// NCCL on CUDA) and the `torchrun`-style launcher (`parallel::launch`, `LaunchOptions`).
///
/// Not part of policytrain/policytrain.hpp: c10d's headers (and Gloo's, which LibTorch's wheel does not ship:
/// Debian's libgloo-dev) cost about a fifth of a translation unit's compile time on top of torch/torch.h, and
/// a program that trains on one process needs none of it. `parallel::Single`, the default, comes with the Trainer.
#include <policytrain/parallel/data_parallel.hpp>
#include <policytrain/parallel/sharded_data_parallel.hpp>
#include <policytrain/parallel/launch.hpp>
