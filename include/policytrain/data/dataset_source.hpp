#pragma once
/// \file
/// data::detail::DatasetSource: a map-style dataset (`get(size_t)` returning a torch::data::Example<>, and `size()`)
/// as data::PrefetchLoader reads it; the dataset's size and sample 0's shapes are checked here. Part of
/// <policytrain/data/prefetch_loader.hpp>.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include <torch/data/example.h>
#include <torch/types.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::data::detail {

/// A dataset as PrefetchLoader reads it: `get`, and tensors of its length whose other sizes and dtypes are a
/// sample's (expanded views of sample 0: no memory per sample).
struct DatasetSource {
  std::function<torch::data::Example<>(size_t)> get;
  torch::Tensor x, y;
};
/// The dataset's size(), which a dataset of unknown size (an optional) must have.
template <class Dataset>
size_t dataset_size(const Dataset& d) {
  if constexpr (std::is_convertible_v<decltype(d.size()), size_t>) {
    return d.size();
  } else {
    const auto s = d.size();
    if (!s)
      throw std::invalid_argument(policytrain::detail::error_message("policytrain::data::PrefetchLoader",
                                                                     "the dataset's size() is unknown; expected a "
                                                                     "map-style dataset of known size"));
    return *s;
  }
}
/// The source of `d`: sample 0 read for the shapes (checked: an input and a target of one value).
template <class Dataset>
DatasetSource dataset_source(std::shared_ptr<Dataset> d) {
  const auto n = static_cast<int64_t>(dataset_size(*d));
  if (n < 1)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::data::PrefetchLoader", "the dataset is empty; expected at least one sample"));
  DatasetSource s;
  s.get = [d](size_t i) { return torch::data::Example<>(d->get(i)); };
  auto first = s.get(0);
  if (!first.data.defined() || !first.target.defined() || first.target.numel() != 1)
    throw std::invalid_argument(
        policytrain::detail::error_message("policytrain::data::PrefetchLoader",
                                           "sample 0 of the dataset has no input, or a target "
                                           "that is not one value; expected an input tensor and a scalar target"));
  auto xs = first.data.sizes().vec();
  xs.insert(xs.begin(), n);
  s.x = first.data.unsqueeze(0).expand(xs);
  s.y = first.target.reshape({1}).expand({n});
  return s;
}

}  // namespace policytrain::data::detail
