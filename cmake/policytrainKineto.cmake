# Included before find_package(Torch) by cmake/policytrainDependencies.cmake (the build) and by the installed
# policytrainConfig.cmake (a consumer's configure), so that neither prints TorchConfig.cmake's kineto warning.
# TorchConfig.cmake looks for a separate libkineto and, not finding one, warns "library kineto not found." on
# every configure. Nothing is missing: LibTorch's official builds (CPU and CUDA) link Kineto, PyTorch's profiler
# library, into libtorch_cpu (Python's torch.autograd.kineto_available() says True), and callbacks::Profiler
# uses it from there. Where the LibTorch about to be found has no separate libkineto, its cache variable
# kineto_LIBRARY is pointed at the libtorch_cpu that holds Kineto, so the misleading warning is not printed
# (libtorch_cpu is linked anyway). A kineto_LIBRARY that names a file is kept.
if(NOT kineto_LIBRARY)  # unset, or NOTFOUND from an earlier configure
  # The environment's CMAKE_PREFIX_PATH is a platform path list ("a:b"), which PATHS would take as one path.
  file(TO_CMAKE_PATH "$ENV{CMAKE_PREFIX_PATH}" policytrain_env_prefix_path)
  find_file(policytrain_torch_config TorchConfig.cmake
            HINTS "${Torch_DIR}" "$ENV{Torch_DIR}" PATHS ${CMAKE_PREFIX_PATH} ${policytrain_env_prefix_path}
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
