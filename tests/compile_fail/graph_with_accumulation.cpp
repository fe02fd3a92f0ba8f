// expect: step::CudaGraph captures the optimizer step, but this policy has hooks inside it
// Gradient accumulation decides on the host which micro-batch steps: not graph-safe, named at compile time.
// The control composes the graph policy without it.
#include <torch/torch.h>
#include <policytrain/all.hpp>
#include "../unit/helpers.hpp"

int main() {
  testing::MlpTask task;
  policytrain::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
#ifdef POLICYTRAIN_CF_CONTROL
  policytrain::Trainer<testing::MlpTask, policytrain::step::CudaGraph> trainer(task, opt);
#else
  policytrain::Trainer<testing::MlpTask, policytrain::accumulate::Steps, policytrain::step::CudaGraph> trainer(task, opt);
#endif
  (void)trainer;
}
