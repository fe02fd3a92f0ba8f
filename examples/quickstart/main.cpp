// The first Trainer: a small MLP on Fashion-MNIST with a progress bar, then a classification report.
// docs/getting-started.md quotes the marked regions of this file.
//   quickstart [--data DIR] [--epochs N] [--limit-train-batches N]
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

// [snippet:include]
#include <torch/torch.h>                // LibTorch: the model, the loss, the optimizer
#include <policytrain/datasets.hpp>     // Fashion-MNIST's files
#include <policytrain/policytrain.hpp>  // the Trainer and the cheap policies and callbacks
namespace pt = policytrain;
// [/snippet:include]

// [snippet:task]
// The task: the model, and what one training step and one validation step compute.
struct MlpClassifier {
  torch::nn::Sequential net{torch::nn::Flatten(), torch::nn::Linear(28 * 28, 128), torch::nn::ReLU(),
                            torch::nn::Linear(128, 10)};

  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) {
    return torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
  }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = net->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};
// [/snippet:task]

int main(int argc, char** argv) {
  std::filesystem::path dir = pt::data::default_fashion_mnist_dir();
  int64_t epochs = 1, limit = -1;
  CLI::App app{"The first Trainer: an MLP on Fashion-MNIST"};
  app.add_option("--data", dir, "Directory with the Fashion-MNIST IDX files")->check(CLI::ExistingDirectory);
  app.add_option("--epochs", epochs, "Epochs to train")->check(CLI::PositiveNumber);
  app.add_option("--limit-train-batches", limit, "Batches per epoch at most (-1: all)");
  CLI11_PARSE(app, argc, argv);
  try {
    torch::manual_seed(0);
    // [snippet:data]
    auto train = pt::data::load_fashion_mnist(dir, /*train=*/true);
    auto test = pt::data::load_fashion_mnist(dir, /*train=*/false);
    pt::data::TensorLoader train_loader(train.x, train.y, {.batch_size = 64, .shuffle = true, .seed = 0});
    pt::data::TensorLoader test_loader(test.x, test.y, {.batch_size = 1000, .shuffle = false});
    // [/snippet:data]

    // [snippet:trainer]
    MlpClassifier task;
    torch::optim::AdamW optimizer(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
    pt::Trainer<MlpClassifier, pt::callbacks::ProgressBar> trainer(task, optimizer);
    auto result = trainer.fit(train_loader, test_loader, {.epochs = epochs, .limit_train_batches = limit});
    // [/snippet:trainer]

    // [snippet:report]
    pt::Metrics metrics = trainer.evaluate(test_loader);
    std::printf("%s", metrics.report(pt::data::fashion_mnist_labels()).to_string().c_str());
    std::printf("%lld optimizer steps, %.0f samples/s\n", static_cast<long long>(result.global_steps),
                result.samples_per_second());
    // [/snippet:report]
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quickstart: error: %s\n", e.what());
    return 1;
  }
}
