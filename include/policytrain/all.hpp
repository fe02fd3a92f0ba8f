#pragma once
/// \file
/// Everything but data parallelism: <policytrain/policytrain.hpp> (the Trainer and the cheap policies and
/// callbacks) with <policytrain/checkpoint.hpp>, <policytrain/observe.hpp>, <policytrain/datasets.hpp>,
/// <policytrain/data.hpp>, <policytrain/memory.hpp> and <policytrain/step/cuda_graph.hpp> (step::CudaGraph).
/// Data parallelism stays opt-in: <policytrain/parallel.hpp>.
#include <policytrain/policytrain.hpp>

#include <policytrain/checkpoint.hpp>
#include <policytrain/data.hpp>
#include <policytrain/datasets.hpp>
#include <policytrain/memory.hpp>
#include <policytrain/observe.hpp>
#include <policytrain/step/cuda_graph.hpp>
