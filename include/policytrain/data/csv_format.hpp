#pragma once
/// \file
/// The CSV reader's torch-free layer (data::parse_csv; data/csv.hpp makes tensors of it): a numeric table, read as
/// pandas.read_csv reads it with its defaults, or refused. Records and fields are pandas' (its C tokenizer, quoting
/// on): fields are separated by the delimiter (',' by default); a field whose first character is '"' is quoted: it may
/// hold delimiters, line breaks and doubled quotes ("" is one "), and what follows its closing quote up to the
/// delimiter is appended to it; a quote elsewhere is an ordinary character. Lines end in LF, CR LF or CR; a last line
/// may lack its end; lines of spaces and tabs only are skipped; a UTF-8 byte order mark starting the file is not part
/// of it. The first line names the columns (CsvOptions::header), without the spaces and tabs around each name. A value
/// is what pandas reads as a float: a decimal or scientific number, correctly rounded to the nearest double (as pandas
/// 3.1's parser, and std::from_chars), optionally signed and surrounded by white space; with CsvOptions::non_finite,
/// pandas' missing-value spellings (an empty field, "NaN", "NA", "null", ...: kMissingSpellings) are NaN and its
/// infinities ("inf", "-Infinity", any case; a number beyond the range of a double) are +-inf. Everything else is a
/// CsvError that names the file, the line, the row and the column: text in a column (pandas would make it a column of
/// text), a missing or non-finite value without non_finite (or a number that the tensor's dtype rounds to an infinity:
/// Narrowing), a row with more or fewer fields than the header (pandas fills or shifts it), a quote not closed, a
/// column without a name or with another's name (pandas would rename it), a name that is not UTF-8 (pandas refuses the
/// file), an empty file, a header without rows. docs/your-data.md, "Departures from the reference", lists where a file
/// read differs from pandas; tests/differential/csv.py compares the two on generated files. Fuzzed: fuzz/fuzz_csv.cpp.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// A malformed CSV file: the message names the file, and the line (1-based, where the field starts), the row
/// (1-based, the header not counted) and the column (1-based, with its header name) where one applies.
class CsvError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// How a CSV file is read. The defaults read as pandas.read_csv(file) does, but refuse a missing or infinite value.
struct CsvOptions {
  char delimiter = ',';     ///< pandas' `sep` (one character; not '"' or a line break)
  bool header = true;       ///< the first line names the columns (pandas' header=0); false: every line is a row and
                            ///< the columns are named "0", "1", ... (pandas' header=None)
  bool non_finite = false;  ///< read pandas' missing values as NaN and its infinities as +-inf; false: an error each
};

/// A numeric table: the column names, and the values row by row (rows * names.size() of them).
struct CsvData {
  std::vector<std::string> names;  ///< the header's fields, in order ("0", "1", ... without a header)
  std::vector<double> values;      ///< row-major
  int64_t rows = 0;                ///< data rows (the header not counted)
};

/// pandas' default missing-value spellings (pandas._libs.parsers.STR_NA_VALUES), matched exactly: " NA" is text.
inline constexpr std::array<std::string_view, 19> kMissingSpellings = {
    "",     "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A",  "NA",       "NULL", "NaN",    "None",     "n/a",  "nan",  "null"};

namespace detail {
inline bool is_blank(char c) { return c == ' ' || c == '\t'; }
/// C's isspace in the "C" locale: what pandas' number parser skips around a number.
inline bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
/// A character of a line that pandas skips as blank: a space or a tab, unless it is the delimiter.
inline bool is_blank_line_char(char c, char delim) { return is_blank(c) && c != delim; }
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}
inline bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto low = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
           return low(x) == low(y);
         });
}
/// Whether `s` is UTF-8 as Python's strict codec (pandas' default encoding) reads it: no overlong form, no surrogate,
/// nothing past U+10FFFF.
inline bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;                    // continuation bytes
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the first of them
    if (c < 0x80) n = 0;
    else if (c >= 0xC2 && c <= 0xDF) n = 1;
    else if (c == 0xE0) n = 2, lo = 0xA0;
    else if (c == 0xED) n = 2, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) n = 2;
    else if (c == 0xF0) n = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 3;
    else if (c == 0xF4) n = 3, hi = 0x8F;
    else return false;
    if (s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return false;
    }
    i += n + 1;
  }
  return true;
}
/// A short, printable form of a field for a message.
inline std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > 40 ? out + "..." : out;
}

/// What a field holds, read as pandas reads a float.
enum class Cell { number, missing, infinite, out_of_range, text };

/// The dtype the values become (data/csv.hpp): `round` gives a double as that dtype rounds it, `name` names it. A
/// finite number it rounds to an infinity is refused as out of its range without CsvOptions::non_finite. None: double.
struct Narrowing {
  double (*round)(double) = nullptr;
  const char* name = "";
};

