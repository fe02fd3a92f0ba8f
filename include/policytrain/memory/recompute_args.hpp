#pragma once
/// \file
/// What memory::recompute takes as an argument, type by type (detail::ArgTraits): a tensor (saved, differentiated),
/// a module handle, a plain value, by_value(x), and the containers and wrappers that hold them (walked in a fixed
/// order); views and pointers are refused with a message naming the type. Part of <policytrain/memory/recompute.hpp>.
#include <array>
#include <cstddef>
#include <deque>
#include <functional>
#include <initializer_list>
#include <list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace policytrain::memory::detail {

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

}  // namespace policytrain::memory::detail
