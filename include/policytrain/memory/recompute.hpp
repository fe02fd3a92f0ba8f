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
/// - Arguments: tensors wherever they are: an `at::Tensor`, or tensors inside `std::vector`, `std::array`,
///   `std::deque`, `std::list`, `std::tuple`, `std::pair`, `std::optional` and the mapped values of `std::map` /
///   `std::unordered_map`, nested (a U-Net's skip list): each is saved and gets its gradient, requiring grad or
///   not. Other arguments are copied into the recompute closure: arithmetic and enum values, `std::string`,
///   `const char*`, `c10::Device`, `c10::Scalar`, `c10::TensorOptions`, module holders (their parameters get
///   their gradients like captured ones), containers of these, and anything wrapped in `by_value(x)`. Any other
///   type (a struct of yours, `std::variant`, a smart pointer) might hide a tensor, which would be copied as a
///   plain value and get no gradient, and views or pointers (`at::TensorList`, `std::span`, `std::string_view`,
///   `T*`) might dangle by backward: both are refused by a static_assert (detail::RecomputeArgument<T> names the
///   type). Results: `at::Tensor`, `std::vector<at::Tensor>` or `std::tuple` of tensors.
/// - When grad mode is off (validation), `fn` runs directly: nothing to save.
/// - Parameters used inside `fn` get their gradients during the recompute's backward (accumulated into `.grad`
///   once each, as without checkpointing), even when no tensor argument requires grad.
/// Cost: one more forward of the segment per backward; memory: the segment's inputs instead of its activations.
/// Side effects other than RNG draws happen twice (batch-norm running statistics would be updated twice): such a
/// segment checks recomputing() to skip them the second time.
/// See also Recomputed (module wrapper), recompute_sequential, and docs/memory.md.
#include <algorithm>
#include <array>
#include <cstddef>
#include <deque>
#include <functional>
#include <initializer_list>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
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
#include <torch/nn/pimpl.h>
#ifdef POLICYTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <policytrain/detail/format.hpp>
#include <policytrain/detail/torch_compat.hpp>
#include <policytrain/memory/recompute_args.hpp>
#include <policytrain/memory/recompute_function.hpp>
#include <policytrain/memory/recompute_use.hpp>
#include <policytrain/precision/autocast_guard.hpp>

namespace policytrain::memory {

/// True while backward re-runs a recomputed function on this thread. A segment with side effects other than
/// RNG draws checks it to do them once: a batch norm in training mode, for instance, uses the batch statistics
/// without updating its running statistics again (see examples/fashion_mnist/model.hpp).
inline bool recomputing() { return detail::recomputing_flag(); }

/// Marks a recompute argument to be copied as a plain value, its inner tensors (if any) unseen: for a type of
/// yours that recompute cannot see into and that holds no tensor needing a gradient through the segment (settings,
/// a functor). `fn` receives the value itself.
template <class T>
detail::ByValue<std::decay_t<T>> by_value(T&& x) {
  return {std::forward<T>(x)};
}

/// Runs `fn(args...)` without keeping its activations; backward recomputes them (see the file comment).
/// Returns what `fn` returns: a tensor, a vector of tensors or a tuple of tensors.
template <class Fn, class... Args>
auto recompute(Fn&& fn, Args&&... args) {
  static_assert((detail::RecomputeArgument<std::decay_t<Args>>::ok && ...));
  // What fn is called with: each argument, a by_value one unwrapped.
  constexpr auto unwrap = []<class A>(A& a) -> decltype(auto) {
    if constexpr (detail::is_by_value<std::remove_cv_t<A>>::value) return (a.value);
    else return (a);
  };
  using R = std::remove_cvref_t<std::invoke_result_t<Fn&, decltype(unwrap(std::declval<std::decay_t<Args>&>()))...>>;
  static_assert(std::is_same_v<R, at::Tensor> || std::is_same_v<R, std::vector<at::Tensor>> ||
                    detail::is_tensor_tuple<R>::value,
                "policytrain::memory::recompute: fn must return at::Tensor, std::vector<at::Tensor> or a std::tuple "
                "of at::Tensor; return the tensors and compute other values outside the recomputed segment");
  if (!at::GradMode::is_enabled()) return R(fn(unwrap(args)...));

  // The arguments are copied; their tensors, wherever they are, are taken out (the saved inputs, in
  // for_each_tensor's order) and put back for each run of fn.
  auto stored = std::make_shared<std::tuple<detail::stored_t<Args>...>>(std::forward<Args>(args)...);
  torch::autograd::variable_list inputs;
  std::apply([&](auto&... a) {
    (detail::for_each_tensor(a, [&](at::Tensor& t) { inputs.push_back(std::exchange(t, at::Tensor())); }), ...);
  }, *stored);
  const size_t n_inputs = inputs.size();

  auto seg = c10::make_intrusive<detail::Segment>();
  seg->n_inputs = n_inputs;
  seg->run = [f = std::decay_t<Fn>(std::forward<Fn>(fn)), stored, unwrap](const torch::autograd::variable_list& t) mutable {
    size_t next = 0;
    auto fill = [&](at::Tensor& slot) { slot = t.at(next++); };
    std::apply([&](auto&... a) { (detail::for_each_tensor(a, fill), ...); }, *stored);
    // The copies hold no tensor between runs (the saved inputs are the only reference autograd checks).
    struct Clear {
      std::tuple<detail::stored_t<Args>...>& s;
      ~Clear() {
        std::apply([](auto&... a) { (detail::for_each_tensor(a, [](at::Tensor& x) { x = at::Tensor(); }), ...); }, s);
      }
    } clear{*stored};
    return std::apply([&](auto&... a) { return detail::to_list(f(unwrap(a)...)); }, *stored);
  };

  // RNG and autocast state of the forward, for the recompute.
  seg->cpu_rng = detail::get_rng(at::detail::getDefaultCPUGenerator());
#ifdef POLICYTRAIN_WITH_CUDA
  for (const auto& t : inputs) {
    if (!t.defined() || !t.is_cuda()) continue;
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
  for (const auto& t : inputs) any_grad = any_grad || (t.defined() && t.requires_grad());
  if (!any_grad) {
    inputs.push_back(detail::grad_anchor());
    seg->anchored = true;
  }
  auto out = detail::RecomputeFunction::apply(seg, at::TensorList(inputs));
  ++detail::segments_on_thread();  // recompute_segments(): seen by a policy that cannot compose with it
  return detail::from_list<R>(std::move(out));
}

/// Wraps a module so that its forward is recomputed in backward (training mode with grad on; in eval mode or
/// under no-grad it runs normally). `M` is a module holder (`torch::nn::Linear`, a TORCH_MODULE of yours).
/// The wrapper registers the inner module's parameters, buffers and submodules under their own names, so the
/// state dict of `Recomputed<M>` has the keys of `M`'s: weights move freely between the two.
template <class M>
class RecomputedImpl : public torch::nn::Module, public RecomputedModule {
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
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::memory::recompute_sequential",
        policytrain::detail::format("every = {}; expected at least 1 module per segment", every)));
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
