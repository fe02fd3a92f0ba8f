include(CMakePackageConfigHelpers)
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# POLICYTRAIN_WITH_CUDA depends on the consumer's LibTorch, so the config file decides it, not the export.
set_target_properties(policytrain PROPERTIES EXPORT_PROPERTIES "")
install(TARGETS policytrain EXPORT policytrainTargets)
set(POLICYTRAIN_CMAKEDIR ${CMAKE_INSTALL_DATADIR}/cmake/policytrain)
install(EXPORT policytrainTargets NAMESPACE policytrain:: DESTINATION ${POLICYTRAIN_CMAKEDIR})
configure_package_config_file(cmake/policytrainConfig.cmake.in
  ${PROJECT_BINARY_DIR}/policytrainConfig.cmake INSTALL_DESTINATION ${POLICYTRAIN_CMAKEDIR})
# A header-only library: the version file must not depend on the architecture that built it.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/policytrainConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/policytrainConfig.cmake ${PROJECT_BINARY_DIR}/policytrainConfigVersion.cmake
        DESTINATION ${POLICYTRAIN_CMAKEDIR})
