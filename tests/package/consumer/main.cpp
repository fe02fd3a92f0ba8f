// A consumer of the packaged library: composes two policies (precision::Fp32 and callbacks::ProgressBar)
// around a one-layer task on random, linearly separable data, and checks that training lowered the loss.
// Built by tests/package in three ways (find_package, add_subdirectory, FetchContent) and by the Conan
// recipe's test_package.
#include <cstdio>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <policytrain/all.hpp>

// consumer and consumer_compiled link policytrain::policytrain and policytrain::compiled, which must compile this file
// with separate compilation; consumer_header_only links policytrain::header_only, which must not.
#if defined(POLICYTRAIN_CONSUMER_SEPARATE) && !defined(POLICYTRAIN_SEPARATE_COMPILATION)
#  error "policytrain consumer: linking policytrain::policytrain did not define POLICYTRAIN_SEPARATE_COMPILATION"
#endif
#if defined(POLICYTRAIN_CONSUMER_HEADER_ONLY) && (defined(POLICYTRAIN_SEPARATE_COMPILATION) || !defined(POLICYTRAIN_HEADER_ONLY))
#  error "policytrain consumer: linking policytrain::header_only compiled this file with separate compilation"
#endif

namespace pt = policytrain;

struct LinearTask {
  torch::nn::Linear net{4, 2};
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net(b.x), b.y); }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = net(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};

int main() {
  torch::manual_seed(0);
  auto x = torch::randn({256, 4});
  auto y = (x.select(1, 0) + x.select(1, 1) > 0).to(torch::kLong);  // separable by a hyperplane
  pt::data::TensorLoader loader(x, y, {.batch_size = 32, .seed = 1});

  LinearTask task;
  torch::optim::SGD optimizer(task.module().parameters(), torch::optim::SGDOptions(0.5));
  pt::Trainer<LinearTask, pt::precision::Fp32, pt::callbacks::ProgressBar> trainer(
      task, optimizer, pt::precision::Fp32{pt::NonFinite::error}, pt::callbacks::ProgressBar({.force_tty = 0}));

  const double before = trainer.evaluate(loader).loss;
  auto result = trainer.fit(loader, loader, {.epochs = 3});
  const double after = result.validation.back().loss;
#ifdef POLICYTRAIN_WITH_CUDA
  const char* cuda = "with CUDA";
#else
  const char* cuda = "CPU only";
#endif
#ifdef POLICYTRAIN_SEPARATE_COMPILATION
  const char* compiled = ", separately compiled";
#else
  const char* compiled = "";
#endif
  std::printf("policytrain consumer (%s%s): %lld steps, loss %.4f -> %.4f, accuracy %.3f\n", cuda, compiled,
              static_cast<long long>(result.global_steps), before, after, result.validation.back().accuracy);
  if (result.global_steps != 3 * 8 || !(after < 0.5 * before)) {
    std::fprintf(stderr, "policytrain consumer: expected 24 steps and the loss at least halved\n");
    return 1;
  }
#ifdef POLICYTRAIN_CONSUMER_MALLOC
  // policytrain_link_malloc(consumer_compiled tcmalloc): the process calls tcmalloc's malloc.
  if (pt::malloc_library().rfind(POLICYTRAIN_CONSUMER_MALLOC, 0) != 0) {
    std::fprintf(stderr, "policytrain consumer: malloc comes from '%s'; expected %s (policytrain_link_malloc)\n",
                 pt::malloc_library().c_str(), POLICYTRAIN_CONSUMER_MALLOC);
    return 1;
  }
#endif
  return 0;
}
