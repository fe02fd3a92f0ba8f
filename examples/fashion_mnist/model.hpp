#pragma once
// The Fashion-MNIST CNN and its task: shared by the main job, the tests and the benchmarks.
#include <chrono>
#include <thread>

#include <torch/torch.h>

#include <policytrain/all.hpp>
#include <policytrain/parallel/fully_shard.hpp>

namespace fmnist {

/// The order of the operations in each convolution block.
enum class BlockOrder {
  conv_bn_relu_pool,  ///< conv, batch norm, ReLU, 2x2 max pooling (the textbook block)
  conv_pool_bn_relu,  ///< conv, 2x2 max pooling, batch norm, ReLU: the same kind of function (a ReLU of a per-channel
                      ///< affine map commutes with max pooling wherever the batch norm's scale is positive), with batch
                      ///< norm and ReLU on a quarter of the values: faster on a CPU, where they are memory-bound
};

/// 2 conv + batch norm + max-pool blocks, then 2 fully connected layers (about 420K parameters).
/// `conv3` > 0 adds a third convolution of that many channels at 7x7 (conv, batch norm, ReLU, no pooling) before the
/// fully connected layers: more capacity where a convolution is cheap (a quarter of conv 2's positions).
/// With `recompute`, each of the three blocks (conv 1, conv 2, the classifier head with conv 3) is run under
/// memory::recompute when training: only the blocks' inputs are kept for backward.
/// With `units` (the main job's `--zero 3`), every layer with parameters is a parallel::FullyShard unit, registered
/// under the layer's own name (the parameter names stay): stage 3 gathers its parameters just before its compute
/// and frees them after. Without stage 3 a unit calls its layer directly.
struct CnnImpl : torch::nn::Module {
  explicit CnnImpl(int64_t width = 32, bool recompute = false, BlockOrder order = BlockOrder::conv_bn_relu_pool,
                   int64_t conv3_channels = 0, bool units = false)
      : recompute(recompute),
        order(order),
        units(units),
        conv1(add("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, width, 3).padding(1).bias(false)))),
        bn1(add("bn1", torch::nn::BatchNorm2d(width))),
        conv2(add("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(width, 2 * width, 3).padding(1).bias(false)))),
        bn2(add("bn2", torch::nn::BatchNorm2d(2 * width))),
        fc1(add("fc1", torch::nn::Linear((conv3_channels > 0 ? conv3_channels : 2 * width) * 7 * 7, 128))),
        drop(register_module("drop", torch::nn::Dropout(0.25))),
        fc2(add("fc2", torch::nn::Linear(128, 10))) {
    if (conv3_channels > 0) {  // registered only when used: the two-block CNN keeps its parameter names
      conv3 = add("conv3", torch::nn::Conv2d(torch::nn::Conv2dOptions(2 * width, conv3_channels, 3).padding(1).bias(false)));
      bn3 = add("bn3", torch::nn::BatchNorm2d(conv3_channels));
    }
  }
  /// Registers `m` as `name`, or (with `units`) a parallel::FullyShard unit around it under that name.
  template <class M>
  M add(const std::string& name, M m) {
    if (!units) return register_module(name, m);
    unit_of.emplace_back(m.get(), torch::nn::AnyModule(register_module(name, policytrain::parallel::FullyShard<M>(m))));
    return m;
  }
  /// `m(x)`, through its unit when it has one.
  template <class M>
  torch::Tensor call(M& m, const torch::Tensor& x) {
    for (auto& [layer, unit] : unit_of)
      if (layer == m.get()) return unit.forward(x);
    return m(x);
  }

  torch::Tensor forward(torch::Tensor x) {
    if (recompute && is_training()) {
      // [snippet:recompute-cnn]
      namespace mem = policytrain::memory;
      x = mem::recompute([this](const torch::Tensor& in) { return block(in, conv1, bn1); }, x);
      x = mem::recompute([this](const torch::Tensor& in) { return block(in, conv2, bn2); }, x);
      return mem::recompute([this](const torch::Tensor& in) { return head(in); }, x);
      // [/snippet:recompute-cnn]
    }
    return head(block(block(x, conv1, bn1), conv2, bn2));
  }
  torch::Tensor block(const torch::Tensor& x, torch::nn::Conv2d& conv, torch::nn::BatchNorm2d& bn) {
    if (order == BlockOrder::conv_pool_bn_relu) return torch::relu(norm(torch::max_pool2d(call(conv, x), 2), bn));
    return torch::max_pool2d(torch::relu(norm(call(conv, x), bn)), 2);
  }
  torch::Tensor head(const torch::Tensor& x) {
    const auto features = conv3 ? torch::relu(norm(call(conv3, x), bn3)) : x;
    return call(fc2, drop(torch::relu(call(fc1, features.flatten(1)))));
  }
  /// batch_norm(x, bn), through bn's unit when it has one (in a recompute too: the unit gathers its weights for
  /// the functional batch norm that reads them).
  torch::Tensor norm(const torch::Tensor& x, torch::nn::BatchNorm2d& bn) {
    if (!policytrain::memory::recomputing()) return call(bn, x);
    for (auto& [layer, unit] : unit_of)
      if (layer == bn.get())
        if (auto* u = dynamic_cast<policytrain::parallel::FullyShardedUnit*>(unit.ptr().get()))
          return u->run(x, unit.ptr()->is_training(), [&bn](const torch::Tensor& in) { return batch_norm(in, bn); });
    return batch_norm(x, bn);
  }
  /// `bn(x)`, except in a recompute, which normalises with the batch statistics again without updating the
  /// running statistics a second time (the same arithmetic: the output is bit for bit the forward's).
  static torch::Tensor batch_norm(const torch::Tensor& x, torch::nn::BatchNorm2d& bn) {
    if (!policytrain::memory::recomputing()) return bn(x);
    namespace F = torch::nn::functional;
    return F::batch_norm(x, torch::Tensor(), torch::Tensor(),
                         F::BatchNormFuncOptions().weight(bn->weight).bias(bn->bias).training(true).eps(bn->options.eps()));
  }
  /// Sets every batch norm's momentum and epsilon (LibTorch's defaults: 0.1 and 1e-5). A short run takes few
  /// steps, so the running statistics that evaluation uses should forget the first, untrained steps faster (airbench
  /// trains CIFAR-10 in ~10 epochs with momentum 0.6 and epsilon 1e-12).
  void set_batch_norm(double momentum, double eps) {
    for (auto* bn : {&bn1, &bn2, &bn3})
      if (!bn->is_empty()) (*bn)->options.momentum(momentum).eps(eps);
  }
  /// airbench's patch-whitening initialisation of the first convolution: with C the (uncentred) covariance of the
  /// k x k patches of `images` (N x 1 x H x W, standardised as the model sees them; every position without padding)
  /// and C = V diag(l) V^T, the first 2 k^2 filters become v_i / sqrt(l_i + eps) and their negatives, largest l_i
  /// first: the convolution's first k^2 outputs are the patches' decorrelated components (covariance
  /// diag(l / (l + eps))), their negatives keep both signs through the ReLU. Filters past 2 k^2 keep their random
  /// initialisation (the main job's first convolution is wider than airbench's 2 k^2 = 24 for 2 x 2 x 3). With
  /// `frozen`, the convolution's weight no longer trains (requires_grad off: set it before the optimizer takes the
  /// parameters; the fused optimizers skip a parameter without a gradient). Returns the eigenvalues, largest first.
  torch::Tensor whiten_first_conv(const torch::Tensor& images, double eps, bool frozen) {
    torch::NoGradGuard g;
    const int64_t k = (*conv1->options.kernel_size())[0];
    const auto x = images.to(torch::kDouble);
    // Patches as rows: unfold without padding, (N, k*k, positions) -> (N * positions, k*k).
    const auto patches = torch::nn::functional::unfold(x, torch::nn::functional::UnfoldFuncOptions({k, k}))
                             .transpose(1, 2).reshape({-1, k * k});
    const auto cov = patches.t().mm(patches) / static_cast<double>(patches.size(0));
    auto [eigenvalues, eigenvectors] = torch::linalg_eigh(cov, "U");  // ascending
    eigenvalues = eigenvalues.flip(0);
    const auto v = eigenvectors.t().flip(0);  // rows: eigenvectors, largest eigenvalue first
    const auto scaled = v / (eigenvalues + eps).sqrt().unsqueeze(1);
    const auto filters = torch::cat({scaled, -scaled}).reshape({2 * k * k, 1, k, k});
    const int64_t n = std::min<int64_t>(filters.size(0), conv1->weight.size(0));
    conv1->weight.slice(0, 0, n).copy_(filters.slice(0, 0, n).to(conv1->weight.dtype()));
    if (frozen) conv1->weight.requires_grad_(false);
    return eigenvalues;
  }
  bool recompute;
  BlockOrder order;
  bool units;
  /// With `units`: each layer and its parallel::FullyShard unit.
  std::vector<std::pair<const torch::nn::Module*, torch::nn::AnyModule>> unit_of;
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Linear fc1;
  torch::nn::Dropout drop;
  torch::nn::Linear fc2;
  torch::nn::Conv2d conv3{nullptr};  ///< empty unless conv3_channels > 0
  torch::nn::BatchNorm2d bn3{nullptr};
};
TORCH_MODULE(Cnn);

/// The task: what a training step and a validation step of the classifier compute.
struct Classifier {
  Cnn net;
  /// Label smoothing of the training loss (0: plain cross-entropy); the validation loss is plain cross-entropy.
  double label_smoothing = 0;
  /// Test-time augmentation: a validation step averages the logits of each image and of its left-right flip.
  bool tta_flip = false;
  /// Slept in every training step (--step-delay-ms): a run that lasts without using the CPU.
  std::chrono::milliseconds step_delay{0};
  explicit Classifier(int64_t width = 32, bool recompute = false, double label_smoothing = 0,
                      BlockOrder order = BlockOrder::conv_bn_relu_pool, int64_t conv3_channels = 0, bool units = false)
      : net(width, recompute, order, conv3_channels, units), label_smoothing(label_smoothing) {}
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const policytrain::Batch& b) {
    namespace F = torch::nn::functional;
    if (step_delay.count() > 0) std::this_thread::sleep_for(step_delay);
    return F::cross_entropy(net->forward(b.x), b.y, F::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
  }
  policytrain::Prediction validation_step(const policytrain::Batch& b) {
    auto out = net->forward(b.x);
    if (tta_flip) out = (out + net->forward(b.x.flip({-1}))) / 2;  // NCHW: the last dimension is the width
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};

}  // namespace fmnist
