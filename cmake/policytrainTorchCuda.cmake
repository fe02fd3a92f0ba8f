# A CUDA LibTorch taken from a PyTorch wheel: LibTorch's own headers include the CUDA libraries' headers
# (ATen/cuda/CUDAContext.h includes cusparse.h and cublas.h, c10d's ProcessGroupNCCL.hpp includes nccl.h,
# cuDNN's for the knobs), but the `torch` target does not name where they are. The wheel's nvidia-*
# dependencies carry them beside torch, in site-packages/nvidia/*/include: add those to the torch target.
# The CUDA math libraries' folder (nvidia/cu13/include: cusparse.h, cublas.h, ...) only when the CUDA Toolkit
# found lacks them (a compiler-only install), so that a full Toolkit's own headers are the ones used.
# Included right after find_package(Torch) by the build and by the installed package config alike.
if(TORCH_CUDA_LIBRARIES AND TARGET torch AND DEFINED TORCH_INSTALL_PREFIX)
  get_filename_component(policytrain_wheel_site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
  file(GLOB policytrain_wheel_cuda_includes LIST_DIRECTORIES true "${policytrain_wheel_site}/nvidia/*/include")
  set(policytrain_toolkit_has_libs OFF)
  foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    if(EXISTS "${dir}/cusparse.h")
      set(policytrain_toolkit_has_libs ON)
    endif()
  endforeach()
  get_target_property(policytrain_torch_includes torch INTERFACE_INCLUDE_DIRECTORIES)
  foreach(dir IN LISTS policytrain_wheel_cuda_includes)
    if(policytrain_toolkit_has_libs AND EXISTS "${dir}/cusparse.h")
      continue()
    endif()
    if(IS_DIRECTORY "${dir}" AND NOT dir IN_LIST policytrain_torch_includes)
      set_property(TARGET torch APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${dir}")
    endif()
  endforeach()
endif()
