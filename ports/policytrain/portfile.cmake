# Overlay port for the policytrain source tree this file lives in (header-only):
#   vcpkg install policytrain --overlay-ports=<policytrain>/ports            (policytrain::policytrain, ::header_only)
#   vcpkg install policytrain[images] --overlay-ports=<policytrain>/ports    (and policytrain::images)
# To package a release instead, replace SOURCE_PATH with vcpkg_from_github(OUT_SOURCE_PATH SOURCE_PATH ...).
# CTest package.vcpkg_overlay runs this file under an emulation of vcpkg (tests/package/vcpkg_emulation.cmake).
set(VCPKG_BUILD_TYPE release)  # header-only: one configuration is enough, and nothing goes to lib/ or debug/
set(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../..")

# The feature images (libpng, libjpeg-turbo) decides whether policytrain::images is exported: required with it,
# and without it not looked for, so that a libpng or libjpeg of the build machine that vcpkg did not install
# cannot slip into the package.
vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
    FEATURES
        images CMAKE_REQUIRE_FIND_PACKAGE_PNG
        images CMAKE_REQUIRE_FIND_PACKAGE_JPEG
    INVERTED_FEATURES
        images CMAKE_DISABLE_FIND_PACKAGE_PNG
        images CMAKE_DISABLE_FIND_PACKAGE_JPEG
)

# tests/package/run.cmake configures and installs with exactly the -DPOLICYTRAIN_... lines below
# (one option per line), then consumes the relocated result.
vcpkg_cmake_configure(
    SOURCE_PATH "${SOURCE_PATH}"
    OPTIONS
        -DPOLICYTRAIN_BUILD_TESTS=OFF
        -DPOLICYTRAIN_BUILD_EXAMPLES=OFF
        -DPOLICYTRAIN_BUILD_BENCH=OFF
        -DPOLICYTRAIN_INSTALL=ON
        ${FEATURE_OPTIONS}
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME policytrain CONFIG_PATH share/cmake/policytrain)

file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")  # MIT: share/${PORT}/copyright
