#pragma once
/// \file
/// data::check_exact_resume — checks a loader of one's own against what the Trainer's exact resume needs
/// (docs/your-data.md, "A loader of your own: what exact resume needs"): a batch is a function of the loader's
/// settings, the epoch and its index alone. Over `epochs` epochs of at most `batches` batches it compares a full
/// pass of a fresh loader with (1) a second fresh loader's, (2) a loader that read the epochs in reverse order, and (3) a
/// loader resumed at batch k, for every k up to `batches` (begin_at(k) when the loader has it, else the iterator
/// advanced k times without dereferencing, as the Trainer does). Returns the first difference, named, or an empty
/// failure. Header-only; a test helper, not used by the Trainer.
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// How much of a loader check_exact_resume reads.
struct ResumeCheckOptions {
  int64_t epochs = 2;   ///< epochs compared (0 to epochs - 1)
  int64_t batches = 6;  ///< batches of each epoch at most
};

/// What check_exact_resume found.
struct ResumeCheckResult {
  std::string failure;          ///< the first difference, named ("": none)
  int64_t batches_compared = 0;  ///< batches compared with the full pass's
  /// Whether the loader passed.
  bool ok() const { return failure.empty(); }
};

namespace detail {
template <class Item>
Batch as_batch(Item&& item) {
  if constexpr (std::is_convertible_v<Item, Batch>) return Batch(std::forward<Item>(item));
  else return Batch{item.data, item.target};  // a stacked torch::data::Example
}

template <class Loader>
void select_epoch(Loader& l, int64_t e) {
  if constexpr (requires { l.set_epoch(e); }) l.set_epoch(e);
}

/// Batches k to `limit` - 1 of epoch `e` of `l`, started at batch k as the Trainer resumes an epoch.
template <class Loader>
std::vector<Batch> read_from(Loader& l, int64_t e, int64_t k, int64_t limit) {
  select_epoch(l, e);
  constexpr bool skips = requires { { l.begin_at(int64_t{}) } -> std::same_as<decltype(std::begin(l))>; };
  auto it = [&] {
    if constexpr (skips) {
      if (k > 0) return l.begin_at(k);
    }
    return std::begin(l);
  }();
  const auto end = std::end(l);
  if constexpr (!skips)
    for (int64_t i = 0; i < k && it != end; ++i) ++it;
  std::vector<Batch> out;
  for (int64_t i = k; i < limit && it != end; ++i, ++it) out.push_back(as_batch(*it));
  return out;
}

inline std::string batch_difference(const Batch& a, const Batch& b) {
  auto one = [](const char* name, const torch::Tensor& p, const torch::Tensor& q) -> std::string {
    if (p.defined() != q.defined()) return policytrain::detail::format("{} is defined in one and not the other", name);
    if (!p.defined()) return {};
    if (p.sizes() != q.sizes() || p.scalar_type() != q.scalar_type() || !torch::equal(p, q))
      return policytrain::detail::format("its {} differ", name);
    return {};
  };
  std::string d = one("inputs", a.x, b.x);
  return d.empty() ? one("targets", a.y, b.y) : d;
}
}  // namespace detail

/// Checks that `make()` (a fresh loader, as a resumed run builds it) yields batches that depend only on its
/// settings, the epoch and the index; see the file comment.
template <class MakeLoader>
ResumeCheckResult check_exact_resume(MakeLoader&& make, ResumeCheckOptions o = {}) {
  ResumeCheckResult r;
  auto fail = [&](int64_t e, int64_t i, const std::string& how, const std::string& what) {
    r.failure = policytrain::detail::format(
        "batch {} of epoch {} {} differs from the same batch of a fresh loader's full pass ({}); a resumed run would "
        "train on other data: build each batch from (settings, epoch, index) alone, on dereference "
        "(docs/your-data.md, \"A loader of your own: what exact resume needs\")",
        i, e, how, what);
    return r;
  };
  std::vector<std::vector<Batch>> ref;
  {
    auto a = make();
    for (int64_t e = 0; e < o.epochs; ++e) ref.push_back(detail::read_from(a, e, 0, o.batches));
  }
  auto compare = [&](const std::vector<Batch>& got, int64_t e, int64_t k, const std::string& how) -> bool {
    const auto& want = ref[static_cast<size_t>(e)];
    if (got.size() + static_cast<size_t>(k) != want.size()) {
      fail(e, k, how, policytrain::detail::format("{} batches from there, {} in the full pass", got.size(),
                                                  want.size() - std::min(want.size(), static_cast<size_t>(k))));
      return false;
    }
    for (size_t i = 0; i < got.size(); ++i) {
      ++r.batches_compared;
      if (const auto d = detail::batch_difference(got[i], want[i + static_cast<size_t>(k)]); !d.empty()) {
        fail(e, static_cast<int64_t>(i) + k, how, d);
        return false;
      }
    }
    return true;
  };
  {  // another fresh loader
    auto b = make();
    for (int64_t e = 0; e < o.epochs; ++e)
      if (!compare(detail::read_from(b, e, 0, o.batches), e, 0, "of a second fresh loader")) return r;
  }
  if (o.epochs > 1) {  // the epochs in reverse order: nothing carried over from one pass to the next
    auto c = make();
    for (int64_t e = o.epochs - 1; e >= 0; --e)
      if (!compare(detail::read_from(c, e, 0, o.batches), e, 0, "of a loader that read the epochs in reverse order"))
        return r;
  }
  for (int64_t e = 0; e < o.epochs; ++e)
    for (int64_t k = 1; k < static_cast<int64_t>(ref[static_cast<size_t>(e)].size()); ++k) {
      auto d = make();
      if (!compare(detail::read_from(d, e, k, o.batches), e, k,
                   policytrain::detail::format("of a loader resumed at batch {}", k)))
        return r;
    }
  return r;
}

}  // namespace policytrain::data
