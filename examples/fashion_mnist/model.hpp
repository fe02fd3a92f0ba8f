#pragma once
// The Fashion-MNIST CNN and its task: shared by the main job, the tests and the benchmarks.
#include <torch/torch.h>

#include <policytrain/policytrain.hpp>

namespace fmnist {

/// 2 conv + batch norm + max-pool blocks, then 2 fully connected layers (about 420K parameters).
struct CnnImpl : torch::nn::Module {
  explicit CnnImpl(int64_t width = 32)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, width, 3).padding(1).bias(false)))),
        bn1(register_module("bn1", torch::nn::BatchNorm2d(width))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(width, 2 * width, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", torch::nn::BatchNorm2d(2 * width))),
        fc1(register_module("fc1", torch::nn::Linear(2 * width * 7 * 7, 128))),
        drop(register_module("drop", torch::nn::Dropout(0.25))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(bn1(conv1(x))), 2);
    x = torch::max_pool2d(torch::relu(bn2(conv2(x))), 2);
    x = drop(torch::relu(fc1(x.flatten(1))));
    return fc2(x);
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Linear fc1;
  torch::nn::Dropout drop;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Cnn);

/// The task: what a training step and a validation step of the classifier compute.
struct Classifier {
  Cnn net;
  explicit Classifier(int64_t width = 32) : net(width) {}
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const policytrain::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
  policytrain::Prediction validation_step(const policytrain::Batch& b) {
    auto out = net->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};

}  // namespace fmnist
