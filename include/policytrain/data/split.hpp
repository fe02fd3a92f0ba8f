#pragma once
/// \file
/// data::random_split and data::stratified_split: seeded hold-out splits of a data set; data::random_split draws
/// the samples uniformly, as Python's torch.utils.data.random_split, data::stratified_split keeps each class's
/// share.
///
/// data::stratified_split — a seeded hold-out split of a labelled data set that keeps each class's share: the
/// validation set that early stopping, plateau schedules and "best" checkpoints select on, so that the test set
/// is evaluated once, at the end, and selects nothing.
/// Class c of n_c samples (of N) gives floor(n_val * n_c / N) samples, and the samples still missing go one each
/// to the classes with the largest remainders (ties: the smaller label), so the validation set has exactly n_val
/// samples and every class is within one sample of its proportional share. Which samples: a permutation of each
/// class's indices drawn from a generator seeded with `seed` (the same seed, the same split, on every rank).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// A training part and a validation part of one data set, and the indices each took from it (ascending).
struct Split {
  /// The training part: images and labels.
  ///@{
  torch::Tensor train_x, train_y;
  ///@}
  /// The validation part: images and labels.
  ///@{
  torch::Tensor val_x, val_y;
  ///@}
  /// Indices into the original data set (int64, ascending, disjoint, together every index once).
  ///@{
  torch::Tensor train_index, val_index;
  ///@}
};

/// Holds out `n_val` samples of (x, y), stratified by the labels y (int64 [N], values >= 0); see the file comment.
/// Throws std::invalid_argument naming the value and what was expected.
inline Split stratified_split(const torch::Tensor& x, const torch::Tensor& y, int64_t n_val, uint64_t seed) {
  if (y.dim() != 1 || y.scalar_type() != torch::kLong)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::stratified_split",
        policytrain::detail::format("labels of shape {} and type {}; "
                                    "expected int64 of shape [N]",
                                    fmt::join(y.sizes(), "x"), c10::toString(y.scalar_type()))));
  const int64_t n = y.size(0);
  if (x.dim() < 1 || x.size(0) != n)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::stratified_split", policytrain::detail::format("{} images but {} labels; expected "
                                                                           "as many of each",
                                                                           x.dim() < 1 ? 0 : x.size(0), n)));
  if (n_val < 0 || n_val >= n)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::stratified_split", policytrain::detail::format("{} validation samples of {}; "
                                                                           "expected 0 <= n_val < {}",
                                                                           n_val, n, n)));
  const auto labels = y.contiguous();
  const int64_t* lab = labels.data_ptr<int64_t>();
  if (n > 0 && *std::min_element(lab, lab + n) < 0)
    throw std::invalid_argument(policytrain::detail::error_message("policytrain::data::stratified_split",
                                                                   "a label is negative; expected labels >= 0"));
  const int64_t classes = n > 0 ? *std::max_element(lab, lab + n) + 1 : 0;
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(classes));
  for (int64_t i = 0; i < n; ++i) members[static_cast<size_t>(lab[i])].push_back(i);

  // Quotas: floors of the proportional shares, then the largest remainders (exact integer arithmetic).
  std::vector<int64_t> quota(static_cast<size_t>(classes)), rem(static_cast<size_t>(classes));
  int64_t given = 0;
  for (size_t c = 0; c < members.size(); ++c) {
    const int64_t share = n_val * static_cast<int64_t>(members[c].size());
    quota[c] = share / n;
    rem[c] = share % n;
    given += quota[c];
  }
  std::vector<size_t> order(members.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
  for (size_t k = 0; given < n_val; ++k, ++given) ++quota[order[k]];

  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<uint8_t> in_val(static_cast<size_t>(n), 0);
  for (size_t c = 0; c < members.size(); ++c) {
    const auto m = static_cast<int64_t>(members[c].size());
    if (quota[c] == 0 || m == 0) continue;
    const auto perm = torch::randperm(m, gen, torch::kLong);
    const int64_t* p = perm.data_ptr<int64_t>();
    for (int64_t k = 0; k < quota[c]; ++k) in_val[static_cast<size_t>(members[c][static_cast<size_t>(p[k])])] = 1;
  }
  std::vector<int64_t> tr, va;
  tr.reserve(static_cast<size_t>(n - n_val));
  va.reserve(static_cast<size_t>(n_val));
  for (int64_t i = 0; i < n; ++i) (in_val[static_cast<size_t>(i)] ? va : tr).push_back(i);
  Split s;
  s.train_index = torch::tensor(tr, torch::kLong);
  s.val_index = torch::tensor(va, torch::kLong);
  s.train_x = x.index_select(0, s.train_index);
  s.train_y = y.index_select(0, s.train_index);
  s.val_x = x.index_select(0, s.val_index);
  s.val_y = y.index_select(0, s.val_index);
  return s;
}

