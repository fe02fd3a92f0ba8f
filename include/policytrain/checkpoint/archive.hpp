#pragma once
/// \file
/// What a checkpoint's payload holds, and how it is validated before it touches anything.
///
/// The payload is one torch::serialize::OutputArchive:
///   "model/names", "model/<i>"   every named parameter, then every named buffer of the module
///   "optimizer"                  torch::optim::Optimizer::save (moments, step counts, param-group options)
///   "state/names", "state/<i>"   Trainer::state_dict(): counters, data position, every stateful policy
///   "rng/cpu" (and "rng/cuda/<i>" in CUDA builds)   the default generators' states
///
/// Before LibTorch parses a payload read from disk, `check_archive` bounds what LibTorch would otherwise trust:
/// every zip record must lie inside the payload, and every pickle's length-prefixed strings must fit in their
/// record (LibTorch's unpickler reserves a declared string length before reading it: a forged length made a
/// 14 KiB file allocate 2 GiB, found by fuzz_archive).
///
/// `read_payload` parses and checks everything against the live model and optimizer (names, shapes, dtypes,
/// optimizer kind and parameter groups, every expected state entry) and returns it unapplied; `Loaded::apply`
/// then takes a Snapshot, applies, and on any failure restores the snapshot: a model is never half-loaded.
///
/// Half precision (SaveOptions): `half_weights` stores the model's floating-point parameters and buffers as
/// fp16 (half the size; a resumed run continues from weights rounded to fp16, so it is no longer bit-exact).
/// The optimizer's moments stay fp32 unless `half_optimizer` is set, which stores them as bf16 (fp16 would
/// flush Adam's small second moments to zero); policy state (EMA's copy included) always stays as it is.
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <policytrain/checkpoint/archive_check.hpp>
#include <policytrain/checkpoint/format.hpp>
#include <policytrain/checkpoint/payload.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::checkpoint {

/// A checkpoint read and validated against a live model and optimizer, not yet applied.
struct Loaded {
  /// The file it was read from.
  std::filesystem::path file;
  /// The file's metadata.
  nlohmann::json meta;
  std::vector<torch::Tensor> model;  ///< in the live module's order
  /// The optimizer's state, validated against the live optimizer.
  torch::serialize::InputArchive optimizer;
  /// The Trainer state (counters, data position, stateful policies).
  StateDict state;
  /// The CPU generator's state.
  torch::Tensor rng_cpu;
  /// The CUDA generators' states, one per device saved.
  std::vector<torch::Tensor> rng_cuda;

  /// Applies to the module, the optimizer and (through `load_state`) the Trainer. All or nothing: on any
  /// failure everything is restored as it was and CheckpointError names the file and the cause.
  template <class LoadState>
  void apply(torch::nn::Module& m, torch::optim::Optimizer& opt, const StateDict& live_state, LoadState&& load_state) {
    const Snapshot before(m, opt, live_state);
    try {
      load_state(state);
      torch::NoGradGuard g;
      auto live = detail::named_tensors(m);
      for (size_t i = 0; i < live.size(); ++i) live[i].second.copy_(model[i]);
      opt.state().clear();
      opt.load(optimizer);
      // The state takes each parameter's layout: a fused kernel walks them as flat memory (channels-last now,
      // contiguous when saved, or the other way round).
      optim::match_state_layout(opt);
      detail::set_rng_state_cpu(rng_cpu);
#ifdef POLICYTRAIN_WITH_CUDA
      for (size_t i = 0; i < rng_cuda.size() && i < static_cast<size_t>(torch::cuda::device_count()); ++i) {
        auto gen = at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i)));
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(rng_cuda[i]);
      }
#endif
    } catch (const std::exception& e) {
      before.restore(m, opt);
      load_state(*before.state());
      detail::fail(file, policytrain::detail::format("cannot be applied ({}); nothing was changed", e.what()));
    }
  }
};

