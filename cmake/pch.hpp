// The precompiled header of policytrain's own tests, examples and benchmarks.
#pragma once
#include <torch/torch.h>
#include <policytrain/all.hpp>
#include <policytrain/parallel.hpp>
