#pragma once
/// \file
/// The definitions for separate compilation (detail/config.hpp): include this header in exactly one translation
/// unit of a program whose translation units are all compiled with POLICYTRAIN_SEPARATE_COMPILATION (CMake:
/// link policytrain::compiled, which builds that unit and defines the macro). It defines, non-inline, the
/// functions the headers then only declare: checkpoint files and metadata, run fingerprints, exports, the logs'
/// writers, message formatting. Data parallelism (<policytrain/parallel.hpp>) stays header-only.
#if defined(POLICYTRAIN_HEADER_ONLY) || (defined(POLICYTRAIN_DECL) && !defined(POLICYTRAIN_COMPILING_SOURCE))
#  error "<policytrain/src.hpp> must be included before any other policytrain header of its translation unit"
#endif
#ifndef POLICYTRAIN_SEPARATE_COMPILATION
/// Separate compilation (detail/config.hpp): the headers declare the heavy functions; this unit defines them.
#  define POLICYTRAIN_SEPARATE_COMPILATION 1
#endif
/// This translation unit is the one that defines them (POLICYTRAIN_DEFINE is 1 here).
#define POLICYTRAIN_COMPILING_SOURCE 1

#include <policytrain/all.hpp>
