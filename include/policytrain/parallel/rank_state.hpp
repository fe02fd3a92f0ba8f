#pragma once
/// \file
/// parallel::RankState — what each rank of a data-parallel job must agree on, or keep of its own, across a
/// checkpoint: the start check (every rank starts training from the same counters and weights, else
/// ResumeMismatch listing each rank's state; a mid-epoch checkpoint resumes on its own world size only), and each
/// rank's random generator states (gathered before a checkpoint, handed back to each rank after a resume on the
/// same world size). A piece of parallel::DataParallel and parallel::ShardedDataParallel; it knows no Trainer (it
/// is given the counters, the module and the device).
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/core/state.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/io/digest.hpp>
#include <policytrain/parallel/process_group.hpp>

namespace policytrain::parallel {

/// The ranks would start training from different states (each resumed from a different checkpoint, or some
/// from none), or a mid-epoch checkpoint is resumed with another world size. The message lists each rank's state.
struct ResumeMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The start check and the ranks' generator states (see the file comment).
class RankState {
 public:
  /// Whether the start check ran in this fit.
  bool verified() const { return verified_; }
  /// A new fit checks again.
  void reset() { verified_ = false; }
  /// The world size of the run whose checkpoint was loaded (0: none loaded).
  int64_t saved_world_size() const { return saved_world_size_; }

  /// Every rank must start training from the same state: the same counters (epoch, optimizer step, micro-batch
  /// in the epoch, skipped steps) and the same parameters and buffers (SHA-256). A fresh start always agrees
  /// (rank 0's weights were broadcast at fit begin); a resume agrees when every rank loaded the same
  /// checkpoint. Otherwise every rank stops with an error listing each rank's state: never a silent divergence.
  /// Also stops a mid-epoch resume with another world size than the checkpoint's unless the Trainer had the
  /// loader re-shard the rest of that epoch (resharded(); docs/parallel.md, "Elastic restarts"); at an epoch
  /// boundary the loaders re-shard by themselves. A collective.
  void verify_start(ProcessGroup& group, const TrainState& st, const torch::nn::Module& module) {
    verified_ = true;
    if (!group.active()) return;
    const std::string sha = io::params_sha256(module);
    const auto digest = static_cast<int64_t>(std::stoull(sha.substr(0, 15), nullptr, 16));
    constexpr int64_t k = 6;
    const int64_t w = group.world_size();
    auto table = torch::zeros({w, k}, torch::kLong);
    auto row = table[group.rank()];
    const int64_t mine[k] = {st.epoch, st.global_step, st.batch_in_epoch, st.skipped_steps, saved_world_size_, digest};
    for (int64_t j = 0; j < k; ++j) row[j].fill_(mine[j]);
    group.all_reduce(table, c10d::ReduceOp::SUM, "agreement on the starting state (resume)");
    auto t = table.accessor<int64_t, 2>();
    bool same = true;
    for (int64_t r = 1; r < w; ++r)
      for (int64_t j = 0; j < k; ++j) same = same && t[r][j] == t[0][j];
    if (!same) {
      std::vector<std::string> rows;
      for (int64_t r = 0; r < w; ++r)
        rows.push_back(policytrain::detail::format("rank {}: epoch {}, step {}, micro-batch {} of the epoch, weights {:015x}", r,
                                                   t[r][0], t[r][1], t[r][2], t[r][5]));
      throw ResumeMismatch(policytrain::detail::error_message(
          "policytrain::parallel::DataParallel",
          policytrain::detail::format(
              "{}: the ranks would start training from different states ({}); "
              "each rank resumed on its own (rank-local run directories?): give every rank the same checkpoint (a "
              "run directory all ranks read, or a copy of rank 0's file), or start all of them fresh",
              group.who(), fmt::join(rows, "; "))));
    }
    const int64_t saved = t[0][4];
    if (saved > 0 && saved != w && st.batch_in_epoch > 0 && !resharded_)
      throw ResumeMismatch(policytrain::detail::error_message(
          "policytrain::parallel::DataParallel",
          policytrain::detail::format(
              "{}: the checkpoint was written mid-epoch (micro-batch {} of epoch "
              "{}) by a run of world size {}, but this run has world size {}, and the rest of that epoch was not "
              "re-sharded (the checkpoint records no position in the epoch's global order, or the loader has no "
              "reshard_after(samples): data::TensorLoader has); resume with WORLD_SIZE={}, or from a checkpoint taken "
              "at an epoch end (those re-shard)",
              group.who(), st.batch_in_epoch, st.epoch, saved, w, saved)));
  }

