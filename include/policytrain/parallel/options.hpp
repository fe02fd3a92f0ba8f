#pragma once
/// \file
/// The run-time options of parallel::DataParallel (DataParallelOptions) and of parallel::ShardedDataParallel's
/// sharding (ShardingOptions), apart from the policies so that the pieces they configure include them alone.
#include <chrono>
#include <optional>
#include <string>

#include <c10/core/ScalarType.h>

namespace policytrain::parallel {

/// Run-time options of parallel::DataParallel.
struct DataParallelOptions {
  bool enabled = true;                ///< false: train alone even when launched with WORLD_SIZE > 1
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  ///< start-up and every collective (PyTorch's default_pg_timeout)
  /// Gradient bytes per all-reduce (MiB), as DDP's bucket_cap_mb. As in DDP, the first backward all-reduces one
  /// bucket of everything (the order in which gradients become ready is not known yet), and the Reducer then
  /// rebuilds the buckets in that order.
  double bucket_mb = 25;
  /// The first bucket's cap (MiB) after the rebuild; unset: 1 MiB when bucket_mb is the default 25, else
  /// bucket_mb (DDP's rule).
  std::optional<double> first_bucket_mb{};
  std::string backend = "auto";       ///< auto (NCCL on CUDA, Gloo on CPU), gloo, nccl
  int gloo_threads = 2;               ///< Gloo's worker threads (collectives in flight at once)
  /// Broadcast rank 0's buffers (batch-norm statistics) before the first forward of every accumulation window
  /// and before every evaluation, as DDP's broadcast_buffers=True (DDP: before the forward that follows a
  /// synchronised one). false: every rank keeps its own buffers.
  bool broadcast_buffers = true;
  /// A parameter that no rank used in a step keeps an undefined gradient (the optimizer leaves it alone), as
  /// DDP's find_unused_parameters=True; false: such a parameter is an error naming it (DDP also stops).
  /// Without static_graph the used parameters are found by a search of the graph from the forward's output,
  /// which cannot see those a memory::recompute segment uses: that combination is refused (at fit begin for a
  /// memory::Recomputed module, after the first forward for a recompute() call), naming static_graph as the fix.
  bool find_unused_parameters = false;
  /// Gradient compression on the wire, as DDP's built-in communication hooks: "none", "fp16"
  /// (fp16_compress_hook) or "bf16" (bf16_compress_hook).
  std::string compression = "none";
  /// Gradients become views into the Reducer's buckets (DDP's gradient_as_bucket_view): one copy less per step
  /// and no second copy of the gradients in memory.
  bool gradient_as_bucket_view = false;
  /// The set of parameters that get gradients never changes (DDP's static_graph=True): the Reducer learns it in
  /// the first step (whose all-reduce waits for the end of that backward) and then skips the graph search of
  /// find_unused_parameters. Composes with memory::recompute, with find_unused_parameters or not.
  bool static_graph = false;
};

/// How the optimizer state is split over the ranks at stages 1 and 2 (ShardingOptions::partition).
enum class Partition {
  /// Whole parameters, ZeroRedundancyOptimizer's greedy rule (the default, as Python's): a rank's state is bounded
  /// below by the largest parameter's.
  greedy,
  /// Every parameter chunked on dim 0 across the ranks (torch.chunk, padded to a multiple of the world size, as
  /// FSDP2 shards): each rank keeps and steps the state of its chunk of every parameter, about total / N each.
  dim0,
};

/// Mixed precision of stage 3's units, PyTorch FSDP2's MixedPrecisionPolicy (ShardingOptions::mp_policy). The
/// shards stay in the parameters' own dtype (fp32 masters: what the optimizer steps and checkpoints hold).
struct MixedPrecisionPolicy {
  /// The dtype of the gathered parameters, hence of the forward and backward: each shard is cast to it before the
  /// all-gather (FSDP2's all-gather copy-in), and a unit casts its floating-point input to it (FSDP2's
  /// cast_forward_inputs). Unset, or the parameters' own dtype: no cast.
  std::optional<c10::ScalarType> param_dtype{};
  /// The dtype of the gradients' reduce-scatter: the gradients are cast to it before, and the result to the
  /// shard's dtype after (then accumulated into the shard's `.grad`). Unset: param_dtype's (FSDP2's default). With
  /// accumulation, the micro-steps' gradients are summed in this dtype too (FSDP2's unsharded_accumulated_grad).
  std::optional<c10::ScalarType> reduce_dtype{};
};

/// Run-time options of the sharding (beyond DataParallelOptions).
struct ShardingOptions {
  /// ZeRO stage: 0 shards nothing (DataParallel's behaviour, so that one Trainer type can choose DataParallel,
  /// ZeRO-1 or ZeRO-2 at run time); 1 shards the optimizer state (gradients are all-reduced by c10d::Reducer, as
  /// under DataParallel); 2 shards the gradients too (reduce-scattered into their owners' partitions during the
  /// backward); 3 shards the parameters too (chunked on dim 0, gathered per parallel::FullyShard unit around its
  /// forward and backward, as PyTorch's FSDP2).
  int stage = 1;
  /// How the optimizer state (and at stage 2 the gradients) are split: whole parameters (greedy) or dim-0 chunks of
  /// every parameter (dim0). Stages 0 and 3 ignore it (stage 3 chunks every parameter on dim 0 anyway).
  Partition partition = Partition::greedy;
  /// Stage 3 only: mixed precision of the units and the root (FSDP2's `fully_shard(..., mp_policy=...)`, one
  /// policy for all). Another stage refuses a policy that sets a dtype.
  MixedPrecisionPolicy mp_policy{};
  /// Stage 3: a unit issues the all-gather of the unit that ran after it in the last step before its own forward
  /// compute, and in the backward the gather of the unit whose backward follows (FSDP2's forward and backward
  /// prefetch, one unit ahead), so that communication overlaps compute; false gathers each unit when it starts. The
  /// results are the same bit for bit; the cost is one more unit's parameters gathered at a time.
  bool prefetch = true;
};

}  // namespace policytrain::parallel
