// expect: step::CudaGraph captures the optimizer step, but this policy has hooks inside it
// parallel::DataParallel (any options) with step::GraphEmulation (pairs of the composition matrix,
// tests/unit/test_matrix.cpp): its hooks in the step (buffer broadcast, the Reducer's hooks, the host-side
// check that the reduction finished) cannot be captured, named at compile time. The control composes the graph
// policy without it.
#include <torch/torch.h>
#include <policytrain/all.hpp>
#include <policytrain/parallel.hpp>
#include "../unit/helpers.hpp"

int main() {
  testing::MlpTask task;
  policytrain::optim::FusedSgd opt(task.module().parameters(), torch::optim::SGDOptions(0.01));
#ifdef POLICYTRAIN_CF_CONTROL
  policytrain::Trainer<testing::MlpTask, policytrain::step::GraphEmulation> trainer(task, opt);
#else
  policytrain::Trainer<testing::MlpTask, policytrain::parallel::DataParallel, policytrain::step::GraphEmulation> trainer(task, opt);
#endif
  (void)trainer;
}
