#pragma once
/// \file
/// Memory facilities, opt-in (not in the cheap <policytrain/policytrain.hpp>): activation recompute
/// (memory::recompute, memory::Recomputed: a segment's activations recomputed in the backward) and the peak-memory
/// probes (memory/peak.hpp).
#include <policytrain/policytrain.hpp>

#include <policytrain/memory/peak.hpp>
#include <policytrain/memory/recompute.hpp>
