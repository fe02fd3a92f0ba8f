# Overlay port for the policytrain source tree this file lives in (header-only):
#   vcpkg install policytrain --overlay-ports=<policytrain>/ports
# To package a release instead, replace SOURCE_PATH with vcpkg_from_github(OUT_SOURCE_PATH SOURCE_PATH ...).
set(VCPKG_BUILD_TYPE release)  # header-only: one configuration is enough
set(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../..")

# tests/package/run.cmake configures and installs with exactly the -DPOLICYTRAIN_... lines below
# (one option per line), then consumes the relocated result.
vcpkg_cmake_configure(
    SOURCE_PATH "${SOURCE_PATH}"
    OPTIONS
        -DPOLICYTRAIN_BUILD_TESTS=OFF
        -DPOLICYTRAIN_BUILD_EXAMPLES=OFF
        -DPOLICYTRAIN_BUILD_BENCH=OFF
        -DPOLICYTRAIN_INSTALL=ON
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME policytrain CONFIG_PATH share/cmake/policytrain)

file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug" "${CURRENT_PACKAGES_DIR}/lib")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")  # MIT: share/${PORT}/copyright
