#pragma once
/// \file
/// How a policy learns that the model recomputes activations (memory::recompute), for a combination that cannot
/// work with it (parallel::DataParallel's find_unused_parameters without static_graph): a module class that
/// recomputes its forward derives from RecomputedModule (memory::Recomputed does), found in the module tree at
/// fit begin; every recomputed segment (a recompute() call with grad on) counts on its thread, seen after the
/// forward that made it. Light on purpose (no LibTorch header), so that any policy may include it.
/// Cost: one thread-local increment per recomputed segment.
#include <cstdint>

namespace policytrain::memory {

/// Base of module classes whose forward runs under recompute (memory::RecomputedImpl<M>); a policy finds them
/// with `dynamic_cast<const RecomputedModule*>(&module)`.
struct RecomputedModule {
  virtual ~RecomputedModule() = default;
};

namespace detail {
inline uint64_t& segments_on_thread() {
  thread_local uint64_t n = 0;
  return n;
}
}  // namespace detail

/// Recomputed segments recorded on this thread so far (recompute() calls that kept inputs for backward).
inline uint64_t recompute_segments() { return detail::segments_on_thread(); }

}  // namespace policytrain::memory
