#pragma once
/// \file
/// The Trainer's state plumbing: its counters under "trainer/", and each stateful policy's state_dict() under
/// "<policy name>/" (a checkpoint's trainer state, Trainer::state_dict and load_state_dict).
/// Part of the Trainer (docs/trainer.md, "File map"); include <policytrain/trainer.hpp>.
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include <policytrain/core/category.hpp>
#include <policytrain/core/state.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>

namespace policytrain::detail {

/// The Trainer's counters, each under "trainer/".
POLICYTRAIN_DECL StateDict counters_state_dict(const TrainState& s)
#if POLICYTRAIN_DEFINE
{
  return {{"trainer/epoch", scalar_tensor(s.epoch)},
          {"trainer/global_step", scalar_tensor(s.global_step)},
          {"trainer/skipped_steps", scalar_tensor(s.skipped_steps)},
          {"trainer/batch_in_epoch", scalar_tensor(s.batch_in_epoch)},
          {"trainer/samples_seen", scalar_tensor(s.samples_seen)},
          {"trainer/best_metric", scalar_tensor(s.best_metric)},
          {"trainer/best_epoch", scalar_tensor(s.best_epoch)},
          {"trainer/best_step", scalar_tensor(s.best_step)},
          {"trainer/tokens_seen", scalar_tensor(s.tokens_seen)}};
}
#else
;
#endif

/// Restores what counters_state_dict wrote; throws std::invalid_argument naming a missing entry.
POLICYTRAIN_DECL void load_counters(const StateDict& d, TrainState& s)
#if POLICYTRAIN_DEFINE
{
  s.epoch = state_int(d, "trainer/epoch");
  s.global_step = state_int(d, "trainer/global_step");
  s.skipped_steps = state_int(d, "trainer/skipped_steps");
  s.batch_in_epoch = state_int(d, "trainer/batch_in_epoch");
  s.samples_seen = state_int(d, "trainer/samples_seen");
  s.best_metric = state_double(d, "trainer/best_metric");
  s.best_epoch = state_int(d, "trainer/best_epoch");
  // Added with training by steps: a state written before has none (checkpoint::read_payload lets it be absent).
  const auto it = d.find("trainer/best_step");
  s.best_step = it != d.end() ? it->second.item<int64_t>() : -1;
  // Added with tokens as the unit: a state written before has none.
  const auto tokens = d.find("trainer/tokens_seen");
  s.tokens_seen = tokens != d.end() ? tokens->second.item<int64_t>() : 0;
}
#else
;
#endif

/// "<name>/", the prefix of a stateful policy's entries.
POLICYTRAIN_DECL std::string state_prefix(std::string_view name)
#if POLICYTRAIN_DEFINE
{
  // Built in place: `std::string(name) + "/"` made GCC 12 warn at -O1 (-Warray-bounds, a false positive in its
  // inlined concatenation) in files that instantiate a Trainer with a stateful policy.
  std::string prefix;
  prefix.reserve(name.size() + 1);
  prefix.append(name.data(), name.size());
  prefix.push_back('/');
  return prefix;
}
#else
;
#endif

/// Adds the entries of `part` (the state_dict() of the policy named `name`) to `d`, under "<name>/". Not a
/// template: compiled once with separate compilation, whatever the policies.
POLICYTRAIN_DECL void add_policy_state(StateDict& d, std::string_view name, const StateDict& part)
#if POLICYTRAIN_DEFINE
{
  const std::string prefix = state_prefix(name);
  for (auto& [k, v] : part) {
    // Appended in place: `prefix + k` made GCC 12 warn (-Warray-bounds, a false positive in its inlined
    // std::string concatenation) in every file that instantiates a Trainer.
    std::string key;
    key.reserve(prefix.size() + k.size());
    key.append(prefix).append(k);
    d.emplace(std::move(key), v);
  }
}
#else
;
#endif

/// The entries of `d` under "<name>/", the prefix removed (the state of the policy named `name`).
POLICYTRAIN_DECL StateDict policy_state(const StateDict& d, std::string_view name)
#if POLICYTRAIN_DEFINE
{
  return sub_state(d, state_prefix(name));
}
#else
;
#endif

/// Adds each stateful policy's state_dict() to `d`, under its prefix.
template <class Tuple>
void add_policies_state(StateDict& d, const Tuple& policies) {
  std::apply([&](const auto&... p) {
    ([&]<class P>(const P& q) {
      if constexpr (Stateful<P>) add_policy_state(d, policy_name<P>(), q.state_dict());
    }(p), ...);
  }, policies);
}

/// Gives each stateful policy its entries of `d`, the prefix removed.
template <class Tuple>
void load_policies_state(const StateDict& d, Tuple& policies) {
  std::apply([&](auto&... p) {
    ([&]<class P>(P& q) {
      if constexpr (Stateful<P>) q.load_state_dict(policy_state(d, policy_name<P>()));
    }(p), ...);
  }, policies);
}

}  // namespace policytrain::detail
