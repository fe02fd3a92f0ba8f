# What the policytrain target links. Kept in one file so that the installed package config
# finds exactly the same dependencies (see policytrainConfig.cmake.in).
include(CMakeFindDependencyMacro)
include(GNUInstallDirs)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(Torch REQUIRED)
find_package(Boost 1.70 REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(ZLIB REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
