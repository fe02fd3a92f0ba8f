"""Builds and runs tests/package/consumer against the created package with CMakeDeps and CMakeToolchain."""
import os

from conan import ConanFile
from conan.tools.build import can_run
from conan.tools.cmake import CMake, cmake_layout


# [snippet:consumer]
class PolicytrainTestConan(ConanFile):
    settings = "os", "arch", "compiler", "build_type"
    generators = "CMakeDeps", "CMakeToolchain"

    def requirements(self):
        self.requires(self.tested_reference_str)
    # [/snippet:consumer]

    def layout(self):
        cmake_layout(self)

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def test(self):
        if can_run(self):
            self.run(os.path.join(self.build_folder, "consumer", "consumer"), env="conanrun")
            # The same program through policytrain::compiled (the earlier name), and header-only.
            self.run(os.path.join(self.build_folder, "consumer", "consumer_compiled"), env="conanrun")
            self.run(os.path.join(self.build_folder, "consumer", "consumer_header_only"), env="conanrun")
