#pragma once
/// \file
/// A checkpoint's payload written (make_payload, SaveOptions) and the helpers that name, copy and validate its
/// sections; Snapshot, the copy of a module, an optimizer, a Trainer state and the CPU generator that a failed load
/// or a divergence rollback restores. What the payload holds: checkpoint/archive.hpp.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <policytrain/detail/config.hpp>
#if POLICYTRAIN_DEFINE  // only the definitions use them
#include <ATen/CPUGeneratorImpl.h>
#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#endif
#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <policytrain/checkpoint/format.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/optim/state_layout.hpp>

#include <policytrain/checkpoint/archive_check.hpp>

namespace policytrain::checkpoint {

/// How weights and optimizer state are stored.
struct SaveOptions {
  bool half_weights = false;    ///< model parameters and buffers as fp16
  bool half_optimizer = false;  ///< optimizer moments as bf16
};

namespace detail {

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

/// The module's parameters, then its buffers, with their dotted names.
POLICYTRAIN_DECL std::vector<std::pair<std::string, torch::Tensor>> named_tensors(const torch::nn::Module& m)
#if POLICYTRAIN_DEFINE
{
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : m.named_parameters(true)) out.emplace_back(p.key(), p.value());
  for (const auto& b : m.named_buffers(true)) out.emplace_back(b.key(), b.value());
  return out;
}
#else
;
#endif

template <class Named>
void write_named(OutputArchive& a, const std::string& section, const Named& items,
                 const std::function<torch::Tensor(const torch::Tensor&)>& f) {
  c10::List<std::string> names;
  for (const auto& [k, v] : items) names.push_back(k);
  a.write(section + "/names", c10::IValue(names));
  int64_t i = 0;
  for (const auto& [k, v] : items) a.write(section + "/" + std::to_string(i++), c10::IValue(f(v.detach())));
}

POLICYTRAIN_DECL std::vector<std::pair<std::string, torch::Tensor>> read_named(InputArchive& a, const std::string& section,
                                                                     const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  c10::IValue names;
  if (!a.try_read(section + "/names", names) || !names.isList())
    fail(file, policytrain::detail::format("the payload has no '{}' section; it was not written by checkpoint::save", section));
  std::vector<std::pair<std::string, torch::Tensor>> out;
  int64_t i = 0;
  for (const auto& n : names.toListRef()) {
    if (!n.isString()) fail(file, policytrain::detail::format("the '{}' section's names are not strings", section));
    c10::IValue v;
    if (!a.try_read(section + "/" + std::to_string(i), v) || !v.isTensor())
      fail(file, policytrain::detail::format("the '{}' section lacks the tensor of '{}'", section, n.toStringRef()));
    out.emplace_back(n.toStringRef(), v.toTensor());
    ++i;
  }
  return out;
}
#else
;
#endif

/// Copies an archive, nested archives included, passing every tensor through `f`.
POLICYTRAIN_DECL void copy_archive(InputArchive& in, OutputArchive& out, const std::function<torch::Tensor(const torch::Tensor&)>& f)
#if POLICYTRAIN_DEFINE
{
  for (const auto& k : in.keys()) {
    c10::IValue v;
    in.read(k, v);
    if (v.isModule()) {
      InputArchive sub;
      in.read(k, sub);
      OutputArchive osub(out.compilation_unit());
      copy_archive(sub, osub, f);
      out.write(k, osub);
    } else if (v.isTensor()) {
      out.write(k, c10::IValue(f(v.toTensor())));
    } else {
      out.write(k, v);
    }
  }
}
#else
;
#endif

inline torch::Tensor identity(const torch::Tensor& t) { return t; }
inline std::string shape_str(const torch::Tensor& t) { return c10::str(t.sizes()); }
inline std::string dtype_str(const torch::Tensor& t) { return std::string(t.dtype().name()); }

POLICYTRAIN_DECL std::vector<std::string> sorted_keys(InputArchive& a)
#if POLICYTRAIN_DEFINE
{
  auto k = a.keys();
  std::sort(k.begin(), k.end());
  return k;
}
#else
;
#endif

/// Names of the optimizer's parameters, from the module (by identity), for messages.
POLICYTRAIN_DECL std::string param_name(const torch::nn::Module& m, const torch::Tensor& p)
#if POLICYTRAIN_DEFINE
{
  for (const auto& q : m.named_parameters(true))
    if (q.value().unsafeGetTensorImpl() == p.unsafeGetTensorImpl()) return q.key();
  return "(a parameter not in the model)";
}
#else
;
#endif

/// Checks that `file_opt` (an Optimizer::save archive) fits `live`: same kind (its param-group options),
/// same parameter groups, and state tensors shaped like their parameters.
POLICYTRAIN_DECL void validate_optimizer(InputArchive& file_opt, torch::optim::Optimizer& live, const torch::nn::Module& m,
                               const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  auto need = [&](InputArchive& a, const std::string& key, InputArchive& sub, const std::string& what) {
    if (!a.try_read(key, sub)) fail(file, policytrain::detail::format("the optimizer state lacks {}; it was not written by Optimizer::save", what));
  };
  auto need_int = [&](InputArchive& a, const std::string& key, const std::string& what) -> int64_t {
    c10::IValue v;
    if (!a.try_read(key, v) || !v.isTensor() || v.toTensor().numel() != 1)
      fail(file, policytrain::detail::format("the optimizer state lacks {}", what));
    return v.toTensor().item<int64_t>();
  };
  c10::IValue version;
  if (!file_opt.try_read("pytorch_version", version) || !version.isString() || version.toStringRef() != "1.5.0")
    fail(file, "the optimizer state has an unknown layout (its 'pytorch_version' is not \"1.5.0\")");

  // The live optimizer's own archive tells which option keys its kind has; its state is set aside meanwhile,
  // so that this costs nothing for a large model.
  OutputArchive tmpl_out;
  {
    auto state_aside = std::move(live.state());
    live.state().clear();
    try {
      live.save(tmpl_out);
    } catch (...) {
      live.state() = std::move(state_aside);
      throw;
    }
    live.state() = std::move(state_aside);
  }
  InputArchive tmpl;
  from_bytes(tmpl, to_bytes(tmpl_out));
  InputArchive groups, tmpl_groups, state;
  need(file_opt, "param_groups", groups, "its parameter groups");
  need(file_opt, "state", state, "its per-parameter state");
  tmpl.read("param_groups", tmpl_groups);
  const auto& live_groups = live.param_groups();
  const int64_t n_groups = need_int(groups, "param_groups/size", "the number of parameter groups");
  if (n_groups != static_cast<int64_t>(live_groups.size()))
    fail(file, policytrain::detail::format("the optimizer has {} parameter groups in the checkpoint, {} here; build the optimizer as the "
                           "run that wrote the checkpoint had it then (its {} group(s), add_param_group included)",
                           n_groups, live_groups.size(), n_groups));
  std::map<std::string, torch::Tensor> by_key;  // the saved parameter keys -> live parameters, by position
  for (int64_t g = 0; g < n_groups; ++g) {
    InputArchive grp, tmpl_grp, opts, tmpl_opts;
    need(groups, "param_groups/" + std::to_string(g), grp, policytrain::detail::format("parameter group {}", g));
    tmpl_groups.read("param_groups/" + std::to_string(g), tmpl_grp);
    need(grp, "options", opts, policytrain::detail::format("the options of parameter group {}", g));
    tmpl_grp.read("options", tmpl_opts);
    const auto have = sorted_keys(opts), want = sorted_keys(tmpl_opts);
    if (have != want)
      fail(file, policytrain::detail::format("the optimizer is of another kind: the checkpoint's parameter-group options are [{}], "
                             "this optimizer's are [{}]; build the same optimizer as the run that wrote it",
                             fmt::join(have, ", "), fmt::join(want, ", ")));
    const auto& params = live_groups[static_cast<size_t>(g)].params();
    const int64_t n = need_int(grp, "params/size", policytrain::detail::format("the size of parameter group {}", g));
    if (n != static_cast<int64_t>(params.size()))
      fail(file, policytrain::detail::format("parameter group {} of the optimizer has {} parameters in the checkpoint, {} here", g, n,
                             params.size()));
    for (int64_t i = 0; i < n; ++i) {
      c10::IValue key;
      if (!grp.try_read("params/" + std::to_string(i), key) || !key.isString())
        fail(file, policytrain::detail::format("parameter {} of group {} of the optimizer has no key", i, g));
      by_key[key.toStringRef()] = params[static_cast<size_t>(i)];
    }
  }
  for (const auto& k : state.keys()) {
    auto it = by_key.find(k);
    if (it == by_key.end()) fail(file, "the optimizer state refers to a parameter that is in no parameter group");
    const torch::Tensor& p = it->second;
    InputArchive ps;
    need(state, k, ps, "a parameter's state");
    for (const auto& sk : ps.keys()) {
      c10::IValue v;
      ps.read(sk, v);
      if (!v.isTensor()) continue;
      const torch::Tensor t = v.toTensor();
      if (t.dim() == 0 || (t.numel() == 1 && p.numel() != 1)) continue;  // step counters
      if (t.sizes() != p.sizes())
        fail(file, policytrain::detail::format("the optimizer's '{}' of parameter '{}' has shape {} in the checkpoint, the parameter has "
                               "{}; the checkpoint belongs to another model", sk, param_name(m, p), shape_str(t), shape_str(p)));
      if (t.is_floating_point() && t.scalar_type() != p.scalar_type())
        fail(file, policytrain::detail::format("the optimizer's '{}' of parameter '{}' is {} in the checkpoint, the parameter is {}", sk,
                               param_name(m, p), dtype_str(t), dtype_str(p)));
    }
  }
}
#else
;
#endif

POLICYTRAIN_DECL torch::Tensor rng_state_cpu()
#if POLICYTRAIN_DEFINE
{
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
#else
;
#endif
POLICYTRAIN_DECL void set_rng_state_cpu(const torch::Tensor& s)
#if POLICYTRAIN_DEFINE
{
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(s);
}
#else
;
#endif

}  // namespace detail

/// The payload of a checkpoint: model, optimizer, `state` (Trainer::state_dict()) and RNG states; and, when not
/// empty, `evaluated`: the weights the evaluation used (a callback such as EMA swaps its own in), by the module's
/// names, in the section "evaluated". `held`: parameters that a sharded checkpoint's shards hold (stage 3), written
/// as empty tensors of their dtype in their place (their storage may be freed: they are not read).
POLICYTRAIN_DECL std::string make_payload(const torch::nn::Module& module, const torch::optim::Optimizer& optimizer,
                                const StateDict& state, const SaveOptions& o = {},
                                const std::vector<std::pair<std::string, torch::Tensor>>& evaluated = {},
                                const std::vector<std::string>& held = {})
#if POLICYTRAIN_DEFINE
{
  using detail::OutputArchive;
  OutputArchive a;
  a.write("format", c10::IValue(static_cast<int64_t>(kFormatVersion)));
  auto weights = [&](const torch::Tensor& t) { return o.half_weights && t.is_floating_point() ? t.to(torch::kHalf) : t; };
  auto model = detail::named_tensors(module);
  for (auto& [k, v] : model)
    if (std::find(held.begin(), held.end(), k) != held.end()) v = torch::empty({0}, v.options().requires_grad(false));
  detail::write_named(a, "model", model, weights);
  if (!evaluated.empty()) detail::write_named(a, "evaluated", evaluated, weights);
  OutputArchive opt(a.compilation_unit());
  optimizer.save(opt);
  if (o.half_optimizer) {
    detail::InputArchive in;
    detail::from_bytes(in, detail::to_bytes(opt));
    OutputArchive conv(a.compilation_unit());
    detail::copy_archive(in, conv, [](const torch::Tensor& t) {
      return t.is_floating_point() && t.dim() > 0 ? t.to(torch::kBFloat16) : t;
    });
    a.write("optimizer", conv);
  } else {
    a.write("optimizer", opt);
  }
  detail::write_named(a, "state", state, detail::identity);
  a.write("rng/cpu", c10::IValue(detail::rng_state_cpu()));
#ifdef POLICYTRAIN_WITH_CUDA
  const int64_t n_cuda = static_cast<int64_t>(torch::cuda::device_count());
  a.write("rng/cuda/count", c10::IValue(n_cuda));
  for (int64_t i = 0; i < n_cuda; ++i) {
    auto gen = at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    a.write("rng/cuda/" + std::to_string(i), c10::IValue(gen.get_state()));
  }
#endif
  return detail::to_bytes(a);
}
#else
;
#endif

/// A copy of a module's tensors, an optimizer's state, a Trainer state and the CPU generator: what `restore`
/// puts back. Used to undo a failed load and by divergence rollback.
class Snapshot {
 public:
  Snapshot() = default;
  /// Copies the module's tensors and the optimizer's state, and (when given) the Trainer state and the CPU generator state.
  Snapshot(const torch::nn::Module& m, const torch::optim::Optimizer& opt, std::optional<StateDict> state = {},
           bool with_rng = true)
      : Snapshot(values(detail::named_tensors(m)), opt, std::move(state), with_rng) {}
  /// Copies `tensors` (in place of a module's: stage 3's parameter shards and the buffers) and the optimizer's state,
  /// and (when given) the Trainer state and the CPU generator state.
  Snapshot(const std::vector<torch::Tensor>& tensors, const torch::optim::Optimizer& opt, std::optional<StateDict> state = {},
           bool with_rng = true) {
    torch::NoGradGuard g;
    for (const auto& v : tensors) tensors_.push_back(v.detach().clone());
    detail::OutputArchive a;
    opt.save(a);
    optimizer_ = detail::to_bytes(a);
    if (state) {
      StateDict deep;
      for (auto& [k, v] : *state) deep.emplace(k, v.defined() ? v.detach().clone() : v);
      state_ = std::move(deep);
    }
    if (with_rng) rng_ = detail::rng_state_cpu();
  }
  /// Bytes of the tensors copied (the module's, or those given), without the optimizer's state.
  int64_t tensor_bytes() const {
    int64_t n = 0;
    for (const auto& t : tensors_) n += t.numel() * static_cast<int64_t>(t.element_size());
    return n;
  }
  /// Whether nothing was captured (default-constructed).
  bool empty() const { return optimizer_.empty(); }
  /// The Trainer state captured, if any.
  const std::optional<StateDict>& state() const { return state_; }

