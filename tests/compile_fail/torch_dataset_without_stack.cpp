// expect: the dataset yields a std::vector of separate examples, not one batch; map it with
// LibTorch's dataset without Stack<> yields std::vector<Example<>> per batch: from_torch refuses it, naming Stack<>.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include <policytrain/data/from_torch.hpp>
#include "../unit/helpers.hpp"

struct Rows : torch::data::datasets::Dataset<Rows> {
  torch::data::Example<> get(size_t) override { return {torch::zeros({8}), torch::zeros({}, torch::kLong)}; }
  std::optional<size_t> size() const override { return 16; }
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer trainer(task, opt);
  auto options = torch::data::DataLoaderOptions().batch_size(4).workers(2);
#ifdef POLICYTRAIN_CF_CONTROL
  auto loader = policytrain::data::from_torch(Rows().map(torch::data::transforms::Stack<>()),
                                              torch::data::samplers::SequentialSampler(16), options);
#else
  auto loader = policytrain::data::from_torch(Rows(), torch::data::samplers::SequentialSampler(16), options);
#endif
  trainer.fit(loader);
}