/// Python's `torch.utils.data.random_split(range(n), lengths, generator=torch.Generator().manual_seed(seed))`: the
/// indices 0..n-1 permuted by torch::randperm from a CPU generator seeded with `seed`, cut into consecutive parts of
/// `lengths` (which sum to n). The same seed gives the same parts, on every rank and in Python (the same permutation:
/// the same generator and randperm). Each part is in the permutation's order, as Python's Subset holds it. Throws
/// std::invalid_argument when a length is negative or the lengths do not sum to n.
inline std::vector<torch::Tensor> random_split_indices(int64_t n, const std::vector<int64_t>& lengths, uint64_t seed) {
  int64_t total = 0;
  for (int64_t l : lengths) {
    if (l < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::data::random_split", policytrain::detail::format("a length is {}; expected "
                                                                         "lengths >= 0",
                                                                         l)));
    total += l;
  }
  if (total != n)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::random_split",
        policytrain::detail::format("the lengths ({}) sum to {}, "
                                    "but the data set has {} samples; expected them to sum to {}",
                                    fmt::join(lengths, ", "), total, n, n)));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto perm = torch::randperm(n, gen, torch::kLong);
  std::vector<torch::Tensor> parts;
  int64_t at = 0;
  for (int64_t l : lengths) {
    parts.push_back(perm.slice(0, at, at + l).clone());
    at += l;
  }
  return parts;
}

/// Holds out `n_val` samples of (x, y) drawn uniformly (not stratified): the sets Python's
/// `random_split(dataset, [N - n_val, n_val], generator=torch.Generator().manual_seed(seed))` gives, with the
/// indices of each part in ascending order (a loader reorders them anyway). The same seed, the same split, on every
/// rank. Throws std::invalid_argument naming the value and what was expected.
inline Split random_split(const torch::Tensor& x, const torch::Tensor& y, int64_t n_val, uint64_t seed) {
  const int64_t n = x.dim() < 1 ? 0 : x.size(0);
  if (x.dim() < 1 || y.dim() < 1 || y.size(0) != n)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::random_split", policytrain::detail::format("{} inputs but {} targets; "
                                                                       "expected as many of each",
                                                                       n, y.dim() < 1 ? 0 : y.size(0))));
  if (n_val < 0 || n_val >= n)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::random_split", policytrain::detail::format("{} validation samples of {}; "
                                                                       "expected 0 <= n_val < {}",
                                                                       n_val, n, n)));
  auto parts = random_split_indices(n, {n - n_val, n_val}, seed);
  Split s;
  s.train_index = std::get<0>(parts[0].sort());
  s.val_index = std::get<0>(parts[1].sort());
  s.train_x = x.index_select(0, s.train_index);
  s.train_y = y.index_select(0, s.train_index);
  s.val_x = x.index_select(0, s.val_index);
  s.val_y = y.index_select(0, s.val_index);
  return s;
}

}  // namespace policytrain::data
