#pragma once
/// \file
/// StateDict: the state of a policy (or of the Trainer's counters) as named tensors, scalars as 0-dim tensors.
/// Every stateful policy has `StateDict state_dict() const` and `void load_state_dict(const StateDict&)`;
/// a checkpoint is the union of them (each under its policy's prefix) plus model, optimizer and RNG.
#include <map>
#include <stdexcept>
#include <string>

#include <torch/types.h>

#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain {

/// Named tensors: the state of one policy, or of a whole Trainer (each policy under its name's prefix).
using StateDict = std::map<std::string, torch::Tensor>;

/// Scalars in and out of a StateDict (stored as 0-dim double or int64 tensors, on the CPU).
inline torch::Tensor scalar_tensor(double v) { return torch::tensor(v, torch::kDouble); }
/// A scalar as a 0-dim tensor for a StateDict (see the overload for double).
inline torch::Tensor scalar_tensor(int64_t v) { return torch::tensor(v, torch::kLong); }
/// A scalar as a 0-dim tensor for a StateDict (see the overload for double).
inline torch::Tensor scalar_tensor(bool v) { return torch::tensor(static_cast<int64_t>(v), torch::kLong); }

/// The entry `key` of `d`; throws std::invalid_argument naming the key when it is missing.
POLICYTRAIN_DECL const torch::Tensor& state_at(const StateDict& d, const std::string& key)
#if POLICYTRAIN_DEFINE
{
  auto it = d.find(key);
  if (it == d.end())
    throw std::invalid_argument(detail::error_message("policytrain", detail::format("state has no entry '{}'", key)));
  return it->second;
}
#else
;
#endif
/// The scalar entry `key` of `d` as a double; throws std::invalid_argument naming a missing key.
inline double state_double(const StateDict& d, const std::string& key) { return state_at(d, key).item<double>(); }
/// The scalar entry `key` of `d` as an int64; throws std::invalid_argument naming a missing key.
inline int64_t state_int(const StateDict& d, const std::string& key) { return state_at(d, key).item<int64_t>(); }

/// Entries of `d` whose key starts with `prefix`, with the prefix removed.
POLICYTRAIN_DECL StateDict sub_state(const StateDict& d, const std::string& prefix)
#if POLICYTRAIN_DEFINE
{
  StateDict out;
  for (auto it = d.lower_bound(prefix); it != d.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    out.emplace(it->first.substr(prefix.size()), it->second);
  return out;
}
#else
;
#endif

/// A policy with `state_dict()` and `load_state_dict(d)`: the Trainer saves and restores its state.
template <class P>
concept Stateful = requires(P& p, const P& cp, const StateDict& d) {
  { cp.state_dict() } -> std::convertible_to<StateDict>;
  p.load_state_dict(d);
};

}  // namespace policytrain
