// The C++ side of tests/differential/csv_tables.py: reads CSV files with data::read_csv and prints what it read, for the
// driver to compare with pandas.read_csv. Usage: csv_probe MANIFEST, where each line of MANIFEST is
// "<header 0|1> <non_finite 0|1> <f32|f64> <delimiter as a decimal character code> <path>". Prints one JSON object a
// line, in the manifest's order: {"names": [hex of each name's bytes], "rows": R, "values": [C99 hex floats, row by
// row]} for a table, {"error": "<CsvError's message>"} for a refusal. Hex keeps the comparison exact: names are
// bytes, and "%a" is the double itself (a float32 value is printed as the double it widens to).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <policytrain/data/csv.hpp>

namespace {
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\', out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}
std::string hex_bytes(const std::string& s) {
  std::string out;
  char buf[4];
  for (unsigned char c : s) std::snprintf(buf, sizeof buf, "%02x", c), out += buf;
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: csv_probe MANIFEST\n";
    return 2;
  }
  std::ifstream manifest(argv[1]);
  std::string line;
  while (std::getline(manifest, line)) {
    std::istringstream in(line);
    int header = 1, non_finite = 0, delim = ',';
    std::string dtype, path;
    in >> header >> non_finite >> dtype >> delim;
    std::getline(in >> std::ws, path);
    const policytrain::data::CsvOptions options{
        .delimiter = static_cast<char>(delim), .header = header != 0, .non_finite = non_finite != 0};
    std::string out;
    try {
      const auto t = policytrain::data::read_csv(path, options, dtype == "f32" ? torch::kFloat32 : torch::kFloat64);
      const auto v = t.values.to(torch::kFloat64).contiguous();
      out = "{\"names\": [";
      for (size_t c = 0; c < t.names.size(); ++c) out += (c ? ", \"" : "\"") + hex_bytes(t.names[c]) + "\"";
      out += "], \"rows\": " + std::to_string(v.size(0)) + ", \"values\": [";
      const double* p = v.data_ptr<double>();
      char buf[40];
      for (int64_t i = 0; i < v.numel(); ++i) {
        std::snprintf(buf, sizeof buf, "%a", p[i]);
        out += (i ? ", \"" : "\"") + std::string(buf) + "\"";
      }
      out += "]}";
    } catch (const policytrain::data::CsvError& e) {
      out = "{\"error\": " + json_string(e.what()) + "}";
    }
    std::cout << out << '\n';
  }
  return 0;
}
