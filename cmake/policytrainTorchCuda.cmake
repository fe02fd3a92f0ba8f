# A CUDA LibTorch taken from a PyTorch wheel: LibTorch's own headers include the CUDA libraries' headers
# (ATen/cuda/CUDAContext.h includes cusparse.h and cublas.h, c10d's ProcessGroupNCCL.hpp includes nccl.h,
# cuDNN's for the knobs), but the `torch` target does not name where they are. The wheel's nvidia-*
# dependencies carry them beside torch, in site-packages/nvidia/*/include: append those to the torch target,
# after the CUDA Toolkit's own include directory, so that a system toolkit's headers still win.
# Included right after find_package(Torch) by the build and by the installed package config alike.
if(TORCH_CUDA_LIBRARIES AND TARGET torch AND DEFINED TORCH_INSTALL_PREFIX)
  get_filename_component(policytrain_wheel_site "${TORCH_INSTALL_PREFIX}/.." ABSOLUTE)
  file(GLOB policytrain_wheel_cuda_includes LIST_DIRECTORIES true "${policytrain_wheel_site}/nvidia/*/include")
  if(policytrain_wheel_cuda_includes)
    get_target_property(policytrain_torch_includes torch INTERFACE_INCLUDE_DIRECTORIES)
    foreach(dir IN LISTS policytrain_wheel_cuda_includes)
      if(IS_DIRECTORY "${dir}" AND NOT dir IN_LIST policytrain_torch_includes)
        set_property(TARGET torch APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${dir}")
      endif()
    endforeach()
  endif()
endif()
