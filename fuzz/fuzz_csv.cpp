// libFuzzer target: the CSV reader's torch-free layer (data/csv_format.hpp). The only allowed failure is CsvError,
// and what comes back is a consistent table: rows * columns values, named columns (distinct and non-empty with a
// header), and values finite in float32 (read_csv's default dtype) unless CsvOptions::non_finite is on. Every input
// is read with both delimiters, with and without a header, with and without non_finite.
// With POLICYTRAIN_FUZZ_SEEDS=<dir> set, writes a seed corpus of valid and malformed tables there and exits.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <policytrain/data/csv_format.hpp>

namespace {
void spit(const std::string& path, const std::string& s) { std::ofstream(path, std::ios::binary) << s; }
void make_seeds(const std::string& dir) {
  spit(dir + "/table", "a,b,target\n1,2.5,-3e2\n4,5,6\n");
  spit(dir + "/crlf", "x ; y\r\n1 ; 2\r\n\r\n3;4");
  spit(dir + "/ragged", "a,b\n1\n");
  spit(dir + "/missing", "a,b\n1,\n");
  spit(dir + "/text", "a\nfour\n");
  spit(dir + "/empty", "");
  spit(dir + "/quoted", "\xEF\xBB\xBF\"x1\",\"a,b\",\"say \"\"hi\"\"\"\r\n1,\"2.5\n\",3\r\"4\"x,NA,-inf\r");
  spit(dir + "/unclosed", "a,b\n1,\"2\n");
  spit(dir + "/extremes", "a,b\n1e400,-1e-400\n+.5e-3,0x10\n 4.9e-324\t,\"1.#QNAN\"\n");
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* d = std::getenv("POLICYTRAIN_FUZZ_SEEDS")) {
    make_seeds(d);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (char delim : {',', ';'})
    for (bool header : {true, false})
      for (bool non_finite : {false, true}) {
        // As read_csv's float32 reads it: a number that float32 rounds to an infinity is refused too.
        const policytrain::data::detail::Narrowing to_float{
            [](double v) { return static_cast<double>(static_cast<float>(v)); }, "float32"};
        try {
          const auto t = policytrain::data::parse_csv(
              text, "<fuzz>", {.delimiter = delim, .header = header, .non_finite = non_finite}, to_float);
          if (t.rows <= 0 || t.names.empty() || t.values.size() != static_cast<size_t>(t.rows) * t.names.size())
            std::abort();
          for (size_t c = 0; c < t.names.size(); ++c) {
            if (t.names[c].empty()) std::abort();
            for (size_t o = 0; o < c; ++o)
              if (t.names[o] == t.names[c]) std::abort();
          }
          if (!non_finite)
            for (double v : t.values)
              if (!std::isfinite(static_cast<float>(v))) std::abort();
        } catch (const policytrain::data::CsvError&) {
        }
      }
  return 0;
}
