# Builds and runs tests/package/consumer against policytrain consumed in one way, from scratch:
#   cmake -DMODE=<find_package|add_subdirectory|fetchcontent> -DSOURCE_DIR=<policytrain tree> -DWORK_DIR=<dir>
#         -DPREFIX_PATH=<a|b|...> [-DGENERATOR=...] [-DLAUNCHER=ccache] [-DCXX=...] [-DSTOP_BEFORE_CONSUMER=ON] -P run.cmake
# find_package mode configures and installs policytrain with the options of the vcpkg port
# (ports/policytrain/portfile.cmake) into a staging prefix, copies that prefix elsewhere, deletes the
# original and the build tree, checks that no installed file names a path of the build, and consumes the copy.
cmake_minimum_required(VERSION 3.22)
foreach(v MODE SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run.cmake: ${v} is not set; pass -D${v}=...")
  endif()
endforeach()
string(REPLACE "|" ";" prefix_path "${PREFIX_PATH}")
# Release, as a user's build, at -O0: these builds check that the package is found, links and runs, not its speed
# or its optimised warnings (CI's Release -Werror step builds the tree at -O3); -O3 doubled their compile time (about
# 600 s of CPU for the three modes and Conan's on an Intel Xeon).
set(common_args -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG")
if(GENERATOR)
  list(APPEND common_args -G ${GENERATOR})
endif()
if(LAUNCHER)
  list(APPEND common_args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
if(CXX)
  list(APPEND common_args -DCMAKE_CXX_COMPILER=${CXX})
endif()

# CMAKE_PREFIX_PATH goes to the child processes through the environment (":"-separated), since a ";" list
# does not survive as one command-line argument of execute_process.
macro(set_prefix_path)
  string(REPLACE ";" ":" env_prefix_path "${prefix_path}")
  set(ENV{CMAKE_PREFIX_PATH} "${env_prefix_path}")
endmacro()

function(run)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "run: ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run.cmake (${MODE}): command failed (${rc}): ${shown}")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(consumer_args -DPOLICYTRAIN_CONSUME=${MODE})
if(IMAGES)  # the tree defines policytrain::images: the consumer must find it, and its program must decode
  list(APPEND consumer_args -DPOLICYTRAIN_CONSUMER_IMAGES=ON)
endif()

if(MODE STREQUAL "find_package")
  # The options the vcpkg port passes: every -DPOLICYTRAIN_...=... line of the portfile.
  file(STRINGS "${SOURCE_DIR}/ports/policytrain/portfile.cmake" port_options REGEX "^[ \t]*-DPOLICYTRAIN_[A-Z_]+=[^ \t]+[ \t]*$")
  list(TRANSFORM port_options STRIP)
  if(NOT port_options)
    message(FATAL_ERROR "run.cmake: no -DPOLICYTRAIN_... options found in ports/policytrain/portfile.cmake")
  endif()
  set(stage "${WORK_DIR}/stage")
  set(moved "${WORK_DIR}/moved/prefix")
  set_prefix_path()
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/package-build" ${common_args} ${port_options}
      "-DCMAKE_INSTALL_PREFIX=${stage}")
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/package-build")
  run(${CMAKE_COMMAND} --install "${WORK_DIR}/package-build")
  file(COPY "${stage}/" DESTINATION "${moved}")
  file(REMOVE_RECURSE "${stage}" "${WORK_DIR}/package-build")
  # Relocatable: nothing installed may name the staging prefix, the build tree or the source tree.
  file(GLOB_RECURSE installed "${moved}/*")
  foreach(f ${installed})
    foreach(bad "${stage}" "${WORK_DIR}/package-build" "${SOURCE_DIR}")
      file(READ "${f}" text)
      string(FIND "${text}" "${bad}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "run.cmake: ${f} names ${bad}; the installed package must use paths relative to its prefix")
      endif()
    endforeach()
  endforeach()
  foreach(f include/policytrain/policytrain.hpp share/cmake/policytrain/policytrainConfig.cmake
            share/cmake/policytrain/policytrainConfigVersion.cmake share/cmake/policytrain/policytrainTargets.cmake
            share/doc/policytrain/LICENSE)
    if(NOT EXISTS "${moved}/${f}")
      message(FATAL_ERROR "run.cmake: the installed package lacks ${f}")
    endif()
  endforeach()
  # The license installed is the tree's, byte for byte (the consumer checks what the config file says of it).
  file(SHA256 "${moved}/share/doc/policytrain/LICENSE" installed_license)
  file(SHA256 "${SOURCE_DIR}/LICENSE" source_license)
  if(NOT installed_license STREQUAL source_license)
    message(FATAL_ERROR "run.cmake: ${moved}/share/doc/policytrain/LICENSE differs from ${SOURCE_DIR}/LICENSE")
  endif()
  # CUDA is the consumer's LibTorch's decision (policytrainConfig.cmake), never baked into the export.
  file(READ "${moved}/share/cmake/policytrain/policytrainTargets.cmake" targets)
  string(FIND "${targets}" "POLICYTRAIN_WITH_CUDA" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "run.cmake: policytrainTargets.cmake defines POLICYTRAIN_WITH_CUDA; the config file must decide it")
  endif()
  # The version file must accept a consumer of another architecture (header-only), and follow SameMinorVersion.
  function(version_check want_version sizeof_void_p expect_compatible)
    set(CMAKE_SIZEOF_VOID_P ${sizeof_void_p})
    set(PACKAGE_FIND_VERSION ${want_version})
    string(REPLACE "." ";" parts "${want_version}")
    list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)
    list(GET parts 1 PACKAGE_FIND_VERSION_MINOR)
    set(PACKAGE_FIND_VERSION_PATCH 0)
    set(PACKAGE_FIND_VERSION_COUNT 2)
    include("${moved}/share/cmake/policytrain/policytrainConfigVersion.cmake")
    if(PACKAGE_VERSION_UNSUITABLE OR NOT PACKAGE_VERSION_COMPATIBLE STREQUAL expect_compatible)
      message(FATAL_ERROR "run.cmake: policytrainConfigVersion.cmake (version ${PACKAGE_VERSION}) asked for "
              "${want_version} by a ${sizeof_void_p}-byte-pointer consumer: compatible '${PACKAGE_VERSION_COMPATIBLE}', "
              "unsuitable '${PACKAGE_VERSION_UNSUITABLE}'; expected compatible ${expect_compatible} and suitable")
    endif()
  endfunction()
  file(STRINGS "${SOURCE_DIR}/VERSION" version LIMIT_COUNT 1)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)\\.[0-9]+$" _ "${version}")
  set(major ${CMAKE_MATCH_1})
  set(minor ${CMAKE_MATCH_2})
  # The installed version is the VERSION file's.
  include("${moved}/share/cmake/policytrain/policytrainConfigVersion.cmake")
  if(NOT PACKAGE_VERSION STREQUAL version)
    message(FATAL_ERROR "run.cmake: the installed package is version '${PACKAGE_VERSION}'; ${SOURCE_DIR}/VERSION says '${version}'")
  endif()
  math(EXPR next_minor "${minor} + 1")
  version_check("${major}.${minor}" 4 TRUE)
  version_check("${major}.${minor}" 8 TRUE)
  version_check("${major}.${next_minor}" 8 FALSE)
  list(PREPEND prefix_path "${moved}")
