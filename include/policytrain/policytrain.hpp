#pragma once
/// \file
/// Umbrella header: the Trainer, every policy and callback, and the data utilities.
#include <policytrain/core/batch.hpp>
#include <policytrain/core/category.hpp>
#include <policytrain/core/hooks.hpp>
#include <policytrain/core/metrics.hpp>
#include <policytrain/core/state.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/core/trainer.hpp>

#include <policytrain/accumulation/none.hpp>
#include <policytrain/checkpoint/none.hpp>
#include <policytrain/parallel/data_parallel.hpp>
#include <policytrain/parallel/launch.hpp>
#include <policytrain/parallel/single.hpp>
#include <policytrain/precision/fp32.hpp>
#include <policytrain/schedule/constant.hpp>

#include <policytrain/callbacks/progress_bar.hpp>

#include <policytrain/data/fashion_mnist.hpp>
#include <policytrain/data/idx.hpp>
#include <policytrain/data/loader.hpp>

#include <policytrain/io/digest.hpp>
