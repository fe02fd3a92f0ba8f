// Prints what parallel::Environment reads from this process's environment, for tests/differential/
// slurm_environment.py: "source rank world_size local_rank master_addr master_port", or "error: <message>".
#include <cstdio>
#include <exception>

#include <policytrain/parallel/environment.hpp>

int main() {
  try {
    const auto e = policytrain::parallel::Environment::from_env();
    std::printf("%s %d %d %d %s %d\n", e.source.c_str(), e.rank, e.world_size, e.local_rank, e.master_addr.c_str(),
                e.master_port);
  } catch (const std::exception& x) {
    std::printf("error: %s\n", x.what());
  }
  return 0;
}
