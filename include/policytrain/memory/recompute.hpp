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
#include <policytrain/memory/recompute_use.hpp>
#include <policytrain/precision/autocast_guard.hpp>

namespace policytrain::memory {

namespace detail {

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
      throw std::runtime_error(policytrain::detail::format(
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

template <class R>
struct is_tensor_tuple : std::false_type {};
template <class... T>
struct is_tensor_tuple<std::tuple<T...>> : std::bool_constant<(std::is_same_v<T, at::Tensor> && ...)> {};

template <class T>
struct always_false : std::false_type {};

/// How recompute treats an argument of (decayed) type T: `ok` whether it takes it, `tensors` whether values of T
/// may hold tensors (found and replaced by walk), `view` whether it is refused as a non-owning view or pointer.
/// The primary template: a type recompute cannot see into, refused unless it is a plain value (below).
template <class T, class = void>
struct ArgTraits {
  static constexpr bool tensors = false, view = false;
  static constexpr bool ok = std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string> ||
                             std::is_same_v<T, const char*> || std::is_same_v<T, std::nullptr_t> ||
                             std::is_same_v<T, c10::Device> || std::is_same_v<T, c10::Scalar> ||
                             std::is_same_v<T, c10::TensorOptions>;
  template <class F>
  static void walk(T&, F&) {}
};
/// A tensor: saved for backward, and given back as the input the recompute differentiates.
template <>
struct ArgTraits<at::Tensor> {
  static constexpr bool ok = true, tensors = true, view = false;
  template <class F>
  static void walk(at::Tensor& t, F& f) { f(t); }
};
/// A module handle (torch::nn::Linear, a TORCH_MODULE of yours): its parameters are leaves, and get their
/// gradients through the recompute's backward as the parameters a closure captures do.
template <class T>
struct ArgTraits<T, std::enable_if_t<std::is_base_of_v<torch::nn::ModuleHolder<typename T::ContainedType>, T>>> {
  static constexpr bool ok = true, tensors = false, view = false;
  template <class F>
  static void walk(T&, F&) {}
};
/// An argument given as `by_value(x)`: copied as a value, its tensors (if any) not seen (see by_value).
template <class T>
struct ByValue {
  T value;
};
template <class T>
struct is_by_value : std::false_type {};
template <class T>
struct is_by_value<ByValue<T>> : std::true_type {};
template <class T>
struct ArgTraits<ByValue<T>> {
  static constexpr bool ok = true, tensors = false, view = false;
  template <class F>
  static void walk(ByValue<T>&, F&) {}
};
/// Views and pointers: what they refer to may be gone when backward runs; refused.
template <class T>
struct ViewTraits {
  static constexpr bool ok = false, tensors = false, view = true;
  template <class F>
  static void walk(T&, F&) {}
};
template <class T>
struct ArgTraits<c10::ArrayRef<T>> : ViewTraits<c10::ArrayRef<T>> {};
template <class T, size_t N>
struct ArgTraits<std::span<T, N>> : ViewTraits<std::span<T, N>> {};
template <class T>
struct ArgTraits<std::initializer_list<T>> : ViewTraits<std::initializer_list<T>> {};
template <class T>
struct ArgTraits<std::reference_wrapper<T>> : ViewTraits<std::reference_wrapper<T>> {};
template <class C, class Tr>
struct ArgTraits<std::basic_string_view<C, Tr>> : ViewTraits<std::basic_string_view<C, Tr>> {};
template <class T>
struct ArgTraits<T*, std::enable_if_t<!std::is_same_v<T*, const char*>>> : ViewTraits<T*> {};

/// Containers and wrappers: taken when their elements are, walked when these may hold tensors.
template <class T>
struct ArgTraits<std::optional<T>> {
  static constexpr bool ok = ArgTraits<T>::ok, tensors = ArgTraits<T>::tensors, view = ArgTraits<T>::view;
  template <class F>
  static void walk(std::optional<T>& o, F& f) {
    if (o) ArgTraits<T>::walk(*o, f);
  }
};
template <class... T>
struct ArgTraits<std::tuple<T...>> {
  static constexpr bool ok = (ArgTraits<T>::ok && ...), tensors = (ArgTraits<T>::tensors || ...),
                        view = (ArgTraits<T>::view || ...);
  template <class F>
  static void walk(std::tuple<T...>& t, F& f) {
    std::apply([&](auto&... e) { (ArgTraits<std::remove_cvref_t<decltype(e)>>::walk(e, f), ...); }, t);
  }
};
template <class A, class B>
struct ArgTraits<std::pair<A, B>> {
  static constexpr bool ok = ArgTraits<A>::ok && ArgTraits<B>::ok, tensors = ArgTraits<A>::tensors || ArgTraits<B>::tensors,
                        view = ArgTraits<A>::view || ArgTraits<B>::view;
  template <class F>
  static void walk(std::pair<A, B>& p, F& f) {
    ArgTraits<A>::walk(p.first, f);
    ArgTraits<B>::walk(p.second, f);
  }
};
/// A sequence (std::vector, std::array, std::deque, std::list): every element, in order.
template <class C, class E>
struct SequenceTraits {
  static constexpr bool ok = ArgTraits<E>::ok, tensors = ArgTraits<E>::tensors, view = ArgTraits<E>::view;
  template <class F>
  static void walk(C& c, F& f) {
    if constexpr (tensors)
      for (auto& e : c) ArgTraits<E>::walk(e, f);
  }
};
template <class T, class A>
struct ArgTraits<std::vector<T, A>> : SequenceTraits<std::vector<T, A>, T> {};
template <class T, size_t N>
struct ArgTraits<std::array<T, N>> : SequenceTraits<std::array<T, N>, T> {};
template <class T, class A>
struct ArgTraits<std::deque<T, A>> : SequenceTraits<std::deque<T, A>, T> {};
template <class T, class A>
struct ArgTraits<std::list<T, A>> : SequenceTraits<std::list<T, A>, T> {};
/// A map (std::map, std::unordered_map): every mapped value, in the map's order (a key cannot hold a tensor:
/// it is const inside the map).
template <class M, class K, class V>
struct MapTraits {
  static constexpr bool ok = ArgTraits<K>::ok && !ArgTraits<K>::tensors && ArgTraits<V>::ok,
                        tensors = ArgTraits<V>::tensors, view = ArgTraits<K>::view || ArgTraits<V>::view;
  template <class F>
  static void walk(M& m, F& f) {
    if constexpr (tensors)
      for (auto& [k, v] : m) ArgTraits<V>::walk(v, f);
  }
};
template <class K, class V, class C, class A>
struct ArgTraits<std::map<K, V, C, A>> : MapTraits<std::map<K, V, C, A>, K, V> {};
template <class K, class V, class H, class E, class A>
struct ArgTraits<std::unordered_map<K, V, H, E, A>> : MapTraits<std::unordered_map<K, V, H, E, A>, K, V> {};

/// Instantiated once per argument type, so that the compiler's "in instantiation of RecomputeArgument<T>" line
/// names the argument it refuses.
template <class T>
struct RecomputeArgument {
  static_assert(!ArgTraits<T>::view,
                "policytrain::memory::recompute: an argument is (or holds) a view or a pointer (c10::ArrayRef / "
                "at::TensorList, std::span, std::string_view, std::reference_wrapper, T*): what it refers to may be "
                "gone when backward recomputes, and tensors behind it would get no gradient; pass an owning value "
                "(std::vector<torch::Tensor>, std::string, the tensor itself)");
  static_assert(ArgTraits<T>::ok || ArgTraits<T>::view,
                "policytrain::memory::recompute: an argument is of a type recompute cannot see into (a struct or "
                "class of yours, std::variant, a smart pointer, c10::List...): a tensor inside it would be copied as a "
                "plain value and get no gradient (or be back-propagated twice); pass its tensors as arguments or in "
                "std::vector / std::array / std::tuple / std::pair / std::optional / std::map, or wrap it in "
                "policytrain::memory::by_value(x) if no tensor inside needs a gradient through the segment");
  static constexpr bool ok = true;
};

/// Calls `f(at::Tensor&)` on every tensor argument `a` holds, in a fixed order.
template <class A, class F>
void for_each_tensor(A& a, F&& f) {
  ArgTraits<std::remove_cvref_t<A>>::walk(a, f);
}

/// An argument's value as stored for the recompute: a copy whose tensors are empty (the saved inputs fill them
/// for each run, in for_each_tensor's order).
template <class A>
using stored_t = std::decay_t<A>;

}  // namespace detail

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
    throw std::invalid_argument(policytrain::detail::format(
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
