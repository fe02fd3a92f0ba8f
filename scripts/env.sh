# Sourced by the other scripts: where LibTorch is, and the build settings.
POLICYTRAIN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
BUILD_DIR=${POLICYTRAIN_BUILD_DIR:-$POLICYTRAIN_ROOT/build}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
# .ci/run fills the cache from seven trees (-O0, Release, ASan, TSan, fuzz, CUDA, the header check); at 5 GB the cache
# was cleaned 59 times in one day's work here, evicting the entries the next run (CI's, on the same machine) reads.
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-12G}
# Paths relative to the checkout, so that another clone of the tree (CI) hits the same cache entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$POLICYTRAIN_ROOT}
configure() {
  cmake -S "$POLICYTRAIN_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" "$@" >/dev/null
}

# The CUDA build (scripts/setup-cuda, scripts/test-cuda, scripts/gpu-suite): a CUDA LibTorch and the CUDA Toolkit.
CUDA_TORCH_VERSION=${POLICYTRAIN_CUDA_TORCH_VERSION:-2.14.1}
CUDA_VENV=${POLICYTRAIN_CUDA_VENV:-$HOME/.cache/policytrain/venv-cuda}
CUDA_TOOLKIT_ROOT_DIR=${CUDA_TOOLKIT_ROOT_DIR:-/usr/local/cuda}
# configure_cuda BUILD_DIR [cmake args]: configures against the CUDA LibTorch (CUDA_TORCH_PREFIX, default the one
# in CUDA_VENV). No .cu file is compiled, so one architecture keeps Caffe2's detection quiet.
configure_cuda() {
  local dir=$1; shift
  local prefix=${CUDA_TORCH_PREFIX:-$("$CUDA_VENV/bin/python" -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null)}
  cmake -S "$POLICYTRAIN_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
        -DCUDA_TOOLKIT_ROOT_DIR="$CUDA_TOOLKIT_ROOT_DIR" -DTORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}" "$@" >/dev/null
}
# The targets a CUDA build compiles: the main job, the CUDA tests and the GPU benchmarks (those that exist). The
# quickstart and custom_policy examples have no CUDA path of their own (the library's are the main job's).
cuda_targets() {
  local t out=""
  for t in fashion_mnist test_cuda gpu_bench tiny_lm; do
    ninja -C "$1" -t query "$t" >/dev/null 2>&1 && out="$out $t"
  done
  echo "$out"
}
