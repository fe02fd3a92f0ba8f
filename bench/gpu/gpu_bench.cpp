// gpu_bench: the C++ GPU benchmarks of bench/gpu (run them all with bench/gpu/run_all.sh).
//   gpu_bench amp|loops|data|autobatch --device cuda|cpu --out FILE.json [--key value ...]
// Each subcommand's options and defaults (the GPU sizes) are in its source file; run_all.sh passes tiny sizes
// and --device cpu in --smoke mode.
#include <cstdio>
#include <exception>

#include "common.hpp"

#ifdef POLICYTRAIN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

void gpubench::release_cached_memory(const torch::Device& dev) {
#ifdef POLICYTRAIN_WITH_CUDA
  if (dev.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gpu_bench amp|loops|data|autobatch [--device cuda|cpu] [--out FILE] [--key value ...]\n");
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    gpubench::Args a(argc, argv, 2);
    if (cmd == "amp") return gpubench::run_amp(a);
    if (cmd == "loops") return gpubench::run_loops(a);
    if (cmd == "data") return gpubench::run_data(a);
    if (cmd == "autobatch") return gpubench::run_autobatch(a);
    std::fprintf(stderr, "gpu_bench: unknown benchmark '%s'; expected amp, loops, data or autobatch\n", cmd.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
