#pragma once
/// \file
/// The CSV reader's torch-free layer (data::parse_csv; data/csv.hpp makes tensors of it): a numeric table with a
/// header line. Fields are separated by the delimiter (',' by default), surrounding spaces and tabs are ignored, a
/// line may end in "\r\n", a last line may lack its newline, and empty lines are skipped. Every field of every row
/// must be a finite number (std::from_chars: decimal or scientific); anything else is a CsvError that names the file,
/// the row and the column: an empty field (a missing value), a row with more or fewer fields than the header (a
/// ragged row), text or "nan"/"inf" in a column, an empty file, a header without rows. Quoted fields are not read
/// (a numeric table has none): a quote is text in a numeric column. Fuzzed: fuzz/fuzz_csv.cpp.
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// A malformed CSV file: the message names the file, and the row (1-based, the header not counted) and the column
/// (1-based, with its header name) where one applies.
class CsvError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A numeric table: the header's column names, and the values row by row (rows * names.size() of them).
struct CsvData {
  std::vector<std::string> names;  ///< the header's fields, in order
  std::vector<double> values;      ///< row-major
  int64_t rows = 0;                ///< data rows (the header not counted)
};

namespace detail {
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
/// Splits one line at `delim` (the fields trimmed).
inline std::vector<std::string_view> split_fields(std::string_view line, char delim) {
  std::vector<std::string_view> f;
  size_t at = 0;
  while (true) {
    const size_t next = line.find(delim, at);
    f.push_back(trim(line.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at)));
    if (next == std::string_view::npos) break;
    at = next + 1;
  }
  return f;
}
/// A short, printable form of a field for a message.
inline std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > 40 ? out + "..." : out;
}
}  // namespace detail

/// Parses CSV text (`file` names it in messages); see the file's description. Throws CsvError.
inline CsvData parse_csv(std::string_view text, const std::string& file, char delim = ',') {
  CsvData d;
  auto fail = [&](const std::string& what) {
    throw CsvError(policytrain::detail::error_message("policytrain::data::read_csv", file + ": " + what));
  };
  size_t at = 0;
  int64_t line_no = 0;
  bool have_header = false;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    const std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    at = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (detail::trim(line).empty()) continue;
    auto fields = detail::split_fields(line, delim);
    if (!have_header) {
      for (size_t c = 0; c < fields.size(); ++c) {
        if (fields[c].empty())
          fail(policytrain::detail::format("header (line {}), column {}: the column has no name; expected a name for "
                                           "every column", line_no, c + 1));
        d.names.emplace_back(fields[c]);
      }
      have_header = true;
      continue;
    }
    const int64_t row = d.rows + 1;
    if (fields.size() != d.names.size())
      fail(policytrain::detail::format("row {} (line {}): {} fields, but the header has {} columns; expected {} fields "
                                       "in every row", row, line_no, fields.size(), d.names.size(), d.names.size()));
    for (size_t c = 0; c < fields.size(); ++c) {
      const std::string_view f = fields[c];
      auto where = [&] {
        return policytrain::detail::format("row {} (line {}), column {} ('{}')", row, line_no, c + 1,
                                           detail::shown(d.names[c]));
      };
      if (f.empty()) fail(where() + ": the value is missing; expected a number");
      double v = 0;
      const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
      if (ec == std::errc::result_out_of_range)
        fail(where() + ": '" + detail::shown(f) + "' is out of the range of a double; expected a finite number");
      if (ec != std::errc{} || end != f.data() + f.size())
        fail(where() + ": '" + detail::shown(f) + "' is not a number; expected a number");
      if (!std::isfinite(v)) fail(where() + ": '" + detail::shown(f) + "' is not finite; expected a finite number");
      d.values.push_back(v);
    }
    ++d.rows;
  }
  if (!have_header) fail("the file is empty; expected a header line and rows of numbers");
  if (d.rows == 0) fail("the header has no rows below it; expected at least one row of numbers");
  return d;
}

/// Reads and parses a CSV file; see the file's description. Throws CsvError naming the file.
inline CsvData read_csv_data(const std::string& file, char delim = ',') {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw CsvError(policytrain::detail::error_message("policytrain::data::read_csv", file + ": cannot be opened",
                                                      "a readable CSV file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_csv(ss.str(), file, delim);
}

}  // namespace policytrain::data