elseif(MODE STREQUAL "add_subdirectory")
  list(APPEND consumer_args "-DPOLICYTRAIN_SOURCE_DIR=${SOURCE_DIR}")
elseif(MODE STREQUAL "fetchcontent")
  # A source archive holding what a release archive (and the Conan recipe's exports) holds.
  set(members CMakeLists.txt VERSION LICENSE cmake include src)
  execute_process(COMMAND ${CMAKE_COMMAND} -E tar czf "${WORK_DIR}/policytrain-src.tar.gz" ${members}
                  WORKING_DIRECTORY "${SOURCE_DIR}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run.cmake: could not archive ${SOURCE_DIR}")
  endif()
  list(APPEND consumer_args "-DPOLICYTRAIN_ARCHIVE=file://${WORK_DIR}/policytrain-src.tar.gz")
else()
  message(FATAL_ERROR "run.cmake: MODE is '${MODE}'; expected find_package, add_subdirectory or fetchcontent")
endif()

if(STOP_BEFORE_CONSUMER)  # for debugging the packaging steps alone
  return()
endif()
set_prefix_path()
# The consumer's configure, its log kept: it must not print TorchConfig.cmake's misleading "library kineto not
# found" (the installed policytrainConfig.cmake includes policytrainKineto.cmake, as the source tree does).
message(STATUS "run: consumer configure (${MODE})")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${CMAKE_CURRENT_LIST_DIR}/consumer" -B "${WORK_DIR}/consumer-build"
                        ${common_args} ${consumer_args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE configure_log ERROR_VARIABLE configure_log)
message("${configure_log}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run.cmake (${MODE}): the consumer's configure failed (${rc})")
endif()
if(configure_log MATCHES "library kineto not found")
  message(FATAL_ERROR "run.cmake (${MODE}): the consumer's configure printed TorchConfig.cmake's kineto warning; "
                      "policytrain's config should have pointed kineto_LIBRARY at libtorch_cpu (policytrainKineto.cmake)")
endif()
if(MODE STREQUAL "find_package")
  # The package found must be the relocated copy (not a registry entry or another installation).
  file(STRINGS "${WORK_DIR}/consumer-build/CMakeCache.txt" found_dir REGEX "^policytrain_DIR:")
  string(FIND "${found_dir}" "=${moved}/" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "run.cmake: the consumer found ${found_dir}; expected the package under ${moved}")
  endif()
endif()
if(MODE STREQUAL "add_subdirectory")
  # Configured only: the build would be the fetchcontent mode's (FetchContent_MakeAvailable adds the fetched tree
  # with add_subdirectory), one more LibTorch compile of the same consumer. The configure checks what differs: the
  # source tree's own CMakeLists.txt as a subproject, and that it defines the targets the consumer links (a missing
  # policytrain::* target fails the generate step).
  message(STATUS "run: add_subdirectory: configured and generated; the build is the fetchcontent mode's")
  return()
endif()
run(${CMAKE_COMMAND} --build "${WORK_DIR}/consumer-build")
run(${CMAKE_COMMAND} -E env OMP_NUM_THREADS=1 "${WORK_DIR}/consumer-build/consumer")
run(${CMAKE_COMMAND} -E env OMP_NUM_THREADS=1 "${WORK_DIR}/consumer-build/consumer_compiled")
run(${CMAKE_COMMAND} -E env OMP_NUM_THREADS=1 "${WORK_DIR}/consumer-build/consumer_header_only")
if(IMAGES)
  run("${WORK_DIR}/consumer-build/consumer_images")
endif()
