#pragma once
// Command-line flags of the data-parallel policy, and the built-in launcher (`--nproc N`).
#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <policytrain/parallel/data_parallel.hpp>
#include <policytrain/parallel/launch.hpp>
#include <policytrain/parallel/sharded_data_parallel.hpp>

struct ParallelFlags {
  int nproc = 1;
  bool enabled = true;
  double timeout_s = 1800;  // PyTorch's default_pg_timeout
  double bucket_mb = 25;
  std::string backend = "auto";
  bool broadcast_buffers = true;
  bool find_unused = false;
  std::string compression = "none";
  bool bucket_view = false;
  bool static_graph = false;
  int zero = 0;
  int max_restarts = 0;
  bool elastic = false;

  void add(CLI::App& app) {
    app.add_option("--nproc", nproc,
                   "Start this many local ranks (data parallel; --batch-size is per rank, with --elastic over all "
                   "ranks). Under torchrun, leave it out")->check(CLI::PositiveNumber);
    app.add_flag("--elastic", elastic,
                 "A run that may resume on another number of ranks (docs/parallel.md, \"Elastic restarts\"); give it "
                 "to every attempt of the run. --batch-size is then the global micro-batch, summed over the ranks: "
                 "each rank takes --batch-size / world size (refused unless the world size divides it). The world "
                 "size is left out of the checkpoints' run fingerprint, so --resume continues at any world size, "
                 "mid-epoch included: the steps per epoch, the schedule and the global step carry over, and the "
                 "samples of the interrupted epoch not yet trained are shared over the new ranks (each trained once "
                 "in the epoch). At the same world size a resume is bit-identical. At another one it cannot be: each step "
                 "averages the same global batch, but split otherwise over the ranks, so the sums run in another "
                 "order (another all-reduce), batch norm normalises each rank's share (its statistics are over "
                 "another number of images) and dropout and augmentation draw from other ranks' generators; what "
                 "holds is the same steps, the same samples once per epoch and the same schedule. Not with --batch-size auto or --nominal-batch (the accumulation they derive depends on the "
                 "per-rank batch); with --data-on-device, another world size resumes from an epoch's end only");
    app.add_option("--max-restarts", max_restarts,
                   "With --nproc: when a rank fails, stop the others and restart every rank, at most this many "
                   "times (as torchrun's --max-restarts); with --resume each restart continues from the newest "
                   "complete checkpoint")->check(CLI::NonNegativeNumber);
    app.add_option("--parallel", enabled, "Join the data-parallel job described by RANK/WORLD_SIZE/... (false: train alone)");
    app.add_option("--dist-timeout", timeout_s, "Seconds before start-up or a collective is declared failed")->check(CLI::PositiveNumber);
    app.add_option("--bucket-mb", bucket_mb, "Gradient bucket size in MiB (one all-reduce per bucket)")->check(CLI::PositiveNumber);
    app.add_option("--dist-backend", backend, "auto (NCCL on CUDA, Gloo on CPU), gloo or nccl")
        ->check(CLI::IsMember({"auto", "gloo", "nccl"}));
    app.add_option("--broadcast-buffers", broadcast_buffers,
                   "Broadcast rank 0's batch-norm statistics before each window's first forward (DDP's broadcast_buffers)");
    app.add_option("--find-unused", find_unused,
                   "Leave parameters no rank used untouched (DDP's find_unused_parameters; false: an error)");
    app.add_option("--grad-compression", compression, "Gradients on the wire: none, fp16 or bf16 (DDP's compress hooks)")
        ->check(CLI::IsMember({"none", "fp16", "bf16"}));
    app.add_option("--grad-as-bucket-view", bucket_view,
                   "Gradients are views into c10d::Reducer's buckets (DDP's gradient_as_bucket_view)");
    app.add_option("--static-graph", static_graph, "The set of parameters with gradients never changes (DDP's static_graph)");
    app.add_option("--zero", zero,
                   "Shard across the ranks (parallel::ShardedDataParallel): 1 the optimizer state (ZeRO-1, as "
                   "PyTorch's ZeroRedundancyOptimizer), 2 the gradients too (ZeRO-2: reduce-scattered to their "
                   "owners); 3 the parameters too (as PyTorch's FSDP2: each layer a unit, gathered around its "
                   "compute); 0: every rank keeps all of both")
        ->check(CLI::IsMember({0, 1, 2, 3}));
  }

