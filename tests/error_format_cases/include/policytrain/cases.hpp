#pragma once
// The cases of tests/error_format.py's own test (ctest errors.format_checker_cases): never compiled, only scanned.
// Two ad hoc messages it must refuse (lines 9 and 14); the others are the forms it accepts.
namespace policytrain::cases {
inline void worded(int x) {
  if (x < 0) throw std::invalid_argument(policytrain::detail::error_message("policytrain::Cases", "x < 0", ">= 0"));
}
inline void ad_hoc_format(int x) {
  if (x < 0) throw std::invalid_argument(policytrain::detail::format("policytrain::Cases: x is {}", x));
}
inline void ad_hoc_concatenation(const std::string& f) {
  // A throw named in a comment is no site: throw std::runtime_error("policytrain: nothing");
  const char* s = "a throw in a string is no site either";
  throw std::runtime_error("policytrain::Cases: " + f + s);
}
inline void rethrows() {
  try {
    worded(1);
  } catch (...) {
    throw;
  }
}
}  // namespace policytrain::cases
