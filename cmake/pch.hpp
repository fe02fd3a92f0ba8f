// The precompiled header of policytrain's own tests, examples and benchmarks.
#pragma once
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include <policytrain/parallel.hpp>
