// expect: more than one accumulation policy given; keep exactly one accumulate:: policy
// accumulate::Steps with accumulate::NominalBatch (a pair of the composition matrix, tests/unit/test_matrix.cpp):
// two policies of one category, named at compile time. NominalBatch({.nominal = 0, .steps = n}) is Steps(n).
#include <torch/torch.h>
#include <policytrain/all.hpp>
#include "../unit/helpers.hpp"

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
#ifdef POLICYTRAIN_CF_CONTROL
  policytrain::Trainer<testing::MlpTask, policytrain::accumulate::NominalBatch> trainer(task, opt);
#else
  policytrain::Trainer<testing::MlpTask, policytrain::accumulate::Steps, policytrain::accumulate::NominalBatch> trainer(task, opt);
#endif
  (void)trainer;
}
