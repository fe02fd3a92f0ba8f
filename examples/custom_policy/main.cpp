// Runs the LR finder of lr_finder.hpp on Fashion-MNIST with an MLP and prints the sweep and its suggestion.
//   custom_policy [--data DIR] [--steps N]
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <policytrain/datasets.hpp>
#include <policytrain/policytrain.hpp>

#include "lr_finder.hpp"

namespace pt = policytrain;

struct MlpClassifier {
  torch::nn::Sequential net{torch::nn::Flatten(), torch::nn::Linear(28 * 28, 128), torch::nn::ReLU(),
                            torch::nn::Linear(128, 10)};
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) {
    return torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
  }
};

int main(int argc, char** argv) {
  std::filesystem::path dir = pt::data::default_fashion_mnist_dir();
  int64_t steps = 100;
  CLI::App app{"The LR finder of lr_finder.hpp on Fashion-MNIST"};
  app.add_option("--data", dir, "Directory with the Fashion-MNIST IDX files")->check(CLI::ExistingDirectory);
  app.add_option("--steps", steps, "Steps of the learning-rate sweep")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    torch::manual_seed(0);
    auto train = pt::data::load_fashion_mnist(dir, /*train=*/true);
    pt::data::TensorLoader loader(train.x, train.y, {.batch_size = 64, .shuffle = true, .seed = 0});

    // [snippet:use]
    MlpClassifier task;
    torch::optim::SGD optimizer(task.module().parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    pt::Trainer<MlpClassifier, example::LrFinder> trainer(
        task, optimizer, example::LrFinder({.min_lr = 1e-5, .max_lr = 10.0, .steps = steps}));
    trainer.fit(loader, {.epochs = 1, .max_steps = steps});
    const auto& finder = trainer.get<example::LrFinder>();
    std::printf("suggested learning rate: %.3g\n", finder.suggestion());
    // [/snippet:use]

    const auto& r = finder.rates();
    for (size_t i = 0; i < r.size(); i += std::max<size_t>(1, r.size() / 10))
      std::printf("  lr %9.3g  smoothed loss %.4f\n", r[i], finder.losses()[i]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_policy: error: %s\n", e.what());
    return 1;
  }
}
