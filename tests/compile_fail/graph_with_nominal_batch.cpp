// expect: step::CudaGraph captures the optimizer step, but this policy has hooks inside it
// accumulate::NominalBatch with step::GraphEmulation (a pair of the composition matrix, tests/unit/test_matrix.cpp):
// the accumulation decides on the host which micro-batch steps: not graph-safe, named at compile time.
// The control composes the graph policy without it.
#include <torch/torch.h>
#include <policytrain/all.hpp>
#include "../unit/helpers.hpp"

int main() {
  testing::MlpTask task;
  policytrain::optim::FusedSgd opt(task.module().parameters(), torch::optim::SGDOptions(0.01));
#ifdef POLICYTRAIN_CF_CONTROL
  policytrain::Trainer<testing::MlpTask, policytrain::step::GraphEmulation> trainer(task, opt);
#else
  policytrain::Trainer<testing::MlpTask, policytrain::accumulate::NominalBatch, policytrain::step::GraphEmulation> trainer(task, opt);
#endif
  (void)trainer;
}