namespace detail {
/// The model section of a payload, checked against `module` (the same names, shapes and dtypes; fp16 where the
/// file says its weights are half), in the live module's order. `section`: "model" (the trained weights) or
/// "evaluated" (the weights the evaluation used, when other than the trained ones). Throws CheckpointError.
POLICYTRAIN_DECL std::vector<torch::Tensor> read_model(InputArchive& a, const std::filesystem::path& file,
                                             const torch::nn::Module& module, bool half_w,
                                             const std::string& section = "model")
#if POLICYTRAIN_DEFINE
{
  std::vector<torch::Tensor> model;
  auto saved = read_named(a, section, file);
  std::map<std::string, torch::Tensor> by_name(saved.begin(), saved.end());
  auto live = named_tensors(module);
  for (const auto& [name, t] : live) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      fail(file, policytrain::detail::format("the checkpoint has no '{}': it belongs to another model (it holds {} tensors, this "
                             "model {})", name, saved.size(), live.size()));
    const torch::Tensor& s = it->second;
    if (s.sizes() != t.sizes())
      fail(file, policytrain::detail::format("'{}' has shape {} in the checkpoint, {} in this model: it belongs to another model",
                             name, shape_str(s), shape_str(t)));
    const bool dtype_ok = s.scalar_type() == t.scalar_type() ||
                          (half_w && s.scalar_type() == torch::kHalf && t.is_floating_point());
    if (!dtype_ok)
      fail(file, policytrain::detail::format("'{}' is {} in the checkpoint, {} in this model", name, dtype_str(s), dtype_str(t)));
    model.push_back(s);
  }
  if (saved.size() != live.size()) {
    std::set<std::string> live_names;
    for (const auto& [n, t] : live) live_names.insert(n);
    for (const auto& [n, t] : saved)
      if (!live_names.count(n)) fail(file, policytrain::detail::format("the checkpoint holds '{}', which this model lacks: it belongs to another model", n));
  }
  return model;
}
#else
;
#endif
}  // namespace detail

/// Parses a validated file's payload and checks it against the live module, optimizer and Trainer state
/// (`live_state`: Trainer::state_dict() now). Every entry of `live_state` must be present with the same dtype
/// (and be a scalar where it is one), and the checkpoint may hold no state of a policy this Trainer lacks. Throws CheckpointError.
POLICYTRAIN_DECL Loaded read_payload(const RawFile& raw, const std::filesystem::path& file, const torch::nn::Module& module,
                           torch::optim::Optimizer& optimizer, const StateDict& live_state)
#if POLICYTRAIN_DEFINE
{
  using detail::fail;
  Loaded r;
  r.file = file;
  r.meta = raw.meta;
  const bool half_w = meta_bool(file, raw.meta, "half_weights", false);
  const bool half_o = meta_bool(file, raw.meta, "half_optimizer", false);
  detail::check_archive(raw.payload(), file);
  detail::InputArchive a;
  try {
    detail::from_bytes(a, raw.payload());
  } catch (const std::exception& e) {
    fail(file, policytrain::detail::format("the payload is not a readable LibTorch archive: {}", e.what()));
  }
  try {
    r.model = detail::read_model(a, file, module, half_w);
    // Optimizer: converted back to fp32 when stored as bf16, then checked against the live one.
    detail::InputArchive opt;
    if (!a.try_read("optimizer", opt)) fail(file, "the payload has no optimizer state");
    if (half_o) {
      detail::OutputArchive conv;
      detail::copy_archive(opt, conv, [](const torch::Tensor& t) {
        return t.scalar_type() == torch::kBFloat16 ? t.to(torch::kFloat) : t;
      });
      detail::InputArchive back;
      detail::from_bytes(back, detail::to_bytes(conv));
      opt = std::move(back);
    }
    detail::validate_optimizer(opt, optimizer, module, file);
    r.optimizer = std::move(opt);
    // Trainer state: every entry the live Trainer has, alike; no policy the live Trainer lacks.
    for (auto& [k, v] : detail::read_named(a, "state", file)) r.state.emplace(k, v);
    std::set<std::string> live_prefixes;
    for (const auto& [k, v] : live_state) live_prefixes.insert(k.substr(0, k.find('/')));
    for (const auto& [k, v] : r.state)
      if (!live_prefixes.count(k.substr(0, k.find('/'))))
        fail(file, policytrain::detail::format("the checkpoint holds state of '{}', which this Trainer does not compose; compose the "
                               "same policies as the run that wrote it", k.substr(0, k.find('/'))));
    for (const auto& [k, v] : live_state) {
      auto it = r.state.find(k);
      // Entries added with training by steps and with tokens as the unit, which their readers default (-1, 0) in a
      // file written before.
      if (it == r.state.end() && (k == "trainer/best_step" || k.ends_with("/best_step") || k == "trainer/tokens_seen"))
        continue;
      if (it == r.state.end())
        fail(file, policytrain::detail::format("the checkpoint lacks the state entry '{}'; it was written by a Trainer with other "
                               "policies or settings", k));
      // Scalars must stay scalars; tensors may grow (histories) and are checked by their policy.
      if (v.defined() && (it->second.scalar_type() != v.scalar_type() || (v.dim() == 0 && it->second.dim() != 0)))
        fail(file, policytrain::detail::format("the state entry '{}' is {} {} in the checkpoint, {} {} here", k,
                               detail::dtype_str(it->second), detail::shape_str(it->second), detail::dtype_str(v),
                               detail::shape_str(v)));
    }
    // Generators.
    c10::IValue rng;
    if (!a.try_read("rng/cpu", rng) || !rng.isTensor()) fail(file, "the payload has no CPU generator state");
    r.rng_cpu = rng.toTensor();
    if (r.rng_cpu.sizes() != detail::rng_state_cpu().sizes())
      fail(file, policytrain::detail::format("the CPU generator state has shape {}, this LibTorch's has {}", detail::shape_str(r.rng_cpu),
                             detail::shape_str(detail::rng_state_cpu())));
    c10::IValue n_cuda;
    if (a.try_read("rng/cuda/count", n_cuda) && n_cuda.isInt())
      for (int64_t i = 0; i < n_cuda.toInt(); ++i) {
        c10::IValue g;
        if (a.try_read("rng/cuda/" + std::to_string(i), g) && g.isTensor()) r.rng_cuda.push_back(g.toTensor());
      }
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    fail(file, policytrain::detail::format("the payload is malformed: {}", e.what()));
  }
  return r;
}
#else
;
#endif

