#pragma once
/// \file
/// Run identity: what makes two checkpoints the same run's. A run has an id (checkpoint::detail::new_run_id, made
/// at a fresh start and kept by every resume) and a fingerprint (checkpoint::run_fingerprint: the model's
/// architecture digest and sizes, the optimizer's family and parameter groups, and the RunInfo fields that are
/// set). Reading and comparing a recorded fingerprint: checkpoint/fingerprint.hpp. Knows no Trainer context: the
/// checkpoint policy (checkpoint::Disk) fills RunInfo's world size from its context.
#include <cxxabi.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <typeinfo>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <policytrain/checkpoint/fingerprint.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/io/digest.hpp>

namespace policytrain::checkpoint {

/// The policytrain version recorded in every checkpoint's metadata.
inline constexpr const char* kLibraryVersion = "0.1.0";

/// What a run is, beyond its policies: a checkpoint resumes only a run whose fingerprint it matches. Fields left
/// at 0 are not recorded (and not compared).
struct RunInfo {
  /// Processes; 0: taken from the Trainer's parallel policy (1 without data parallelism); -1: not recorded, so that
  /// an epoch-end checkpoint resumes on another world size (the loaders re-shard, a sharded optimizer re-partitions;
  /// the steps per epoch, and so a step-counted schedule, change with it).
  int64_t world_size = 0;
  int64_t batch_size = 0;  ///< the batch size the position within an epoch counts in
  int64_t data_size = 0;   ///< training samples (the epoch's length)
};

namespace detail {
/// Hex SHA-256 of the module's architecture: every parameter's and buffer's name, shape and dtype, in
/// registration order (not the values).
POLICYTRAIN_DECL std::string architecture_digest(const torch::nn::Module& m)
#if POLICYTRAIN_DEFINE
{
  std::string text;
  auto add = [&](const std::string& kind, const std::string& name, const torch::Tensor& t) {
    text += policytrain::detail::format("{} {} {} {}\n", kind, name, c10::str(t.sizes()), t.dtype().name());
  };
  for (const auto& p : m.named_parameters(true)) add("param", p.key(), p.value());
  for (const auto& b : m.named_buffers(true)) add("buffer", b.key(), b.value());
  return io::sha256_hex(text);
}
#else
;
#endif
/// A new run id: 16 hex digits from std::random_device mixed with the clock (unique per fresh start, not secret).
POLICYTRAIN_DECL std::string new_run_id()
#if POLICYTRAIN_DEFINE
{
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  v ^= static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) * 0x9E3779B97F4A7C15ull;
  return policytrain::detail::format("{:016x}", v);
}
#else
;
#endif
/// The dynamic type of `opt`, demangled ("torch::optim::AdamW").
POLICYTRAIN_DECL std::string optimizer_kind(const torch::optim::Optimizer& opt)
#if POLICYTRAIN_DEFINE
{
  const char* mangled = typeid(opt).name();
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string r = status == 0 && d ? d : mangled;
  std::free(d);
  return r;
}
#else
;
#endif
/// The family and hyper-parameters (all but the lr) of one parameter group's options: {} when the options are of
/// a type not known here (the family is then the optimizer's C++ type).
POLICYTRAIN_DECL std::pair<std::string, nlohmann::json> optimizer_options(const torch::optim::OptimizerOptions& o)
#if POLICYTRAIN_DEFINE
{
  namespace opt = torch::optim;
  if (auto* a = dynamic_cast<const opt::AdamWOptions*>(&o))
    return {"adamw", {{"betas", {std::get<0>(a->betas()), std::get<1>(a->betas())}}, {"eps", a->eps()},
                      {"weight_decay", a->weight_decay()}, {"amsgrad", a->amsgrad()}}};
  if (auto* a = dynamic_cast<const opt::AdamOptions*>(&o))
    return {"adam", {{"betas", {std::get<0>(a->betas()), std::get<1>(a->betas())}}, {"eps", a->eps()},
                     {"weight_decay", a->weight_decay()}, {"amsgrad", a->amsgrad()}}};
  if (auto* s = dynamic_cast<const opt::SGDOptions*>(&o))
    return {"sgd", {{"momentum", s->momentum()}, {"dampening", s->dampening()}, {"weight_decay", s->weight_decay()},
                    {"nesterov", s->nesterov()}}};
  if (auto* r = dynamic_cast<const opt::RMSpropOptions*>(&o))
    return {"rmsprop", {{"alpha", r->alpha()}, {"eps", r->eps()}, {"weight_decay", r->weight_decay()},
                        {"momentum", r->momentum()}, {"centered", r->centered()}}};
  if (auto* g = dynamic_cast<const opt::AdagradOptions*>(&o))
    return {"adagrad", {{"lr_decay", g->lr_decay()}, {"weight_decay", g->weight_decay()},
                        {"initial_accumulator_value", g->initial_accumulator_value()}, {"eps", g->eps()}}};
  return {"", nlohmann::json::object()};
}
#else
;
#endif
/// The optimizer's part of the run fingerprint: its family, named by its options' type, which a fused optimizer
/// shares with LibTorch's (optim::FusedAdamW and torch::optim::AdamW are "adamw"; an optimizer with options of
/// another type: its C++ type), and each parameter group's parameter count, element count and hyper-parameters
/// other than the lr (the schedule's, restored from the checkpoint with the groups).
POLICYTRAIN_DECL nlohmann::json optimizer_fingerprint(const torch::optim::Optimizer& opt)
#if POLICYTRAIN_DEFINE
{
  std::string family;
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : opt.param_groups()) {
    auto [fam, hyper] = optimizer_options(g.options());
    if (family.empty()) family = fam;
    int64_t elements = 0;
    for (const auto& p : g.params()) elements += p.numel();
    hyper["params"] = g.params().size();
    hyper["elements"] = elements;
    groups.push_back(std::move(hyper));
  }
  if (family.empty()) family = optimizer_kind(opt);
  return {{"family", family}, {"param_groups", std::move(groups)}};
}
#else
;
#endif
}  // namespace detail

/// The fingerprint of a run (stored as the metadata's "fingerprint"): the model's architecture digest, its tensor
/// and element counts, the optimizer's family and parameter groups (detail::optimizer_fingerprint), and the
/// RunInfo fields that are set.
POLICYTRAIN_DECL nlohmann::json run_fingerprint(const torch::nn::Module& m, const torch::optim::Optimizer& opt, const RunInfo& run)
#if POLICYTRAIN_DEFINE
{
  int64_t tensors = 0, elements = 0;
  for (const auto& p : m.named_parameters(true)) ++tensors, elements += p.value().numel();
  for (const auto& b : m.named_buffers(true)) ++tensors, elements += b.value().numel();
  nlohmann::json f{{"model", detail::architecture_digest(m)},
                   {"model_tensors", tensors},
                   {"model_elements", elements},
                   {"optimizer", detail::optimizer_fingerprint(opt)}};
  if (run.world_size > 0) f["world_size"] = run.world_size;
  if (run.batch_size > 0) f["batch_size"] = run.batch_size;
  if (run.data_size > 0) f["data_size"] = run.data_size;
  return f;
}
#else
;
#endif

}  // namespace policytrain::checkpoint
