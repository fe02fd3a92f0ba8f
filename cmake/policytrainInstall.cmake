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
# The opt-in component `images` (policytrain::images: libpng and libjpeg), exported in a file of its own where this
# build found both, so that the config looks for PNG and JPEG only for a consumer that asks for the component.
if(TARGET policytrain_images)
  set_target_properties(policytrain_images PROPERTIES EXPORT_NAME images)
  install(TARGETS policytrain_images EXPORT policytrainImagesTargets)
  install(EXPORT policytrainImagesTargets NAMESPACE policytrain:: DESTINATION ${POLICYTRAIN_INSTALL_CMAKEDIR})
endif()
# The license text goes to share/doc/policytrain (not CMAKE_INSTALL_DOCDIR, which a parent project that
# included GNUInstallDirs first has already set to its own name); the config file names it.
set(POLICYTRAIN_INSTALL_LICENSEDIR "${CMAKE_INSTALL_DATADIR}/doc/policytrain")
configure_package_config_file(cmake/policytrainConfig.cmake.in
  ${PROJECT_BINARY_DIR}/policytrainConfig.cmake INSTALL_DESTINATION ${POLICYTRAIN_INSTALL_CMAKEDIR}
  PATH_VARS POLICYTRAIN_INSTALL_LICENSEDIR)
# A header-only library: the version file must not depend on the architecture that built it.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/policytrainConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/policytrainConfig.cmake ${PROJECT_BINARY_DIR}/policytrainConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/policytrainTorchCuda.cmake ${PROJECT_SOURCE_DIR}/cmake/policytrainKineto.cmake
              ${PROJECT_SOURCE_DIR}/cmake/policytrainMalloc.cmake
        DESTINATION ${POLICYTRAIN_INSTALL_CMAKEDIR})
install(FILES LICENSE DESTINATION ${POLICYTRAIN_INSTALL_LICENSEDIR})
# The component `compiled` (policytrain::compiled, separate compilation): its one source file, next to the config
# that builds it in the consumer's tree (policytrainConfig.cmake), so that it moves with the config (vcpkg moves
# share/cmake/policytrain to share/policytrain).
install(FILES src/policytrain.cpp DESTINATION ${POLICYTRAIN_INSTALL_CMAKEDIR} RENAME policytrain_compiled.cpp)
# The command-line tool (verify, info, consolidate checkpoints), where this build made it.
# Installed with a run path to LibTorch (and every other library it links from outside the project), so that it
# starts from a clean environment (no LD_LIBRARY_PATH): the build tree's run path is dropped at install.
if(TARGET policytrain-ckpt)
  set_target_properties(policytrain-ckpt PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS policytrain-ckpt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
endif()
