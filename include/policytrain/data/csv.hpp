#pragma once
/// \file
/// data::read_csv: a numeric CSV table (a header line, then rows of numbers, read as pandas.read_csv reads them;
/// data/csv_format.hpp says what is read and what is an error) as tensors, with the columns picked by name: the inputs
/// and the targets of a tabular task.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/types.h>

#include <policytrain/data/csv_format.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// A numeric table in a tensor: the header's names and the values, [rows, columns].
struct CsvTable {
  std::vector<std::string> names;  ///< the header's column names, in order
  torch::Tensor values;            ///< [rows, columns], of the dtype read_csv was given

  /// The columns named, in the order given: [rows, names.size()]. Throws CsvError naming a missing column and the
  /// columns there are.
  torch::Tensor columns(const std::vector<std::string>& wanted) const {
    std::vector<int64_t> idx;
    for (const auto& w : wanted) {
      int64_t found = -1;
      for (size_t c = 0; c < names.size(); ++c)
        if (names[c] == w) found = static_cast<int64_t>(c);
      if (found < 0)
        throw CsvError(policytrain::detail::error_message(
            "policytrain::data::CsvTable::columns",
            policytrain::detail::format("no column '{}'; the table has: {}", w, fmt::join(names, ", "))));
      idx.push_back(found);
    }
    return values.index_select(1, torch::tensor(idx, torch::kLong));
  }
  /// Every column but those named: [rows, columns - names.size()] (the inputs beside the target columns).
  torch::Tensor columns_except(const std::vector<std::string>& dropped) const {
    (void)columns(dropped);  // each named column exists
    std::vector<std::string> kept;
    for (const auto& n : names)
      if (std::find(dropped.begin(), dropped.end(), n) == dropped.end()) kept.push_back(n);
    return columns(kept);
  }
};

/// Reads a numeric CSV file into a CsvTable of `dtype` (float32 by default), as `options` say (data/csv_format.hpp):
/// the values pandas.read_csv(file) reads, each rounded to `dtype` as `torch.tensor(df.values, dtype=...)` does.
/// Throws CsvError naming the file, the line, the row and the column of a malformed value.
inline CsvTable read_csv(const std::string& file, const CsvOptions& options, torch::Dtype dtype = torch::kFloat32) {
  // A finite double past the dtype's range rounds to an infinity (as torch.tensor(df.values, dtype=...) does);
  // without non_finite, that is refused as an infinity in the file is. c10's conversions, as .to(dtype)'s.
  detail::Narrowing narrowing;
  if (dtype == torch::kFloat32) {
    narrowing = {[](double v) { return static_cast<double>(static_cast<float>(v)); }, "float32"};
  } else if (dtype == torch::kFloat16) {
    narrowing = {[](double v) { return static_cast<double>(c10::Half(static_cast<float>(v))); }, "float16"};
  } else if (dtype == torch::kBFloat16) {
    narrowing = {[](double v) { return static_cast<double>(c10::BFloat16(static_cast<float>(v))); }, "bfloat16"};
  }
  CsvData d = read_csv_data(file, options, narrowing);
  CsvTable t;
  t.names = std::move(d.names);
  t.values = torch::tensor(d.values, torch::kFloat64).view({d.rows, static_cast<int64_t>(t.names.size())}).to(dtype);
  return t;
}

/// read_csv with the default options (a header line, no missing or infinite value) but the delimiter.
inline CsvTable read_csv(const std::string& file, torch::Dtype dtype = torch::kFloat32, char delim = ',') {
  return read_csv(file, CsvOptions{.delimiter = delim}, dtype);
}

}  // namespace policytrain::data
