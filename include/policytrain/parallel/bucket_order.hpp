#pragma once
/// \file
/// The gradient buckets' order as a checkpoint keeps it, and as c10d's Reducer computes it from a backward
/// (parallel::detail::ReducerSync: the saved order a resume builds its Reducer with, and the order a resumed static
/// graph learns). On 3 or more ranks Gloo's ring all-reduce adds a bucket element's terms in an order that depends
/// on the element's place in its bucket, so a resumed run is bit-identical to the uninterrupted one only when each
/// step all-reduces the same buckets.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/types.h>

namespace policytrain::parallel::detail {

/// The Reducer's buckets as [2, n]: each parameter's index in `params` and its bucket, in the order the buckets
/// hold them; undefined when they do not hold exactly `params`.
inline torch::Tensor encode_bucket_order(c10d::Reducer& reducer, const std::vector<torch::Tensor>& params) {
  std::unordered_map<const c10::TensorImpl*, int64_t> index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].unsafeGetTensorImpl()] = static_cast<int64_t>(i);
  std::vector<int64_t> param, bucket;
  int64_t b = 0;
  for (const auto& gb : reducer.get_grad_buckets(/*return_zero_tensors=*/true)) {
    for (const auto& p : gb.getParameters()) {
      auto it = index.find(p.unsafeGetTensorImpl());
      if (it == index.end()) return {};
      param.push_back(it->second);
      bucket.push_back(b);
    }
    ++b;
  }
  if (param.size() != params.size()) return {};
  return torch::stack({torch::tensor(param, torch::kLong), torch::tensor(bucket, torch::kLong)});
}

/// Bucket indices (each bucket's parameter indices, in order) in encode_bucket_order's form.
inline torch::Tensor encode_bucket_indices(const std::vector<std::vector<size_t>>& buckets) {
  std::vector<int64_t> param, bucket;
  for (size_t b = 0; b < buckets.size(); ++b)
    for (size_t i : buckets[b]) {
      param.push_back(static_cast<int64_t>(i));
      bucket.push_back(static_cast<int64_t>(b));
    }
  return torch::stack({torch::tensor(param, torch::kLong), torch::tensor(bucket, torch::kLong)});
}

/// The bucket indices an encode_bucket_order tensor describes, when it is a complete order of `n` parameters
/// (each once, no empty bucket); otherwise none (a fresh start keeps the initial order).
inline std::optional<std::vector<std::vector<size_t>>> decode_bucket_order(const torch::Tensor& order, size_t n) {
  const auto len = static_cast<int64_t>(n);
  if (!order.defined() || order.dim() != 2 || order.size(0) != 2 || order.size(1) != len) return std::nullopt;
  auto param = order[0].to(torch::kLong).contiguous(), bucket = order[1].to(torch::kLong).contiguous();
  const int64_t* pi = param.data_ptr<int64_t>();
  const int64_t* bi = bucket.data_ptr<int64_t>();
  std::vector<bool> seen(n, false);
  std::vector<std::vector<size_t>> indices;
  for (int64_t k = 0; k < len; ++k) {
    if (pi[k] < 0 || pi[k] >= len || seen[static_cast<size_t>(pi[k])] || bi[k] < 0) return std::nullopt;
    seen[static_cast<size_t>(pi[k])] = true;
    if (bi[k] >= static_cast<int64_t>(indices.size())) indices.resize(static_cast<size_t>(bi[k]) + 1);
    indices[static_cast<size_t>(bi[k])].push_back(static_cast<size_t>(pi[k]));
  }
  for (const auto& b : indices)
    if (b.empty()) return std::nullopt;
  return indices;
}

/// The buckets c10d's Reducer::rebuild_buckets computes from a backward: the parameters in the order their
/// gradients came (`ready`), then those that got none, in index order (its finalize appends the unused ones),
/// assigned by compute_bucket_assignment_by_size with the first bucket's cap and the others' (`first`, `cap`,
/// bytes), the order reversed around it under DDP_SET_LAST_BUCKET_CAP=1, as there.
inline std::vector<std::vector<size_t>> buckets_in_ready_order(const std::vector<torch::Tensor>& params,
                                                               const std::vector<size_t>& ready,
                                                               const std::vector<bool>& sparse, size_t first,
                                                               size_t cap) {
  const size_t n = params.size();
  std::vector<char> seen(n, 0);
  std::vector<at::Tensor> tensors;
  std::vector<int64_t> indices;
  const auto take = [&](size_t i) {
    seen[i] = 1;
    tensors.push_back(params[i]);
    indices.push_back(static_cast<int64_t>(i));
  };
  for (size_t i : ready)
    if (i < n && !seen[i]) take(i);
  for (size_t i = 0; i < n; ++i)
    if (!seen[i]) take(i);
  const char* last_small = std::getenv("DDP_SET_LAST_BUCKET_CAP");
  const bool reverse = last_small && std::string_view(last_small) == "1";
  if (reverse) {
    std::reverse(tensors.begin(), tensors.end());
    std::reverse(indices.begin(), indices.end());
  }
  auto buckets = std::get<0>(c10d::compute_bucket_assignment_by_size(tensors, {first, cap}, sparse, indices));
  if (reverse) std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

}  // namespace policytrain::parallel::detail
