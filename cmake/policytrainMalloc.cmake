# policytrain_link_malloc(<target> <tcmalloc|jemalloc|mimalloc|system>): the program <target> calls the named
# allocator's malloc and free in place of glibc's, for every library it loads (LibTorch, oneDNN, MKL), by linking the
# allocator's shared library into it (its malloc comes before the C library's in the symbol search order), as
# PyTorch's CPU performance guide does with LD_PRELOAD. Why: a CPU training step spends a fifth of its time in glibc's
# malloc and free (oneDNN's per-product descriptors, autograd's nodes), tcmalloc's per-thread caches less than half of
# that (bench/RESULTS.md, "tiny_lm", fifth measurement). `system` links nothing. An allocator that is not found is an
# error naming the Debian package (no silent fallback); policytrain::malloc_library() says at run time which one the
# process calls.
function(policytrain_link_malloc target allocator)
  if(allocator STREQUAL "system")
    return()
  endif()
  set(names_tcmalloc tcmalloc_minimal libtcmalloc_minimal.so.4)
  set(names_jemalloc jemalloc libjemalloc.so.2)
  set(names_mimalloc mimalloc libmimalloc.so.2)
  set(deb_tcmalloc libtcmalloc-minimal4)
  set(deb_jemalloc libjemalloc2)
  set(deb_mimalloc libmimalloc2.0)
  if(NOT DEFINED names_${allocator})
    message(FATAL_ERROR "policytrain_link_malloc(${target} ${allocator}): unknown allocator \"${allocator}\"; "
                        "expected tcmalloc, jemalloc, mimalloc or system")
  endif()
  find_library(POLICYTRAIN_MALLOC_${allocator} NAMES ${names_${allocator}})
  if(NOT POLICYTRAIN_MALLOC_${allocator})
    message(FATAL_ERROR "policytrain_link_malloc(${target} ${allocator}): the ${allocator} library was not found "
                        "(names tried: ${names_${allocator}}); install it (Debian: apt-get install ${deb_${allocator}}), "
                        "point CMAKE_LIBRARY_PATH at it, or choose `system`")
  endif()
  # --no-as-needed: kept although the program names none of its symbols (they interpose the C library's).
  target_link_libraries(${target} PRIVATE "-Wl,--push-state,--no-as-needed" "${POLICYTRAIN_MALLOC_${allocator}}"
                                          "-Wl,--pop-state")
endfunction()
