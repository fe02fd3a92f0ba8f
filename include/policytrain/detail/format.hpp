#pragma once
/// \file
/// policytrain::detail::format: fmt::format, with the compile-time check of the format string, whose formatting
/// code is compiled once with separate compilation (detail/config.hpp). fmt::format instantiates and generates
/// {fmt}'s formatting engine (with FMT_HEADER_ONLY, its whole non-template part too) in every translation unit
/// that calls it; detail::format calls detail::vformat, defined in <policytrain/src.hpp> under
/// POLICYTRAIN_SEPARATE_COMPILATION, so a translation unit only packs the arguments.
#include <string>

#include <fmt/format.h>

#include <policytrain/detail/config.hpp>

namespace policytrain::detail {

/// fmt::vformat (out of line with separate compilation).
POLICYTRAIN_DECL std::string vformat(fmt::string_view f, fmt::format_args args)
#if POLICYTRAIN_DEFINE
{
  return fmt::vformat(f, args);
}
#else
;
#endif

/// fmt::format(f, a...), formatted by vformat.
template <class... T>
std::string format(fmt::format_string<T...> f, T&&... a) {
  return ::policytrain::detail::vformat(f, fmt::make_format_args(a...));  // qualified: no ADL of fmt::vformat
}

}  // namespace policytrain::detail