  /// The per-rank micro-batch of `batch` (--batch-size): with --elastic the global one divided by the world size.
  int64_t rank_batch(int64_t batch, int64_t world_size) const {
    if (!elastic) return batch;
    if (batch % world_size != 0)
      throw std::invalid_argument("--elastic: --batch-size " + std::to_string(batch) + " is the global micro-batch, "
                                  "and the world size " + std::to_string(world_size) + " does not divide it; give a "
                                  "batch size that is a multiple of every world size the run may resume at (e.g. " +
                                  std::to_string((batch / world_size + 1) * world_size) + ")");
    return batch / world_size;
  }

  policytrain::parallel::DataParallel make() const { return policytrain::parallel::DataParallel(options()); }

  /// With --zero 1 or 2: the same, with the optimizer state (and at 2 the gradients) sharded.
  policytrain::parallel::ShardedDataParallel make_sharded() const {
    return policytrain::parallel::ShardedDataParallel(options(), {.stage = zero});
  }

  policytrain::parallel::DataParallelOptions options() const {
    return policytrain::parallel::DataParallelOptions({.enabled = enabled,
                                                .timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)),
                                                .bucket_mb = bucket_mb,
                                                .backend = backend,
                                                .broadcast_buffers = broadcast_buffers,
                                                .find_unused_parameters = find_unused,
                                                .compression = compression,
                                                .gradient_as_bucket_view = bucket_view,
                                                .static_graph = static_graph});
  }

  /// This rank's optimizer state bytes, their sum over the ranks and the largest of one parameter, after training:
  /// the policy's own count when sharded; unsharded, every rank keeps all of it.
  template <class Parallel>
  static nlohmann::json state_bytes(const Parallel& dp, const torch::optim::Optimizer& opt) {
    if constexpr (std::is_same_v<Parallel, policytrain::parallel::ShardedDataParallel>) {
      return {{"optimizer_state_bytes", dp.optimizer_state_bytes()},
              {"optimizer_state_bytes_total", dp.optimizer_state_bytes_total()},
              {"optimizer_state_bytes_largest", dp.optimizer_state_bytes_largest()},
              {"gradient_bytes", dp.sharding().stage == 2 && dp.active() ? dp.gradient_bytes() : model_bytes(opt)}};
    } else {
      int64_t n = 0, largest = 0;
      for (const auto& [key, st] : opt.state()) {
        const int64_t b = policytrain::parallel::param_state_bytes(*st);
        n += b;
        largest = std::max(largest, b);
      }
      return {{"optimizer_state_bytes", n}, {"optimizer_state_bytes_total", n * dp.world_size()},
              {"optimizer_state_bytes_largest", largest}, {"gradient_bytes", model_bytes(opt)}};
    }
  }

  /// Bytes of a gradient of every parameter the optimizer holds (what a rank keeps after an unsharded backward).
  static int64_t model_bytes(const torch::optim::Optimizer& opt) {
    int64_t n = 0;
    for (const auto& g : opt.param_groups())
      for (const auto& p : g.params()) n += p.numel() * static_cast<int64_t>(p.element_size());
    return n;
  }

  template <class Parallel>
  nlohmann::json describe(const Parallel& dp) const {
    if (!dp.active()) return {{"name", zero ? "parallel::ShardedDataParallel" : "parallel::Single"}, {"zero", zero}};
    nlohmann::json d = {{"name", zero ? "parallel::ShardedDataParallel" : "parallel::DataParallel"}, {"zero", zero},
            {"world_size", dp.world_size()}, {"elastic", elastic}, {"backend", backend},
            {"bucket_mb", bucket_mb}, {"buckets", dp.bucket_count()}, {"allreduce_calls", dp.allreduce_calls()},
            {"comm_wait_seconds", dp.comm_wait_seconds()}, {"timeout_s", timeout_s},
            {"bucket_bytes_per_step", dp.bucket_bytes()}, {"buffer_broadcasts", dp.buffer_broadcasts()},
            {"compression", compression}, {"gradient_as_bucket_view", bucket_view}, {"static_graph", static_graph},
            {"engine", zero == 3 ? "fully sharded (stage 3)" : zero == 2 ? "reduce_scatter (ZeRO-2)" : "c10d::Reducer"}};
    if constexpr (std::is_same_v<Parallel, policytrain::parallel::ShardedDataParallel>) {
      if (zero == 3) {
        d["reduce_scatter_calls"] = dp.reduce_scatter_calls();
        d["all_gather_calls"] = dp.all_gather_calls();
        d["parameter_shard_bytes"] = dp.shard_bytes();
      } else if (zero == 2) {
        d["buckets"] = dp.gradient_buckets();
        d["reduce_scatter_calls"] = dp.reduce_scatter_calls();
        d["gradient_bytes_peak"] = dp.gradient_bytes_peak();
      }
    }
    return d;
  }
};
