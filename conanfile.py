"""Conan 2 recipe for policytrain, a header-only library.

The package ships the library's own CMake package files (policytrainConfig.cmake), which find LibTorch,
fmt, nlohmann_json, ZLIB and OpenSSL with find_dependency and decide POLICYTRAIN_WITH_CUDA from the
LibTorch they find. CMakeDeps therefore generates nothing for policytrain ("cmake_find_mode" "none"); the
consumer's CMakeToolchain puts the package's CMake directory on CMAKE_PREFIX_PATH.
Tested by scripts/conan-test (a profile that declares the dependencies as provided by the system).
"""
import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout
from conan.errors import ConanException
from conan.tools.files import copy, load


class PolicytrainConan(ConanFile):
    name = "policytrain"
    description = "Compile-time training policies for LibTorch"
    license = "MIT"
    topics = ("libtorch", "pytorch", "training", "header-only", "policy-based-design")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    exports_sources = "CMakeLists.txt", "VERSION", "cmake/*", "include/*", "src/*", "LICENSE"
    no_copy_source = True

    def set_version(self):
        # The one home of the version (CMakeLists.txt reads it too; CTest package.versions checks vcpkg.json).
        path = os.path.join(self.recipe_folder, "VERSION")
        version = load(self, path).strip()
        if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version):
            raise ConanException(f"policytrain: {path} holds '{version}'; expected MAJOR.MINOR.PATCH")
        self.version = version

    def layout(self):
        cmake_layout(self)

    def requirements(self):
        # Version ranges, so that a profile's [platform_requires] can name the versions a system provides.
        self.requires("libtorch/[>=2.4 <3]")
        self.requires("fmt/[>=9]")
        self.requires("nlohmann_json/[>=3.9 <4]")
        self.requires("zlib/[>=1.2.11 <2]")
        self.requires("openssl/[>=1.1 <4]")

    def validate(self):
        check_min_cppstd(self, 20)

    def generate(self):
        tc = CMakeToolchain(self)
        for opt in ("TESTS", "EXAMPLES", "BENCH"):
            tc.cache_variables[f"POLICYTRAIN_BUILD_{opt}"] = False
        tc.cache_variables["POLICYTRAIN_INSTALL"] = True
        tc.generate()
        CMakeDeps(self).generate()

    def build(self):
        # Nothing is compiled; configuring generates the package files and checks the dependencies are found.
        cmake = CMake(self)
        cmake.configure()

    def package(self):
        CMake(self).install()  # also installs share/doc/policytrain/LICENSE
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))

    def package_id(self):
        self.info.clear()

    def package_info(self):
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        self.cpp_info.set_property("cmake_find_mode", "none")
        self.cpp_info.builddirs.append(os.path.join("share", "cmake", "policytrain"))
