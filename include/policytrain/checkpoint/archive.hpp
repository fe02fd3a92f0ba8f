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

namespace policytrain::checkpoint {

/// How weights and optimizer state are stored.
struct SaveOptions {
  bool half_weights = false;    ///< model parameters and buffers as fp16
  bool half_optimizer = false;  ///< optimizer moments as bf16
};

namespace detail {

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

POLICYTRAIN_DECL std::string to_bytes(OutputArchive& a)
#if POLICYTRAIN_DEFINE
{
  std::string s;
  a.save_to([&](const void* p, size_t n) -> size_t {
    s.append(static_cast<const char*>(p), n);
    return n;
  });
  return s;
}
#else
;
#endif
inline void from_bytes(InputArchive& a, std::string_view s) { a.load_from(s.data(), s.size(), torch::Device(torch::kCPU)); }

/// Walks one pickle of a LibTorch archive (the opcodes torch::jit::Unpickler reads) and checks that every
/// argument, length-prefixed strings included, fits in the record. Stops at STOP or at an opcode the
/// unpickler does not read (it refuses those itself). Throws CheckpointError naming the record and the byte.
POLICYTRAIN_DECL void check_pickle(std::string_view p, const std::string& record, const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  size_t i = 0;
  const auto need = [&](uint64_t n, const char* what) {
    if (n > p.size() - i)
      fail(file, policytrain::detail::format("the archive's record '{}' declares {} of {} bytes at byte {} where {} remain; "
                             "the payload is forged or damaged",
                             record, what, n, i, p.size() - i));
  };
  while (i < p.size()) {
    const auto op = static_cast<unsigned char>(p[i++]);
    switch (op) {
      case '.':  // STOP
        return;
      case 0x80: case 'q': case 'K': case 'h':  // PROTO, BINPUT, BININT1, BINGET
        need(1, "an argument"), i += 1;
        break;
      case 'M':  // BININT2
        need(2, "an argument"), i += 2;
        break;
      case 'r': case 'J': case 'j':  // LONG_BINPUT, BININT, LONG_BINGET
        need(4, "an argument"), i += 4;
        break;
      case 'G':  // BINFLOAT
        need(8, "an argument"), i += 8;
        break;
      case 0x8a: {  // LONG1: one length byte, then the integer
        need(1, "a length");
        const uint64_t n = get_le(p.data() + i, 1);  // pickle integers are little-endian
        i += 1;
        need(n, "an integer");
        i += n;
      } break;
      case 'X': {  // BINUNICODE: four length bytes, then the string
        need(4, "a length");
        const uint64_t n = get_le(p.data() + i, 4);
        i += 4;
        need(n, "a string");
        i += n;
      } break;
      case 'c':  // GLOBAL: module and class names, each ending with a newline
        for (int k = 0; k < 2; ++k) {
          const auto nl = p.find('\n', i);
          if (nl == std::string_view::npos)
            fail(file, policytrain::detail::format("the archive's record '{}' holds a name at byte {} that never ends (no newline); "
                                   "the payload is forged or damaged", record, i));
          i = nl + 1;
        }
        break;
      case '(': case ')': case ']': case '}': case 'N': case 0x88: case 0x89: case 't': case 0x85: case 0x86:
      case 0x87: case 'e': case 'l': case 'd': case 'u': case 's': case 0x81: case 'b': case 'R': case 'Q':
        break;  // no argument
      default:
        return;  // not an opcode the unpickler reads: it refuses the archive itself
    }
  }
}
#else
;
#endif

/// Bounds a LibTorch archive read from disk before InputArchive parses it: every zip record lies inside the
/// payload (so no record allocates more than the file holds) and every pickle passes check_pickle.
POLICYTRAIN_DECL void check_archive(std::string_view bytes, const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  std::vector<std::pair<std::string, std::string>> pickles;
  try {
    caffe2::serialize::PyTorchStreamReader reader(
        std::make_shared<caffe2::serialize::MemoryReadAdapter>(bytes.data(), static_cast<off_t>(bytes.size())));
    for (const auto& name : reader.getAllRecords()) {
      const uint64_t size = reader.getRecordSize(name), offset = reader.getRecordOffset(name);
      if (offset > bytes.size() || size > bytes.size() - offset)
        fail(file, policytrain::detail::format("the archive's record '{}' declares {} bytes at offset {}, past the payload's end "
                               "({} bytes); the payload is forged or damaged",
                               name, size, offset, bytes.size()));
      if (name.ends_with(".pkl")) {
        auto [data, n] = reader.getRecord(name);
        pickles.emplace_back(name, std::string(static_cast<const char*>(data.get()), n));
      }
    }
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    fail(file, policytrain::detail::format("the payload is not a readable LibTorch archive: {}", e.what()));
  }
  for (const auto& [name, p] : pickles) check_pickle(p, name, file);
}
#else
;
#endif

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
/// names, in the section "evaluated".
POLICYTRAIN_DECL std::string make_payload(const torch::nn::Module& module, const torch::optim::Optimizer& optimizer,
                                const StateDict& state, const SaveOptions& o = {},
                                const std::vector<std::pair<std::string, torch::Tensor>>& evaluated = {})
#if POLICYTRAIN_DEFINE
{
  using detail::OutputArchive;
  OutputArchive a;
  a.write("format", c10::IValue(static_cast<int64_t>(kFormatVersion)));
  auto weights = [&](const torch::Tensor& t) { return o.half_weights && t.is_floating_point() ? t.to(torch::kHalf) : t; };
  detail::write_named(a, "model", detail::named_tensors(module), weights);
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
           bool with_rng = true) {
    torch::NoGradGuard g;
    for (auto& [k, v] : detail::named_tensors(m)) tensors_.push_back(v.detach().clone());
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
  /// Whether nothing was captured (default-constructed).
  bool empty() const { return optimizer_.empty(); }
  /// The Trainer state captured, if any.
  const std::optional<StateDict>& state() const { return state_; }

  /// Puts the module's tensors, the optimizer's state and the generator back (the Trainer state is the
  /// caller's to restore: `state()`).
  void restore(torch::nn::Module& m, torch::optim::Optimizer& opt) const {
    torch::NoGradGuard g;
    auto live = detail::named_tensors(m);
    for (size_t i = 0; i < live.size() && i < tensors_.size(); ++i) live[i].second.copy_(tensors_[i]);
    detail::InputArchive a;
    detail::from_bytes(a, optimizer_);
    opt.state().clear();
    opt.load(a);
    optim::match_state_layout(opt);  // the parameters' layout may have changed since (channels-last)
    if (rng_.defined()) detail::set_rng_state_cpu(rng_);
  }

 private:
  std::vector<torch::Tensor> tensors_;
  std::string optimizer_;
  std::optional<StateDict> state_;
  torch::Tensor rng_;
};

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

/// Loads only the model's weights (parameters and buffers) of checkpoint `file` into `module`: names, shapes and
/// dtypes must match; the optimizer, the counters and the policies' state are not read. By default the weights
/// the validation evaluated: a file whose metadata records "evaluated" other than "model" (best.ckpt written
/// with callbacks::Ema: "callbacks::Ema") holds them in its "evaluated" section; `Weights::trained` loads the
/// trained ones. Validates everything before copying anything. Returns the file's metadata; throws
/// CheckpointError naming the file and the problem.
POLICYTRAIN_DECL nlohmann::json load_weights(torch::nn::Module& module, const std::filesystem::path& file,
                                             Weights which = Weights::evaluated)
#if POLICYTRAIN_DEFINE
{
  const RawFile raw = read_file(file);
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
