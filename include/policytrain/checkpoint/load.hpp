#pragma once
/// \file
/// Loading a whole checkpoint into a running training: the model, the optimizer and the Trainer's state dict,
/// validated against the live ones first and applied all or nothing. Knows no Trainer context: a LoadTarget names
/// what is loaded into (checkpoint::load(ctx, file) in checkpoint/disk.hpp builds one from a context). Loading the
/// weights alone: checkpoint::load_weights (checkpoint/archive.hpp). A sharded checkpoint's folder
/// (checkpoint/sharded.hpp) loads alike, each rank taking the optimizer state of the parameters it owns only.
#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <policytrain/checkpoint/archive.hpp>
#include <policytrain/checkpoint/format.hpp>
#include <policytrain/checkpoint/layout.hpp>
#include <policytrain/checkpoint/sharded.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>

namespace policytrain::checkpoint {

/// What a checkpoint is loaded into: the model, the optimizer, and the Trainer's state dict (read, to validate
/// the file's against it, and written).
struct LoadTarget {
  torch::nn::Module& module;                               ///< the model the weights go into
  torch::optim::Optimizer& optimizer;                      ///< the optimizer the state goes into
  std::function<StateDict()> state_dict;                   ///< the Trainer's state, to validate the file's against
  std::function<void(const StateDict&)> load_state_dict;  ///< applies the file's Trainer state
  /// A sharded checkpoint: the parameters whose optimizer state this rank loads (its partition under
  /// parallel::ShardedDataParallel); empty: every one. A single file loads the whole state whatever this says.
  OwnsParameter owns{};
};

/// Reads `file`, validates it against `to`'s model, optimizer and state, and applies it (all or nothing).
/// Returns the file's metadata. Throws CheckpointError naming the file and the problem.
POLICYTRAIN_DECL nlohmann::json load(const LoadTarget& to, const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  const StateDict live = to.state_dict();
  if (Layout::is_sharded(file)) {
    Loaded l = read_sharded(file, to.module, to.optimizer, live, to.owns);
    l.apply(to.module, to.optimizer, live, to.load_state_dict);
    return l.meta;
  }
  const RawFile raw = read_file(file);
  Loaded l = read_payload(raw, file, to.module, to.optimizer, live);
  l.apply(to.module, to.optimizer, live, to.load_state_dict);
  return l.meta;
}
#else
;
#endif

}  // namespace policytrain::checkpoint