/// Which weights of a checkpoint load_weights loads.
enum class Weights {
  evaluated,  ///< those the validation evaluated (the metadata's "evaluated": EMA's average with callbacks::Ema)
  trained,    ///< the trained (live) weights the run continues from
};

/// The common part's file of the sharded checkpoint `folder`, after verifying the manifest and every file it lists
/// (defined in checkpoint/sharded.hpp, which this header includes at its end).
POLICYTRAIN_DECL std::filesystem::path verified_common(const std::filesystem::path& folder);
/// The common part of the sharded checkpoint `folder` as read, after verifying it, with the model's parameters that
/// its shards hold (stage 3) put together (checkpoint/sharded.hpp, merge_model).
POLICYTRAIN_DECL RawFile verified_common_file(const std::filesystem::path& folder);

/// Loads only the model's weights (parameters and buffers) of checkpoint `file` into `module`: names, shapes and
/// dtypes must match; the optimizer, the counters and the policies' state are not read. `file` may be a sharded
/// checkpoint's folder (checkpoint::Disk::Options::sharded): its manifest and files are verified, and the weights
/// read from its common part (which holds the model and the evaluated weights; at stage 3 the parameters' rows come
/// from every shard: merge_model). By default the weights
/// the validation evaluated: a file whose metadata records "evaluated" other than "model" (best.ckpt written
/// with callbacks::Ema: "callbacks::Ema") holds them in its "evaluated" section; `Weights::trained` loads the
/// trained ones. Validates everything before copying anything. Returns the file's metadata; throws
/// CheckpointError naming the file and the problem.
POLICYTRAIN_DECL nlohmann::json load_weights(torch::nn::Module& module, const std::filesystem::path& file,
                                             Weights which = Weights::evaluated)
#if POLICYTRAIN_DEFINE
{
  std::error_code ec;
  const RawFile raw = std::filesystem::is_directory(file, ec) ? verified_common_file(file) : read_file(file);
  detail::check_archive(raw.payload(), file);
  detail::InputArchive a;
  try {
    detail::from_bytes(a, raw.payload());
  } catch (const std::exception& e) {
    detail::fail(file, policytrain::detail::format("the payload is not a readable LibTorch archive: {}", e.what()));
  }
  const std::string evaluated = meta_string(file, raw.meta, "evaluated", "model");
  const bool other = which == Weights::evaluated && evaluated != "model";
  std::vector<torch::Tensor> model;
  try {
    model = detail::read_model(a, file, module, meta_bool(file, raw.meta, "half_weights", false), other ? "evaluated" : "model");
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    detail::fail(file, policytrain::detail::format("the payload is malformed{}: {}",
                                                   other ? policytrain::detail::format(" (its metadata says the {} weights were evaluated; "
                                                                                       "their section cannot be read)", evaluated)
                                                         : std::string(), e.what()));
  }
  torch::NoGradGuard g;
  auto live = detail::named_tensors(module);
  for (size_t i = 0; i < live.size(); ++i) live[i].second.copy_(model[i]);
  return raw.meta;
}
#else
;
#endif

/// Loads the weights of `file` that the validation evaluated into `trainer`'s module (see load_weights above) and
/// tells its policies (their on_weights_loaded hooks: callbacks::Ema's average becomes a copy of them), so that
/// `trainer.evaluate(data)` evaluates exactly these weights. Returns the file's metadata.
template <class TrainerT>
  requires requires(TrainerT& t) { t.module(); t.weights_loaded(); }
nlohmann::json load_weights(TrainerT& trainer, const std::filesystem::path& file) {
  auto meta = load_weights(trainer.module(), file, Weights::evaluated);
  trainer.weights_loaded();
  return meta;
}

}  // namespace policytrain::checkpoint

// verified_common's definition (sharded.hpp includes this header first; #pragma once makes the pair safe).
#include <policytrain/checkpoint/sharded.hpp>
