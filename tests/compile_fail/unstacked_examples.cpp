// expect: the loader yields neither a policytrain::Batch nor one stacked torch::data::Example
// Any range whose batches are std::vector<torch::data::Example<>> (a dataset not mapped with Stack<>): refused by
// the Trainer itself, naming Stack<>.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

// A task type of its own: tests/compile_fail/torch_dataset_without_stack.cpp meets the same static_assert in
// Trainer<testing::MlpTask>::to_device, and the compile-fail files compile as one unit, where an instantiation
// (and its error) happens once.
struct UnstackedTask : testing::MlpTask {};

int main() {
  UnstackedTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer trainer(task, opt);
#ifdef POLICYTRAIN_CF_CONTROL
  std::vector<torch::data::Example<>> batches{{torch::zeros({4, 8}), torch::zeros({4}, torch::kLong)}};
#else
  std::vector<std::vector<torch::data::Example<>>> batches{{{torch::zeros({8}), torch::zeros({}, torch::kLong)}}};
#endif
  trainer.fit(batches);
}
