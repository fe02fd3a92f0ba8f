#pragma once
/// \file
/// memory::recompute — activation checkpointing: trade compute for memory.
///
/// `recompute(fn, args...)` runs `fn(args...)` under no-grad and keeps only its tensor arguments for backward;
/// backward runs `fn` again with grad enabled on the saved arguments and back-propagates through that copy, so
/// the activations inside `fn` live only while their segment's gradient is computed. It is a
/// `torch::autograd::Function` (the engine of PyTorch's `checkpoint(use_reentrant=True)`; LibTorch has no
/// saved-tensor hooks for C++, PyTorch issue #52744), and gives the gradients of
/// `torch.utils.checkpoint.checkpoint(fn, ..., use_reentrant=False)` bit for bit on the CPU in fp32.
/// - RNG: the CPU generator's state, and with POLICYTRAIN_WITH_CUDA the state of each CUDA device that holds a
///   tensor argument, are recorded before the forward and restored around the recompute (then put back), so
///   dropout draws the same mask twice.
/// - Autocast: the CPU and CUDA autocast state of the forward (enabled, dtype) is restored around the recompute,
///   so a segment run under precision::Autocast recomputes in the same dtypes. The autocast weight cache is off
///   inside the no-grad forward: a cast made there has no autograd history and must not be reused outside.
/// - Arguments: any number of `at::Tensor` arguments (requiring grad or not), and arguments of other types,
///   copied into the recompute closure. Results: `at::Tensor`, `std::vector<at::Tensor>` or `std::tuple` of
///   tensors.
/// - When grad mode is off (validation), `fn` runs directly: nothing to save.
/// - Parameters used inside `fn` get their gradients during the recompute's backward (accumulated into `.grad`
///   once each, as without checkpointing), even when no tensor argument requires grad.
/// Cost: one more forward of the segment per backward; memory: the segment's inputs instead of its activations.
/// Side effects other than RNG draws happen twice (batch-norm running statistics would be updated twice): such a
/// segment checks recomputing() to skip them the second time.
/// See also Recomputed (module wrapper), recompute_sequential, and docs/memory.md.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/ivalue.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/intrusive_ptr.h>
#include <fmt/format.h>
#include <torch/autograd.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#ifdef POLICYTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <policytrain/detail/torch_compat.hpp>
#include <policytrain/precision/autocast_guard.hpp>

namespace policytrain::memory {

namespace detail {

template <class T>
inline constexpr bool is_tensor_v = std::is_same_v<std::remove_cvref_t<T>, at::Tensor>;

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
      throw std::runtime_error(fmt::format(
          "policytrain::memory::recompute: the recompute returned {} tensors, the forward {}; the function must "
          "return the same number of tensors every time",
          outputs.size(), grad_outputs.size()));
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
      if (inputs[i].requires_grad()) result[1 + i] = inputs[i].grad();
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

template <class R>
struct is_tensor_tuple : std::false_type {};
template <class... T>
struct is_tensor_tuple<std::tuple<T...>> : std::bool_constant<(std::is_same_v<T, at::Tensor> && ...)> {};

/// Position of argument I among the tensor arguments.
template <size_t I, class... Args>
constexpr size_t tensor_slot() {
  constexpr bool flags[] = {is_tensor_v<Args>..., false};
  size_t n = 0;
  for (size_t k = 0; k < I; ++k) n += flags[k] ? 1 : 0;
  return n;
}

/// Stored copy of an argument: non-tensors by value; tensors not at all (they come from the saved inputs).
template <class A>
using stored_t = std::conditional_t<is_tensor_v<A>, std::monostate, std::decay_t<A>>;

}  // namespace detail

/// True while backward re-runs a recomputed function on this thread. A segment with side effects other than
/// RNG draws checks it to do them once: a batch norm in training mode, for instance, uses the batch statistics
/// without updating its running statistics again (see examples/fashion_mnist/model.hpp).
inline bool recomputing() { return detail::recomputing_flag(); }

/// Runs `fn(args...)` without keeping its activations; backward recomputes them (see the file comment).
/// Returns what `fn` returns: a tensor, a vector of tensors or a tuple of tensors.
template <class Fn, class... Args>
auto recompute(Fn&& fn, Args&&... args) {
  using R = std::remove_cvref_t<std::invoke_result_t<Fn&, Args&...>>;
  static_assert(std::is_same_v<R, at::Tensor> || std::is_same_v<R, std::vector<at::Tensor>> ||
                    detail::is_tensor_tuple<R>::value,
                "policytrain::memory::recompute: fn must return at::Tensor, std::vector<at::Tensor> or a std::tuple "
                "of at::Tensor; return the tensors and compute other values outside the recomputed segment");
  if (!at::GradMode::is_enabled()) return R(fn(args...));

  torch::autograd::variable_list inputs;
  ([&] { if constexpr (detail::is_tensor_v<Args>) inputs.push_back(args); }(), ...);
  const size_t n_inputs = inputs.size();

  auto seg = c10::make_intrusive<detail::Segment>();
  seg->n_inputs = n_inputs;
  seg->run = [f = std::decay_t<Fn>(std::forward<Fn>(fn)),
              stored = std::tuple<detail::stored_t<Args>...>(
                  [&]() -> detail::stored_t<Args> {
                    if constexpr (detail::is_tensor_v<Args>) return {};
                    else return args;
                  }()...)](const torch::autograd::variable_list& t) mutable {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      auto pick = [&]<size_t K>(std::integral_constant<size_t, K>) -> decltype(auto) {
        using A = std::tuple_element_t<K, std::tuple<Args...>>;
        if constexpr (detail::is_tensor_v<A>) return static_cast<const at::Tensor&>(t[detail::tensor_slot<K, Args...>()]);
        else return static_cast<std::tuple_element_t<K, std::tuple<detail::stored_t<Args>...>>&>(std::get<K>(stored));
      };
      return detail::to_list(f(pick(std::integral_constant<size_t, I>{})...));
    }(std::index_sequence_for<Args...>{});
  };

