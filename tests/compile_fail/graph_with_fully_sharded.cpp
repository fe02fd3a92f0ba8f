// expect: step::CudaGraph captures the optimizer step, but this policy has hooks inside it
// parallel::ShardedDataParallel (stage 3: units gathered, freed and reduce-scattered by host code around every
// unit's forward and backward; a replay would run none of it) with step::GraphEmulation, step::CudaGraph's CPU
// stand-in: named at compile time, whatever the stage (a run-time option). The control composes the graph policy
// without it.
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
  policytrain::Trainer<testing::MlpTask, policytrain::parallel::ShardedDataParallel, policytrain::step::GraphEmulation> trainer(
      task, opt, policytrain::parallel::ShardedDataParallel({}, {.stage = 3}));
#endif
  (void)trainer;
}
