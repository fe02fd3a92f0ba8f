# Install rules: headers, the exported INTERFACE target, a package config and an architecture-independent
# version file. Everything is installed relative to the prefix, so the prefix can be moved or copied
# (tests/package checks this by consuming a copy of the installed tree).
include(CMakePackageConfigHelpers)
set(POLICYTRAIN_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/policytrain" CACHE STRING
    "Where policytrainConfig.cmake is installed, relative to the prefix")
mark_as_advanced(POLICYTRAIN_INSTALL_CMAKEDIR)

install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(TARGETS policytrain EXPORT policytrainTargets)
install(EXPORT policytrainTargets NAMESPACE policytrain:: DESTINATION ${POLICYTRAIN_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/policytrainConfig.cmake.in
  ${PROJECT_BINARY_DIR}/policytrainConfig.cmake INSTALL_DESTINATION ${POLICYTRAIN_INSTALL_CMAKEDIR})
# A header-only library: the version file must not depend on the architecture that built it.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/policytrainConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/policytrainConfig.cmake ${PROJECT_BINARY_DIR}/policytrainConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/policytrainTorchCuda.cmake
        DESTINATION ${POLICYTRAIN_INSTALL_CMAKEDIR})
if(EXISTS ${PROJECT_SOURCE_DIR}/LICENSE)
  install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/policytrain)
endif()
