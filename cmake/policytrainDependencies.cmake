# What the policytrain target links. Kept in one file so that the installed package config
# finds exactly the same dependencies (see policytrainConfig.cmake.in).
include(CMakeFindDependencyMacro)
include(GNUInstallDirs)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/policytrainKineto.cmake)
find_package(Torch REQUIRED)
include(${CMAKE_CURRENT_LIST_DIR}/policytrainTorchCuda.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/policytrainMalloc.cmake)
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
