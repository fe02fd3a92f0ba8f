# Sourced by the other scripts: where LibTorch is, and the build settings.
POLICYTRAIN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
BUILD_DIR=${POLICYTRAIN_BUILD_DIR:-$POLICYTRAIN_ROOT/build}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
# Paths relative to the checkout, so that another clone of the tree (CI) hits the same cache entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$POLICYTRAIN_ROOT}
configure() {
  cmake -S "$POLICYTRAIN_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" "$@" >/dev/null
}