  // RNG and autocast state of the forward, for the recompute.
  seg->cpu_rng = detail::get_rng(at::detail::getDefaultCPUGenerator());
#ifdef POLICYTRAIN_WITH_CUDA
  for (const auto& t : inputs) {
    if (!t.is_cuda()) continue;
    const auto index = t.get_device();
    bool seen = false;
    for (const auto& [i, s] : seg->cuda_rng) seen = seen || i == index;
    if (!seen) seg->cuda_rng.emplace_back(index, detail::get_rng(at::cuda::detail::getDefaultCUDAGenerator(index)));
  }
#endif
  seg->cpu_autocast = policytrain::detail::autocast_enabled(c10::DeviceType::CPU);
  seg->cpu_autocast_dtype = policytrain::detail::autocast_dtype(c10::DeviceType::CPU);
  seg->cuda_autocast = policytrain::detail::autocast_enabled(c10::DeviceType::CUDA);
  seg->cuda_autocast_dtype = policytrain::detail::autocast_dtype(c10::DeviceType::CUDA);

  bool any_grad = false;
  for (const auto& t : inputs) any_grad = any_grad || t.requires_grad();
  if (!any_grad) {
    inputs.push_back(detail::grad_anchor());
    seg->anchored = true;
  }
  auto out = detail::RecomputeFunction::apply(seg, at::TensorList(inputs));
  return detail::from_list<R>(std::move(out));
}

/// Wraps a module so that its forward is recomputed in backward (training mode with grad on; in eval mode or
/// under no-grad it runs normally). `M` is a module holder (`torch::nn::Linear`, a TORCH_MODULE of yours).
/// The wrapper registers the inner module's parameters, buffers and submodules under their own names, so the
/// state dict of `Recomputed<M>` has the keys of `M`'s: weights move freely between the two.
template <class M>
class RecomputedImpl : public torch::nn::Module {
 public:
  /// Wraps `inner` (shared, not copied).
  explicit RecomputedImpl(M inner) : inner_(std::move(inner)) {
    for (auto& p : inner_->named_parameters(/*recurse=*/false)) register_parameter(p.key(), p.value(), p.value().requires_grad());
    for (auto& b : inner_->named_buffers(/*recurse=*/false)) register_buffer(b.key(), b.value());
    for (auto& c : inner_->named_children()) register_module(c.key(), c.value());
  }
  /// The inner module's forward, recomputed in backward when training. One tensor in, one out (so that the
  /// wrapper fits in a torch::nn::Sequential); for other signatures call recompute() in your forward.
  at::Tensor forward(const at::Tensor& x) {
    if (!is_training() || !at::GradMode::is_enabled()) return inner_->forward(x);
    return recompute([m = inner_](const at::Tensor& in) mutable -> at::Tensor { return m->forward(in); }, x);
  }
  /// Sets training mode here and in the inner module (which is not a registered child).
  void train(bool on = true) override {
    torch::nn::Module::train(on);
    inner_->train(on);
  }
  /// The wrapped module.
  M& inner() { return inner_; }

 private:
  M inner_;
};

/// Module holder of RecomputedImpl<M>: `Recomputed<torch::nn::Linear> l(torch::nn::Linear(4, 4));`.
template <class M>
class Recomputed : public torch::nn::ModuleHolder<RecomputedImpl<M>> {
 public:
  using torch::nn::ModuleHolder<RecomputedImpl<M>>::ModuleHolder;
  using Impl = RecomputedImpl<M>;  ///< the module class this holder owns
};

/// Runs `seq` on `x` in segments of `every` consecutive modules, each under recompute (like PyTorch's
/// `checkpoint_sequential`, which takes the number of segments instead; here the last segment is recomputed too).
/// `every = 1`: the input of every module is kept, nothing inside; `every = 2`: the input of every second module.
/// In eval mode or under no-grad it is `seq->forward(x)`. Throws std::invalid_argument when `every < 1`.
inline at::Tensor recompute_sequential(torch::nn::Sequential& seq, int64_t every, at::Tensor x) {
  if (every < 1)
    throw std::invalid_argument(fmt::format(
        "policytrain::memory::recompute_sequential: every = {}; expected at least 1 module per segment", every));
  if (!seq->is_training() || !at::GradMode::is_enabled()) return seq->forward(x);
  const int64_t n = static_cast<int64_t>(seq->size());
  for (int64_t begin = 0; begin < n; begin += every) {
    const int64_t end = std::min(n, begin + every);
    x = recompute(
        [s = seq, begin, end](const at::Tensor& in) mutable {
          at::Tensor h = in;
          for (auto it = s->begin() + begin; it != s->begin() + end; ++it) h = it->forward(h);
          return h;
        },
        x);
  }
  return x;
}

}  // namespace policytrain::memory