/// Reads one field (quotes already removed) as pandas' C parser does: a missing-value spelling exactly, an infinity
/// spelling in any case, else a number with white space around it allowed. A number beyond the range of a double is
/// +-inf (out_of_range); one too small for a subnormal is +-0, as in pandas.
inline Cell read_cell(std::string_view f, double& v) {
  for (auto m : kMissingSpellings)
    if (f == m) {
      v = std::numeric_limits<double>::quiet_NaN();
      return Cell::missing;
    }
  for (std::string_view inf : {"inf", "+inf", "infinity", "+infinity"})
    if (iequals(f, inf)) {
      v = std::numeric_limits<double>::infinity();
      return Cell::infinite;
    }
  for (std::string_view inf : {"-inf", "-infinity"})
    if (iequals(f, inf)) {
      v = -std::numeric_limits<double>::infinity();
      return Cell::infinite;
    }
  while (!f.empty() && is_space(f.front())) f.remove_prefix(1);
  while (!f.empty() && is_space(f.back())) f.remove_suffix(1);
  std::string_view s = f;
  const bool negative = !s.empty() && s.front() == '-';
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) s.remove_prefix(1);
  // from_chars takes no '+' and reads "inf" and "nan(...)", which pandas reads as text: a digit or '.' comes first.
  if (s.empty() || !((s.front() >= '0' && s.front() <= '9') || s.front() == '.')) return Cell::text;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (end != s.data() + s.size()) return Cell::text;
  if (ec == std::errc::result_out_of_range) {
    // Too large or too small: the decimal exponent of the first significant digit says which.
    int64_t digits_before_point = 0, zeros_after_point = 0;
    size_t i = 0;
    while (i < s.size() && s[i] == '0') ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) ++digits_before_point;
    if (digits_before_point == 0 && i < s.size() && s[i] == '.') {
      for (++i; i < s.size() && s[i] == '0'; ++i) ++zeros_after_point;
    }
    const size_t e = s.find_first_of("eE");
    int64_t exponent = 0;
    if (e != std::string_view::npos) {
      size_t j = e + 1;
      const bool neg_exp = j < s.size() && s[j] == '-';
      if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
      for (; j < s.size(); ++j) exponent = std::min<int64_t>(exponent * 10 + (s[j] - '0'), int64_t{1} << 40);
      if (neg_exp) exponent = -exponent;
    }
    const int64_t magnitude = (digits_before_point > 0 ? digits_before_point : -zeros_after_point) + exponent;
    if (magnitude <= 0) {
      v = negative ? -0.0 : 0.0;
      return Cell::number;
    }
    v = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return Cell::out_of_range;
  }
  if (ec != std::errc{}) return Cell::text;
  if (negative) v = -v;
  return Cell::number;
}
}  // namespace detail

