# What the policytrain target links. Kept in one file so that the installed package config
# finds exactly the same dependencies (see policytrainConfig.cmake.in).
include(CMakeFindDependencyMacro)
include(GNUInstallDirs)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
# TorchConfig.cmake looks for a separate libkineto and, not finding one, warns "library kineto not found." on
# every configure. Nothing is missing: LibTorch's official builds (CPU and CUDA) link Kineto, PyTorch's profiler
# library, into libtorch_cpu (Python's torch.autograd.kineto_available() says True), and callbacks::Profiler
# uses it from there. Where the LibTorch about to be found has no separate libkineto, its cache variable
# kineto_LIBRARY is pointed at the libtorch_cpu that holds Kineto, so the misleading warning is not printed
# (libtorch_cpu is linked anyway). A kineto_LIBRARY that names a file is kept.
if(NOT kineto_LIBRARY)  # unset, or NOTFOUND from an earlier configure
  find_file(policytrain_torch_config TorchConfig.cmake
            HINTS "${Torch_DIR}" "$ENV{Torch_DIR}" PATHS ${CMAKE_PREFIX_PATH} $ENV{CMAKE_PREFIX_PATH}
            PATH_SUFFIXES Torch share/cmake/Torch NO_DEFAULT_PATH NO_CACHE)
  if(policytrain_torch_config)
    get_filename_component(policytrain_torch_lib "${policytrain_torch_config}/../../../../lib" ABSOLUTE)
    file(GLOB policytrain_kineto_libs "${policytrain_torch_lib}/*kineto*")
    find_library(policytrain_torch_cpu torch_cpu PATHS "${policytrain_torch_lib}" NO_DEFAULT_PATH NO_CACHE)
    if(NOT policytrain_kineto_libs AND policytrain_torch_cpu)
      set(kineto_LIBRARY "${policytrain_torch_cpu}" CACHE FILEPATH
          "Kineto, PyTorch's profiler library: linked into this libtorch_cpu (set by policytrain)" FORCE)
    endif()
  endif()
endif()
find_package(Torch REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/policytrainTorchCuda.cmake)
find_package(Boost 1.70 REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(ZLIB REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)

# Imported targets are visible only in the directory that found them and below. When policytrain is a
# subdirectory (add_subdirectory, FetchContent), the parent links policytrain::policytrain and so must see
# torch, fmt::fmt-header-only, ... too: promote what was just found to global targets.
if(NOT CMAKE_SOURCE_DIR STREQUAL CMAKE_CURRENT_SOURCE_DIR)
  get_directory_property(policytrain_imported IMPORTED_TARGETS)
  foreach(t IN LISTS policytrain_imported)
    get_target_property(policytrain_global ${t} IMPORTED_GLOBAL)
    if(NOT policytrain_global)
      set_target_properties(${t} PROPERTIES IMPORTED_GLOBAL TRUE)
    endif()
  endforeach()
endif()
