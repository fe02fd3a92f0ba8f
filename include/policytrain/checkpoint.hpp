#pragma once
/// \file
/// Checkpoints on disk, opt-in (not in the cheap <policytrain/policytrain.hpp>): checkpoint::Disk (best / last /
/// periodic files, atomic writes, exact resume, run fingerprints, JSON metadata), the exports (TorchScript-
/// loadable weights, half precision), in-memory snapshots (checkpoint::Snapshot) with
/// callbacks::DivergenceRollback, and SHA-256 digests (io/digest.hpp). Costs a translation unit nlohmann/json and LibTorch's JIT serialization
/// headers (bench/RESULTS.md, "Compile cost").
#include <policytrain/policytrain.hpp>

#include <policytrain/checkpoint/archive.hpp>
#include <policytrain/checkpoint/disk.hpp>
#include <policytrain/checkpoint/export.hpp>
#include <policytrain/checkpoint/fingerprint.hpp>
#include <policytrain/checkpoint/format.hpp>
#include <policytrain/checkpoint/sharded.hpp>

#include <policytrain/callbacks/divergence_rollback.hpp>
#include <policytrain/io/digest.hpp>
