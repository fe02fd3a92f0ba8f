#pragma once
/// \file
/// The machinery of memory::recompute: the autograd function (forward under no-grad saving the inputs, backward
/// by recomputation), the forward's RNG and autocast state replayed in backward (RngFork, NoAutocastCache), the
/// recomputing() flag, and the conversions of a result to and from autograd's variable list. Part of
/// <policytrain/memory/recompute.hpp>.
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/ivalue.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/autograd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <policytrain/detail/format.hpp>
#include <policytrain/detail/torch_compat.hpp>
#include <policytrain/precision/autocast_guard.hpp>

#ifdef POLICYTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

namespace policytrain::memory::detail {

/// What backward needs besides the saved inputs: the closure, RNG and autocast state of the forward.
struct Segment : torch::CustomClassHolder {
  std::function<torch::autograd::variable_list(const torch::autograd::variable_list&)> run;
  size_t n_inputs = 0;    // tensor arguments of fn
  bool anchored = false;  // a grad_anchor() input follows them
  at::Tensor cpu_rng;
  std::vector<std::pair<c10::DeviceIndex, at::Tensor>> cuda_rng;
  bool cpu_autocast = false, cuda_autocast = false;
  c10::ScalarType cpu_autocast_dtype = c10::ScalarType::BFloat16, cuda_autocast_dtype = c10::ScalarType::Half;
};

inline at::Tensor get_rng(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}
inline void set_rng(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

/// Sets the RNG states recorded in `s` and puts the previous ones back on destruction (torch.random.fork_rng).
class RngFork {
 public:
  explicit RngFork(const Segment& s) {
    auto cpu = at::detail::getDefaultCPUGenerator();
    saved_cpu_ = get_rng(cpu);
    set_rng(cpu, s.cpu_rng);
#ifdef POLICYTRAIN_WITH_CUDA
    for (const auto& [index, state] : s.cuda_rng) {
      auto gen = at::cuda::detail::getDefaultCUDAGenerator(index);
      saved_cuda_.emplace_back(index, get_rng(gen));
      set_rng(gen, state);
    }
#endif
  }
  ~RngFork() {
    set_rng(at::detail::getDefaultCPUGenerator(), saved_cpu_);
#ifdef POLICYTRAIN_WITH_CUDA
    for (const auto& [index, state] : saved_cuda_) set_rng(at::cuda::detail::getDefaultCUDAGenerator(index), state);
#endif
  }
  RngFork(const RngFork&) = delete;
  RngFork& operator=(const RngFork&) = delete;

 private:
  at::Tensor saved_cpu_;
  std::vector<std::pair<c10::DeviceIndex, at::Tensor>> saved_cuda_;
};

inline bool& recomputing_flag() {
  thread_local bool on = false;
  return on;
}

/// Sets recomputing() for a scope.
class RecomputingScope {
 public:
  RecomputingScope() : prev_(recomputing_flag()) { recomputing_flag() = true; }
  ~RecomputingScope() { recomputing_flag() = prev_; }
  RecomputingScope(const RecomputingScope&) = delete;
  RecomputingScope& operator=(const RecomputingScope&) = delete;

 private:
  bool prev_;
};

/// Turns the autocast weight cache off for a scope (restored on exit).
class NoAutocastCache {
 public:
  NoAutocastCache() : prev_(policytrain::detail::autocast_cache_enabled()) {
    policytrain::detail::set_autocast_cache_enabled(false);
  }
  ~NoAutocastCache() { policytrain::detail::set_autocast_cache_enabled(prev_); }
  NoAutocastCache(const NoAutocastCache&) = delete;
  NoAutocastCache& operator=(const NoAutocastCache&) = delete;

 private:
  bool prev_;
};

/// The autograd function: forward under no-grad saving the inputs, backward by recomputation.
struct RecomputeFunction : torch::autograd::Function<RecomputeFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, c10::intrusive_ptr<Segment> seg,
                                                at::TensorList inputs) {
    // Function::apply runs this with grad mode off.
    torch::autograd::variable_list real(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(seg->n_inputs));
    torch::autograd::variable_list out;
    {
      NoAutocastCache no_cache;
      out = seg->run(real);
    }
    ctx->save_for_backward(real);
    ctx->set_materialize_grads(false);
    ctx->saved_data["segment"] = c10::IValue::make_capsule(seg);
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto seg = c10::static_intrusive_pointer_cast<Segment>(ctx->saved_data["segment"].toCapsule());
    const auto saved = ctx->get_saved_variables();
    torch::autograd::variable_list inputs;
    inputs.reserve(saved.size());
    for (const auto& t : saved) {
      if (!t.defined()) {  // an empty tensor inside a container argument
        inputs.push_back(t);
        continue;
      }
      auto d = t.detach();
      d.requires_grad_(t.requires_grad());
      inputs.push_back(std::move(d));
    }
    torch::autograd::variable_list outputs;
    {
      RngFork rng(*seg);
      // The forward's autocast state, whatever the thread's is now (backward usually runs outside autocast).
      precision::AutocastGuard cpu(c10::DeviceType::CPU, seg->cpu_autocast_dtype, seg->cpu_autocast);
      precision::AutocastGuard cuda(c10::DeviceType::CUDA, seg->cuda_autocast_dtype, seg->cuda_autocast);
      torch::AutoGradMode grad(true);
      RecomputingScope recomputing;
      outputs = seg->run(inputs);
    }
    if (outputs.size() != grad_outputs.size())
      throw std::runtime_error(policytrain::detail::error_message(
          "policytrain::memory::recompute",
          policytrain::detail::format("the recompute returned {} tensors, the forward {}; the function must "
                                      "return the same number of tensors every time",
                                      outputs.size(), grad_outputs.size())));
    torch::autograd::variable_list outs, grads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!grad_outputs[i].defined() || !outputs[i].requires_grad()) continue;
      outs.push_back(outputs[i]);
      grads.push_back(grad_outputs[i]);
    }
    if (!outs.empty()) {
      torch::AutoGradMode grad(true);
      torch::autograd::backward(outs, grads);
    }
    // One gradient per input of apply: the segment (none), each tensor, and the anchor if any (none).
    torch::autograd::variable_list result(1 + seg->n_inputs + (seg->anchored ? 1 : 0));
    for (size_t i = 0; i < seg->n_inputs; ++i)
      if (inputs[i].defined() && inputs[i].requires_grad()) result[1 + i] = inputs[i].grad();
    return result;
  }
};

/// A leaf that requires grad: added as an input when none of fn's tensors does, so that the output is part of
/// the graph and backward reaches the parameters inside fn.
inline const at::Tensor& grad_anchor() {
  static const at::Tensor t = torch::empty({0}).requires_grad_(true);
  return t;
}

template <class R>
torch::autograd::variable_list to_list(R&& r) {
  using T = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<T, at::Tensor>) {
    return {std::forward<R>(r)};
  } else if constexpr (std::is_same_v<T, std::vector<at::Tensor>>) {
    return std::forward<R>(r);
  } else {
    return std::apply([](auto&&... t) { return torch::autograd::variable_list{at::Tensor(t)...}; }, std::forward<R>(r));
  }
}

template <class R>
R from_list(torch::autograd::variable_list v) {
  if constexpr (std::is_same_v<R, at::Tensor>) {
    return std::move(v.at(0));
  } else if constexpr (std::is_same_v<R, std::vector<at::Tensor>>) {
    return v;
  } else {
    return [&]<size_t... I>(std::index_sequence<I...>) { return R{std::move(v.at(I))...}; }(
        std::make_index_sequence<std::tuple_size_v<R>>{});
  }
}

}  // namespace policytrain::memory::detail