/// Parses CSV text (`file` names it in messages) as `options` say; see the file's description. Throws CsvError.
inline CsvData parse_csv(std::string_view text, const std::string& file, const CsvOptions& options = {},
                         const detail::Narrowing& narrowing = {}) {
  const char delim = options.delimiter;
  auto fail = [&](const std::string& what, std::string_view expected = {}) {
    throw CsvError(policytrain::detail::error_message("policytrain::data::read_csv", file + ": " + what, expected));
  };
  if (delim == '"' || delim == '\n' || delim == '\r')
    throw CsvError(policytrain::detail::error_message(
        "policytrain::data::read_csv",
        policytrain::detail::format("the delimiter is character {}", static_cast<int>(delim)),
        "a delimiter other than '\"', '\\n' and '\\r'"));
  CsvData d;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // pandas leaves a UTF-8 BOM out too
  std::vector<std::string> fields;   // one record's fields, unquoted (reused: their buffers stay)
  std::vector<int64_t> field_lines;  // the line each field starts on
  size_t n_fields = 0;
  size_t at = 0;
  int64_t line = 1;
  bool have_header = !options.header;
  size_t columns = 0;  // without a header: the first row's fields
  auto line_break = [&](size_t i) { return text[i] == '\n' || text[i] == '\r'; };
  auto skip_line_break = [&](size_t& i) {  // "\r\n", "\r" or "\n"
    i += (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ? 2 : 1;
    ++line;
  };
  while (at < text.size()) {
    // A line of spaces and tabs only (not the delimiter) is skipped, as pandas' skip_blank_lines does.
    size_t i = at;
    while (i < text.size() && detail::is_blank_line_char(text[i], delim)) ++i;
    if (i == text.size() || line_break(i)) {
      at = i;
      if (at < text.size()) skip_line_break(at);
      continue;
    }
    // One record: pandas' tokenizer states (start of field, unquoted, quoted, just after a quote in a quoted field).
    n_fields = 0;
    auto new_field = [&] {
      if (fields.size() == n_fields) fields.emplace_back();
      if (field_lines.size() == n_fields) field_lines.push_back(0);
      fields[n_fields].clear();
      field_lines[n_fields] = line;
      ++n_fields;
    };
    const int64_t record_line = line;
    enum { start, unquoted, quoted, after_quote } state = start;
    new_field();
    int64_t quote_line = 0;
    bool record_ended = false;
    for (i = at; i < text.size() && !record_ended;) {
      const char c = text[i];
      switch (state) {
        case start:
          if (c == '"') {
            state = quoted, quote_line = line, ++i;
            break;
          }
          state = unquoted;
          [[fallthrough]];
        case unquoted:
        case after_quote:
          if (c == '"' && state == after_quote) {
            fields[n_fields - 1] += '"', state = quoted, ++i;
          } else if (c == delim) {
            new_field(), state = start, ++i;
          } else if (line_break(i)) {
            skip_line_break(i), record_ended = true;
          } else {
            fields[n_fields - 1] += c, state = unquoted, ++i;
          }
          break;
        case quoted:
          if (c == '"') {
            state = after_quote, ++i;
          } else if (line_break(i)) {
            const size_t from = i;
            skip_line_break(i);
            fields[n_fields - 1].append(text.substr(from, i - from));
          } else {
            fields[n_fields - 1] += c, ++i;
          }
          break;
      }
    }
    at = i;
    if (state == quoted)
      fail(policytrain::detail::format("line {}, column {}: the quoted field that starts there is not closed",
                                       quote_line, n_fields),
           "a closing '\"' before the end of the file");
    if (!have_header) {
      for (size_t c = 0; c < n_fields; ++c) {
        const std::string_view name = detail::trim(fields[c]);
        if (name.empty())
          fail(policytrain::detail::format("header (line {}), column {}: the column has no name", field_lines[c],
                                           c + 1),
               "a name for every column");
        if (!detail::is_utf8(name))
          fail(policytrain::detail::format("header (line {}), column {}: the name '{}' is not UTF-8", field_lines[c],
                                           c + 1, detail::shown(name)),
               "a name in UTF-8 (pandas reads a file as UTF-8)");
        for (size_t o = 0; o < c; ++o)
          if (d.names[o] == name)
            fail(policytrain::detail::format("header (line {}), columns {} and {} are both named '{}'", field_lines[c],
                                             o + 1, c + 1, detail::shown(name)),
                 "a different name for every column");
        d.names.emplace_back(name);
      }
      have_header = true;
      columns = n_fields;
      continue;
    }
    if (d.names.empty()) {  // no header: the first row says how many columns there are
      columns = n_fields;
      for (size_t c = 0; c < columns; ++c) d.names.push_back(std::to_string(c));
    }
    const int64_t row = d.rows + 1;
    if (n_fields != columns)
      fail(policytrain::detail::format("row {} (line {}): {} fields, but the {} has {} columns", row, record_line,
                                       n_fields, options.header ? "header" : "first row", columns),
           policytrain::detail::format("{} fields in every row", columns));
    for (size_t c = 0; c < n_fields; ++c) {
      const std::string& f = fields[c];
      auto where = [&] {
        return policytrain::detail::format("row {} (line {}), column {} ('{}')", row, field_lines[c], c + 1,
                                           detail::shown(d.names[c]));
      };
      double v = 0;
      switch (detail::read_cell(f, v)) {
        case detail::Cell::number:
          if (!options.non_finite && narrowing.round != nullptr && !std::isfinite(narrowing.round(v)))
            fail(where() + ": '" + detail::shown(f) + "' is out of the range of " + narrowing.name,
                 "a finite number (read the file as float64, or with CsvOptions::non_finite, which reads it as an "
                 "infinity)");
          break;
        case detail::Cell::missing:
          if (!options.non_finite)
            fail(where() + (f.empty() ? std::string(": the value is missing")
                                      : ": '" + detail::shown(f) + "' is a missing value"),
                 "a number (CsvOptions::non_finite reads a missing value as NaN, as pandas does)");
          break;
        case detail::Cell::infinite:
          if (!options.non_finite)
            fail(where() + ": '" + detail::shown(f) + "' is not finite",
                 "a finite number (CsvOptions::non_finite reads it as an infinity, as pandas does)");
          break;
        case detail::Cell::out_of_range:
          if (!options.non_finite)
            fail(where() + ": '" + detail::shown(f) + "' is out of the range of a double",
                 "a finite number (CsvOptions::non_finite reads it as an infinity, as pandas does)");
          break;
        case detail::Cell::text:
          fail(where() + ": '" + detail::shown(f) + "' is not a number", "a number");
      }
      d.values.push_back(v);
    }
    ++d.rows;
  }
  if (!have_header || (!options.header && d.rows == 0))
    fail("the file is empty", options.header ? "a header line and rows of numbers" : "rows of numbers");
  if (d.rows == 0) fail("the header has no rows below it", "at least one row of numbers");
  return d;
}

/// parse_csv with the default options but the delimiter.
inline CsvData parse_csv(std::string_view text, const std::string& file, char delim) {
  return parse_csv(text, file, CsvOptions{.delimiter = delim});
}

/// Reads and parses a CSV file; see the file's description. Throws CsvError naming the file.
inline CsvData read_csv_data(const std::string& file, const CsvOptions& options = {},
                              const detail::Narrowing& narrowing = {}) {
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw CsvError(policytrain::detail::error_message("policytrain::data::read_csv", file + ": cannot be opened",
                                                      "a readable CSV file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_csv(ss.str(), file, options, narrowing);
}

/// read_csv_data with the default options but the delimiter.
inline CsvData read_csv_data(const std::string& file, char delim) {
  return read_csv_data(file, CsvOptions{.delimiter = delim});
}

}  // namespace policytrain::data