  /// Puts the module's tensors, the optimizer's state and the generator back (the Trainer state is the
  /// caller's to restore: `state()`).
  void restore(torch::nn::Module& m, torch::optim::Optimizer& opt) const { restore(values(detail::named_tensors(m)), opt); }
  /// restore() into `live`, the tensors given at construction (in the same order).
  void restore(const std::vector<torch::Tensor>& live, torch::optim::Optimizer& opt) const {
    torch::NoGradGuard g;
    for (size_t i = 0; i < live.size() && i < tensors_.size(); ++i) live[i].detach().copy_(tensors_[i]);
    detail::InputArchive a;
    detail::from_bytes(a, optimizer_);
    opt.state().clear();
    opt.load(a);
    optim::match_state_layout(opt);  // the parameters' layout may have changed since (channels-last)
    if (rng_.defined()) detail::set_rng_state_cpu(rng_);
  }

 private:
  static std::vector<torch::Tensor> values(const std::vector<std::pair<std::string, torch::Tensor>>& named) {
    std::vector<torch::Tensor> out;
    for (const auto& [k, v] : named) out.push_back(v);
    return out;
  }
  std::vector<torch::Tensor> tensors_;
  std::string optimizer_;
  std::optional<StateDict> state_;
  torch::Tensor rng_;
};


}  // namespace policytrain::checkpoint