  /// Where the current epoch began in this rank's sample count (TrainState::samples_seen), for the position in the
  /// epoch's global order a checkpoint records. At an epoch's start; after a resume mid-epoch, from the position
  /// the checkpoint recorded.
  void note_epoch_begin(const TrainState& st, int64_t world_size) {
    const int64_t loaded = std::exchange(loaded_epoch_samples_, -1);
    if (st.batch_in_epoch == 0) epoch_seen0_ = st.samples_seen;
    else if (loaded >= 0) epoch_seen0_ = st.samples_seen - loaded / world_size;
  }
  /// Before a checkpoint: the samples of the current epoch's global order trained so far (every rank consumed as
  /// many: the shards are equally long), recorded as `epoch_samples`.
  void note_save(const TrainState& st, int64_t world_size) {
    epoch_samples_ = st.batch_in_epoch == 0 ? 0 : (st.samples_seen - epoch_seen0_) * world_size;
  }
  /// After loading a mid-epoch checkpoint of another world size than `world_size`: the samples of that epoch's
  /// global order it had trained (for the loader's reshard_after); nothing otherwise, or when it recorded none.
  std::optional<int64_t> elastic_samples(int64_t world_size) const {
    if (saved_world_size_ <= 0 || saved_world_size_ == world_size || loaded_epoch_samples_ < 0) return std::nullopt;
    return loaded_epoch_samples_;
  }
  /// The loader re-sharded the rest of the resumed epoch over this world size: the start check lets it pass.
  void resharded() { resharded_ = true; }

  /// On every rank before a checkpoint is written (a collective): every rank's random generator states (the CPU
  /// one, and the CUDA one of `device`), for state_dict. The checkpoint's own generator state is the writing
  /// rank's (rank 0's); a resume on the same world size gives each rank back its own (restore_rng), so that the
  /// dropout masks and augmentations of every rank continue as in an uninterrupted run.
  void gather_rng(ProcessGroup& group, torch::Device device) {
    if (!group.active()) return;
    std::vector<torch::Tensor> mine{generator_state(torch::kCPU)};
    if (device.is_cuda()) mine.push_back(generator_state(device));
    rng_cpu_bytes_ = mine[0].numel();
    auto flat = torch::cat(mine).to(torch::kInt);
    auto table = torch::zeros({group.world_size(), flat.numel()}, torch::kInt);
    table[group.rank()].copy_(flat);
    group.all_reduce(table, c10d::ReduceOp::SUM, "gather of the ranks' random generator states (checkpoint)");
    rank_rng_ = table;
  }

  /// After a resume on the world size that wrote the checkpoint: this rank's own generator states (see
  /// gather_rng). A checkpoint of another world size, or of an older version, leaves rank 0's (the file's).
  void restore_rng(const ProcessGroup& group, torch::Device device) {
    auto t = std::exchange(loaded_rng_, torch::Tensor());
    if (!group.active() || !t.defined() || t.dim() != 2 || t.size(0) != group.world_size()) return;
    auto row = t[group.rank()].to(torch::kUInt8);
    const int64_t ncpu = loaded_rng_cpu_bytes_;
    auto set = [](torch::Device d, const torch::Tensor& st) {
      auto gen = at::globalContext().defaultGenerator(d);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(st);
    };
    if (ncpu <= 0 || ncpu > row.numel()) return;
    set(torch::kCPU, row.slice(0, 0, ncpu).contiguous());
    if (device.is_cuda() && row.numel() > ncpu) set(device, row.slice(0, ncpu).contiguous());
  }

  /// Adds the world size (so that a resume with another one is recognised) and the gathered generator states.
  void save(StateDict& d, int world_size) const {
    d["world_size"] = scalar_tensor(static_cast<int64_t>(world_size));
    d["epoch_samples"] = scalar_tensor(epoch_samples_);
    if (rank_rng_.defined()) {
      d["rank_rng"] = rank_rng_;
      d["rank_rng_cpu_bytes"] = scalar_tensor(rng_cpu_bytes_);
    }
  }
  /// Reads what save() wrote (the generator states wait for restore_rng).
  void load(const StateDict& d) {
    saved_world_size_ = state_int(d, "world_size");
    loaded_epoch_samples_ = d.count("epoch_samples") ? state_int(d, "epoch_samples") : -1;
    resharded_ = false;
    loaded_rng_ = d.count("rank_rng") ? d.at("rank_rng") : torch::Tensor();
    loaded_rng_cpu_bytes_ = d.count("rank_rng_cpu_bytes") ? state_int(d, "rank_rng_cpu_bytes") : 0;
  }

 private:
  /// The state of the default generator of `device` (CPU, or a CUDA device).
  static torch::Tensor generator_state(torch::Device device) {
    auto gen = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.get_state();
  }

  bool verified_ = false;             ///< the start check ran in this fit
  int64_t saved_world_size_ = 0;      ///< world size of the run whose checkpoint was loaded (0: none loaded)
  torch::Tensor rank_rng_;            ///< [world size, bytes]: every rank's generator states at the last checkpoint
  int64_t rng_cpu_bytes_ = 0;         ///< of which the CPU generator's
  torch::Tensor loaded_rng_;          ///< rank_rng_ of the checkpoint loaded, until restore_rng applies it
  int64_t loaded_rng_cpu_bytes_ = 0;  ///< of which the CPU generator's
  int64_t epoch_seen0_ = 0;           ///< TrainState::samples_seen where the current epoch began on this rank
  int64_t epoch_samples_ = 0;         ///< samples of the epoch's global order trained at the last note_save
  int64_t loaded_epoch_samples_ = -1; ///< epoch_samples of the checkpoint loaded (-1: none), until the epoch begins
  bool resharded_ = false;            ///< the loader re-sharded the resumed epoch over this world size
};

}  // namespace policytrain::parallel
