#pragma once
/// \file
/// policytrain::detail::format and detail::error_message, the one way the library words an error.
///
/// policytrain::detail::format: fmt::format, with the compile-time check of the format string, whose formatting
/// code is compiled once with separate compilation (detail/config.hpp). fmt::format instantiates and generates
/// {fmt}'s formatting engine (with FMT_HEADER_ONLY, its whole non-template part too) in every translation unit
/// that calls it; detail::format calls detail::vformat, defined in <policytrain/src.hpp> under
/// POLICYTRAIN_SEPARATE_COMPILATION, so a translation unit only packs the arguments.
#include <string>
#include <string_view>

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

/// An error's message, in the library's one form: `<entity>: <what>[; expected <expected>][; <fix>]`.
/// `entity` names who refuses (`policytrain::Trainer`, `policytrain::callbacks::Ema`), `what` the value or file at
/// fault (format it with detail::format), `expected` what was expected of it, `fix` what the user does about it; an
/// empty part is left out. Static_asserts follow the same form, written out: `<entity>: <what>; <fix>`.
POLICYTRAIN_DECL std::string error_message(std::string_view entity, std::string_view what,
                                           std::string_view expected = {}, std::string_view fix = {})
#if POLICYTRAIN_DEFINE
{
  std::string m;
  m.reserve(entity.size() + what.size() + expected.size() + fix.size() + 16);
  m.append(entity).append(": ").append(what);
  if (!expected.empty()) m.append("; expected ").append(expected);
  if (!fix.empty()) m.append("; ").append(fix);
  return m;
}
#else
;
#endif

}  // namespace policytrain::detail
