// The main job's sample-efficiency techniques for short runs (issue 55): patch whitening of the first convolution
// and the batch norms' momentum and epsilon, each against its formula on seeded inputs.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "fashion_mnist/model.hpp"

namespace {

namespace F = torch::nn::functional;

/// Seeded images with correlated neighbouring pixels (a 3 x 3 blur of noise), as natural images have: the patch
/// covariance is then far from a multiple of the identity, so whitening has something to undo.
torch::Tensor correlated_images(int64_t n, uint64_t seed) {
  torch::manual_seed(seed);
  const auto noise = torch::randn({n, 1, 30, 30}, torch::kDouble);
  return F::avg_pool2d(noise, F::AvgPool2dFuncOptions(3).stride(1)) * 3 + 0.5;  // 28 x 28
}

}  // namespace

TEST_CASE("whiten_first_conv: the first k^2 filters decorrelate the k x k patches (covariance diag(l / (l + eps))), the next k^2 are their negatives, the rest are kept") {
  for (const uint64_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    const auto images = correlated_images(48, seed);
    const double eps = std::pow(10.0, -1 - static_cast<double>(torch::randint(4, {1}).item<int64_t>()));  // 1e-1..1e-4
    CAPTURE(eps);
    fmnist::Cnn net(24);
    const auto before = net->conv1->weight.detach().clone();
    const auto eigenvalues = net->whiten_first_conv(images.to(torch::kFloat), eps, /*frozen=*/seed == 2);
    const auto w = net->conv1->weight.detach().to(torch::kDouble);
    REQUIRE(eigenvalues.size(0) == 9);
    // The oracle: the covariance of the first 9 channels' outputs over every unpadded position, computed by a
    // convolution (not by the eigendecomposition the code uses), against diag(l / (l + eps)).
    const auto out = F::conv2d(images, w.slice(0, 0, 9)).transpose(0, 1).reshape({9, -1});
    const auto cov = out.mm(out.t()) / static_cast<double>(out.size(1));
    const auto expected = torch::diag(eigenvalues / (eigenvalues + eps));
    CHECK(torch::allclose(cov, expected, /*rtol=*/1e-4, /*atol=*/1e-5));
    // Largest eigenvalue first, and their sum is the patches' mean square (the covariance's trace).
    CHECK(eigenvalues[0].item<double>() >= eigenvalues[8].item<double>());
    const auto patches = F::unfold(images, F::UnfoldFuncOptions({3, 3}));
    CHECK(eigenvalues.sum().item<double>() == doctest::Approx(patches.pow(2).sum(1).mean().item<double>()).epsilon(1e-4));
    CHECK(torch::equal(w.slice(0, 9, 18), -w.slice(0, 0, 9)));
    CHECK(torch::equal(net->conv1->weight.detach().slice(0, 18), before.slice(0, 18)));
    CHECK(net->conv1->weight.requires_grad() == (seed != 2));
  }
}

TEST_CASE("set_batch_norm: every batch norm updates its running mean by the momentum and normalises with the epsilon") {
  torch::manual_seed(55);
  const double momentum = 0.3 + 0.6 * torch::rand({1}).item<double>(), eps = 1e-3 * (1 + torch::rand({1}).item<double>());
  CAPTURE(momentum);
  fmnist::Cnn net(8, false, fmnist::BlockOrder::conv_bn_relu_pool, 4);
  net->set_batch_norm(momentum, eps);
  for (auto* bn : {&net->bn1, &net->bn2, &net->bn3}) {
    CHECK((*bn)->options.momentum().value() == momentum);
    CHECK((*bn)->options.eps() == eps);
  }
  const auto x = torch::randn({16, 1, 28, 28});
  net->train();
  net->forward(x);
  // Running mean from 0: momentum times the batch mean of conv 1's output (computed here by F::conv2d).
  const auto batch_mean = F::conv2d(x, net->conv1->weight, F::Conv2dFuncOptions().padding(1)).mean({0, 2, 3});
  CHECK(torch::allclose(net->bn1->running_mean, momentum * batch_mean.detach(), 1e-5, 1e-6));
  // Evaluation normalises with the running statistics and this epsilon.
  net->eval();
  const auto y = torch::randn({2, 8, 5, 5});
  const auto expected = (y - net->bn1->running_mean.view({1, -1, 1, 1})) /
                            (net->bn1->running_var.view({1, -1, 1, 1}) + eps).sqrt() * net->bn1->weight.view({1, -1, 1, 1}) +
                        net->bn1->bias.view({1, -1, 1, 1});
  CHECK(torch::allclose(net->bn1->forward(y), expected.detach(), 1e-5, 1e-6));
}
