// expect: a torch::data DataLoader is passed as it is, so the Trainer can neither give its sampler the epoch
// LibTorch's DataLoader passed as it is: its sampler is out of the Trainer's reach; refused, naming from_torch.
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
  auto dataset = Rows().map(torch::data::transforms::Stack<>());
  auto options = torch::data::DataLoaderOptions().batch_size(4).workers(2);
#ifdef POLICYTRAIN_CF_CONTROL
  auto loader = policytrain::data::from_torch(dataset, torch::data::samplers::SequentialSampler(16), options);
  trainer.fit(loader);
#else
  auto loader = torch::data::make_data_loader(dataset, torch::data::samplers::SequentialSampler(16), options);
  trainer.fit(*loader);
#endif
}
