#pragma once
/// \file
/// Header-only (the default) or separate compilation. policytrain is header-only: every function is defined in
/// its header. The heavy non-template functions (checkpoint files and their JSON metadata, run fingerprints,
/// exports, the logs' writers, the policies' state dicts, and what Disk's and MetricsLog's hooks hand over) and the
/// formatting of messages ({fmt}) can instead be compiled once, into one translation unit of the program, in the
/// style of Boost.Asio's BOOST_ASIO_SEPARATE_COMPILATION:
/// - every translation unit is compiled with POLICYTRAIN_SEPARATE_COMPILATION defined: the headers then declare
///   those functions and do not define them, so a translation unit no longer generates their code;
/// - exactly one translation unit includes <policytrain/src.hpp>, which defines them (non-inline).
/// CMake does both with the target policytrain::compiled (docs/getting-started.md, "Compile time").
///
/// POLICYTRAIN_DECL marks such a function: `inline` header-only, nothing in separate compilation.
/// POLICYTRAIN_DEFINE is 1 where this translation unit defines them: header-only, or <policytrain/src.hpp>.
#if defined(POLICYTRAIN_SEPARATE_COMPILATION)
#  define POLICYTRAIN_DECL
#  if defined(POLICYTRAIN_COMPILING_SOURCE)
#    define POLICYTRAIN_DEFINE 1
#  else
#    define POLICYTRAIN_DEFINE 0
#  endif
#else
#  define POLICYTRAIN_HEADER_ONLY 1
#  define POLICYTRAIN_DECL inline
#  define POLICYTRAIN_DEFINE 1
#endif
