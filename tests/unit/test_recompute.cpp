// memory::recompute (activation checkpointing): gradients equal those of the plain forward bit for bit (fp32 and
// bf16 autocast, dropout on, deep MLP and the main job's CNN), equal those of PyTorch's
// torch.utils.checkpoint.checkpoint(use_reentrant=False) on the same weights, through the Trainer with
// accumulation; the activation memory it saves, counted exactly; MetricsLog's per-step peak memory.
#include <doctest/doctest.h>

#include <cstdlib>
#include <array>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <malloc.h>

#include "fashion_mnist/model.hpp"
#include "unit/deep_mlp.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace mem = policytrain::memory;
namespace fs = std::filesystem;

namespace {

using testing::deep_mlp;

/// Parameter gradients (and the input's, when it requires grad) of one cross-entropy step, after seeding the RNG.
std::vector<torch::Tensor> grads_of(torch::nn::Module& m, const std::function<torch::Tensor(torch::Tensor)>& forward,
                                    torch::Tensor x, const torch::Tensor& y, uint64_t seed) {
  m.zero_grad();
  if (x.requires_grad()) x.mutable_grad() = torch::Tensor();
  torch::manual_seed(seed);
  torch::nn::functional::cross_entropy(forward(x), y).backward();
  std::vector<torch::Tensor> g;
  for (auto& p : m.parameters()) g.push_back(p.grad().clone());
  if (x.requires_grad()) g.push_back(x.grad().clone());
  return g;
}

void check_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("gradient " << i << ": max |diff| " << (a[i].defined() && b[i].defined() ? (a[i] - b[i]).abs().max().item<double>() : -1.0));
    REQUIRE(a[i].defined());
    REQUIRE(b[i].defined());
    CHECK(torch::equal(a[i], b[i]));
  }
}

/// A module whose tensors are exported under '/'-separated names (export_weights takes a module).
struct Bag : torch::nn::Module {
  void add(std::string name, const torch::Tensor& t) {
    for (auto& c : name)
      if (c == '.') c = '/';
    register_buffer(name, t.detach().clone());
  }
};

bool python_has_torch() { return std::system("python3 -c 'import torch' >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("recompute gives the gradients of the plain forward bit for bit: deep MLP with dropout, fp32") {
  auto net = deep_mlp(8, 32, 5, 0.3, 1);
  auto x = torch::randn({16, 32});
  auto y = torch::randint(0, 5, {16});
  net->train();
  for (const bool input_grad : {false, true}) {
    CAPTURE(input_grad);
    auto xi = x.clone().requires_grad_(input_grad);
    const auto want = grads_of(*net, [&](torch::Tensor in) { return net->forward(in); }, xi, y, 42);
    for (const int64_t every : {1, 2, 3, 9}) {
      CAPTURE(every);
      check_equal(grads_of(*net, [&](torch::Tensor in) { return mem::recompute_sequential(net, every, in); }, xi, y, 42),
                  want);
    }
    // A different seed draws other dropout masks: the equality above is not one of constant gradients.
    const auto other = grads_of(*net, [&](torch::Tensor in) { return net->forward(in); }, xi, y, 43);
    CHECK_FALSE(torch::equal(other[0], want[0]));
  }
  // The module wrapper: same parameter names as the plain blocks, same gradients.
  torch::nn::Sequential wrapped;
  for (size_t i = 0; i < net->size(); ++i) {
    if (i + 1 < net->size())
      wrapped->push_back(mem::Recomputed<testing::MlpBlock>(
          testing::MlpBlock(std::dynamic_pointer_cast<testing::MlpBlockImpl>(net[i]))));
    else
      wrapped->push_back(mem::Recomputed<torch::nn::Linear>(
          torch::nn::Linear(std::dynamic_pointer_cast<torch::nn::LinearImpl>(net[i]))));
  }
  std::vector<std::string> names, wrapped_names;
  for (auto& p : net->named_parameters()) names.push_back(p.key());
  for (auto& p : wrapped->named_parameters()) wrapped_names.push_back(p.key());
  CHECK(names == wrapped_names);
  wrapped->train();
  const auto want = grads_of(*net, [&](torch::Tensor in) { return net->forward(in); }, x, y, 7);
  check_equal(grads_of(*wrapped, [&](torch::Tensor in) { return wrapped->forward(in); }, x, y, 7), want);
}

TEST_CASE("recompute: several inputs and outputs, non-tensor arguments, inputs that do not require grad") {
  auto a = torch::randn({4, 3}, torch::requires_grad());
  auto b = torch::randn({3, 5}, torch::requires_grad());
  auto c = torch::randn({4, 5});  // no grad
  auto w = torch::randn({4, 5}, torch::requires_grad());
  // A parameter used inside (w, captured) gets its gradient although it is not an argument.
  auto fn = [&w](const torch::Tensor& p, double s, const torch::Tensor& q, int k, const torch::Tensor& r) {
    auto h = torch::dropout(torch::mm(p, q) * s + r, 0.5, /*train=*/true) * w;
    return std::make_tuple(h.pow(k), torch::sin(p), h.sum(1));
  };
  auto run = [&](bool rc) {
    for (auto* t : {&a, &b, &w}) t->mutable_grad() = torch::Tensor();
    torch::manual_seed(3);
    auto [o1, o2, o3] = rc ? mem::recompute(fn, a, 1.5, b, 2, c) : fn(a, 1.5, b, 2, c);
    CHECK(o1.requires_grad());
    // o3 is not used: its gradient is undefined, and backward copes.
    (o1.sum() + o2.pow(2).sum()).backward();
    return std::vector<torch::Tensor>{a.grad().clone(), b.grad().clone(), w.grad().clone()};
  };
  check_equal(run(true), run(false));
  CHECK_FALSE(c.grad().defined());

  // Only non-grad tensors in: the parameters inside still get their gradients (through the anchor input).
  auto v = torch::randn({4, 3});
  auto lin = torch::nn::Linear(3, 2);
  auto out = mem::recompute([&](const torch::Tensor& in) { return lin(in); }, v);
  out.sum().backward();
  REQUIRE(lin->weight.grad().defined());
  CHECK(torch::allclose(lin->weight.grad(), v.sum(0).expand({2, 3})));
  CHECK(lin->bias.grad().equal(torch::full({2}, 4.0)));

  // A vector result; and under no-grad fn runs directly (no graph).
  auto vs = mem::recompute([](const torch::Tensor& p) { return std::vector<torch::Tensor>{p * 2, p + 1}; }, a);
  REQUIRE(vs.size() == 2);
  CHECK(vs[0].grad_fn() != nullptr);
  {
    torch::NoGradGuard g;
    auto r = mem::recompute([](const torch::Tensor& p) { return p * 2; }, a);
    CHECK(r.grad_fn() == nullptr);
  }
}

TEST_CASE("recompute: tensors inside containers (a U-Net's skip list in a std::vector, std::array, std::tuple, "
          "std::pair, std::optional, std::map, nested) get their gradients, bit for bit those of the plain forward") {
  torch::manual_seed(11);
  auto x = torch::randn({4, 6}, torch::requires_grad());
  auto plain = torch::randn({4, 6});  // in a container too, requiring no grad
  torch::nn::Linear enc(6, 6), dec(6, 6);
  using Skips = std::vector<torch::Tensor>;
  using Nested = std::vector<std::pair<int, std::optional<torch::Tensor>>>;
  // The decoder segment: the encoder's activations (not leaves: their graph runs back to x and enc) come in
  // containers of every standard kind, as a U-Net's skip connections do.
  auto decoder = [&](const torch::Tensor& h, const Skips& skips, const std::array<torch::Tensor, 2>& arr,
                     const std::tuple<torch::Tensor, int>& tup, const std::pair<torch::Tensor, double>& pr,
                     const std::optional<torch::Tensor>& some, const std::optional<torch::Tensor>& none,
                     const std::map<std::string, torch::Tensor>& named, const Nested& nested) {
    auto out = dec(h);
    for (const auto& s : skips) out = out + torch::tanh(s);
    out = out * arr[0] + arr[1];
    out = out + std::get<0>(tup) * std::get<1>(tup);
    out = out * pr.first + pr.second;
    if (some) out = out + *some;
    if (none) out = out * 0;
    for (const auto& [k, v] : named) out = out + v.sin();
    for (const auto& [k, v] : nested)
      if (v) out = out + *v * k;
    return torch::dropout(out, 0.3, /*train=*/true);
  };
  auto run = [&](bool rc) {
    for (auto* t : {&x, &enc->weight, &enc->bias, &dec->weight, &dec->bias}) t->mutable_grad() = torch::Tensor();
    torch::manual_seed(5);
    auto e1 = torch::relu(enc(x)), e2 = e1 * 2, e3 = e1.pow(2), e4 = torch::sigmoid(e1);
    Skips skips{e1, e2, plain};
    std::array<torch::Tensor, 2> arr{e3, e1 + 1};
    std::tuple<torch::Tensor, int> tup{e4, 3};
    std::pair<torch::Tensor, double> pr{e2 - 1, 0.5};
    std::optional<torch::Tensor> some = e3 * e4, none;
    std::map<std::string, torch::Tensor> named{{"a", e1 * 3}, {"b", e4}};
    Nested nested{{2, e3}, {5, std::nullopt}, {-1, e2}};
    auto out = rc ? mem::recompute(decoder, e2, skips, arr, tup, pr, some, none, named, nested)
                  : decoder(e2, skips, arr, tup, pr, some, none, named, nested);
    out.pow(2).sum().backward();
    return std::vector<torch::Tensor>{x.grad().clone(), enc->weight.grad().clone(), enc->bias.grad().clone(),
                                      dec->weight.grad().clone(), dec->bias.grad().clone()};
  };
  const auto want = run(false);
  check_equal(run(true), want);
  CHECK_FALSE(plain.grad().defined());
  // What is taken and what is refused at compile time (tests/compile_fail/recompute_opaque_argument.cpp shows the
  // message): views and pointers, and types recompute cannot see into, unless wrapped in by_value.
  namespace d = mem::detail;
  struct Opaque {
    torch::Tensor t;
  };
  static_assert(d::ArgTraits<std::map<int, std::vector<std::optional<torch::Tensor>>>>::ok);
  static_assert(d::ArgTraits<std::deque<std::tuple<int, torch::Tensor>>>::tensors);
  static_assert(d::ArgTraits<std::vector<double>>::ok && !d::ArgTraits<std::vector<double>>::tensors);
  static_assert(d::ArgTraits<torch::nn::Linear>::ok && d::ArgTraits<const char*>::ok);
  static_assert(d::ArgTraits<at::TensorList>::view && d::ArgTraits<std::vector<torch::Tensor*>>::view);
  static_assert(d::ArgTraits<std::string_view>::view && !d::ArgTraits<std::span<torch::Tensor>>::ok);
  static_assert(!d::ArgTraits<Opaque>::ok && !d::ArgTraits<std::shared_ptr<torch::Tensor>>::ok);
  static_assert(!d::ArgTraits<std::vector<Opaque>>::ok && d::ArgTraits<d::ByValue<Opaque>>::ok);
  // by_value: the value itself reaches fn.
  auto k = mem::recompute([](const torch::Tensor& h, const Opaque& o) { return h * o.t; }, x, mem::by_value(Opaque{torch::full({4, 6}, 2.0)}));
  k.sum().backward();
}

TEST_CASE("recompute restores the RNG state: dropout draws the same mask, and the RNG goes on as without") {
  auto x = torch::ones({1000}, torch::requires_grad());
  torch::manual_seed(5);
  auto y = mem::recompute([](const torch::Tensor& t) { return torch::dropout(t, 0.5, true); }, x);
  const auto after_forward = torch::rand({3});
  y.sum().backward();
  // d(sum dropout(x))/dx is the mask / (1 - p): the kept elements of the forward, scaled.
  CHECK(torch::equal(x.grad(), (y.detach() != 0).to(torch::kFloat) * 2.0));
  torch::manual_seed(5);
  (void)torch::dropout(torch::ones({1000}), 0.5, true);
  CHECK(torch::equal(torch::rand({3}), after_forward));
}

TEST_CASE("the CNN with recompute: the gradients and batch-norm statistics of the plain CNN, dropout on") {
  for (const auto& [order, conv3] : {std::pair{fmnist::BlockOrder::conv_bn_relu_pool, int64_t{0}},
                                     std::pair{fmnist::BlockOrder::conv_pool_bn_relu, int64_t{0}},
                                     std::pair{fmnist::BlockOrder::conv_pool_bn_relu, int64_t{24}}}) {
    CAPTURE(static_cast<int>(order));
    CAPTURE(conv3);
    torch::manual_seed(11);
    fmnist::Cnn plain(8, false, order, conv3), rc(8, /*recompute=*/true, order, conv3);
    testing::copy_weights(*rc, *plain);
    auto x = torch::randn({16, 1, 28, 28});
    auto y = torch::randint(0, 10, {16});
    plain->train();
    rc->train();
    for (const bool bf16 : {false, true}) {
      CAPTURE(bf16);
      std::optional<pt::precision::AutocastGuard> ac;
      if (bf16) ac.emplace(c10::DeviceType::CPU, c10::ScalarType::BFloat16);
      const auto want = grads_of(*plain, [&](torch::Tensor in) { return plain->forward(in); }, x, y, 21);
      const auto got = grads_of(*rc, [&](torch::Tensor in) { return rc->forward(in); }, x, y, 21);
      check_equal(got, want);
      // The recompute did not update the running statistics a second time.
      auto pb = plain->named_buffers();
      for (auto& b : rc->named_buffers()) {
        CAPTURE(b.key());
        CHECK(torch::equal(b.value(), pb[b.key()]));
      }
    }
  }
}

TEST_CASE("the CNN's two block orders: the same function in evaluation, where batch norm is a positive affine map") {
  // max pooling commutes with a non-decreasing map: with positive batch-norm scales, relu(bn(pool(x))) equals
  // pool(relu(bn(x))). In training they differ: the batch statistics are taken over the pooled values.
  torch::manual_seed(12);
  fmnist::Cnn textbook(8), pool_first(8, false, fmnist::BlockOrder::conv_pool_bn_relu);
  CHECK(pool_first->named_parameters().keys() == textbook->named_parameters().keys());  // checkpoints move between them
  torch::NoGradGuard ng;
  for (auto* bn : {&textbook->bn1, &textbook->bn2}) {
    (*bn)->weight.uniform_(0.5, 2.0);
    (*bn)->bias.uniform_(-1.0, 1.0);
    (*bn)->running_mean.uniform_(-1.0, 1.0);
    (*bn)->running_var.uniform_(0.5, 2.0);
  }
  testing::copy_weights(*pool_first, *textbook);
  auto running = textbook->named_buffers();
  for (auto& b : pool_first->named_buffers()) b.value().copy_(running[b.key()]);
  const auto x = torch::randn({16, 1, 28, 28});
  // The oracle, in plain LibTorch: the two convolution blocks written out with functional ops, in either order.
  auto features_by_hand = [&](bool pool_early, bool training) {
    namespace F = torch::nn::functional;
    auto block = [&](torch::Tensor h, torch::nn::Conv2d& conv, torch::nn::BatchNorm2d& bn) {
      h = F::conv2d(h, conv->weight, F::Conv2dFuncOptions().padding(1));
      auto opts = F::BatchNormFuncOptions().weight(bn->weight).bias(bn->bias).training(training);
      auto norm = [&](const torch::Tensor& t) {
        return training ? F::batch_norm(t, torch::Tensor(), torch::Tensor(), opts)
                        : F::batch_norm(t, bn->running_mean, bn->running_var, opts);
      };
      return pool_early ? torch::relu(norm(torch::max_pool2d(h, 2))) : torch::max_pool2d(torch::relu(norm(h)), 2);
    };
    return block(block(x, textbook->conv1, textbook->bn1), textbook->conv2, textbook->bn2).flatten(1);
  };
  auto features = [&](fmnist::Cnn& net) {
    return net->block(net->block(x, net->conv1, net->bn1), net->conv2, net->bn2).flatten(1);
  };
  for (const bool training : {false, true}) {
    CAPTURE(training);
    textbook->train(training);
    pool_first->train(training);
    const auto ft = features(textbook), fp = features(pool_first);
    CHECK(torch::allclose(ft, features_by_hand(false, training), 1e-5, 1e-5));
    CHECK(torch::allclose(fp, features_by_hand(true, training), 1e-5, 1e-5));
    if (training) {
      CHECK_FALSE(torch::allclose(ft, fp, 1e-3, 1e-3));
    } else {
      CHECK(torch::allclose(ft, fp, 1e-5, 1e-5));
      // The whole network (the head's dropout is off in evaluation).
      CHECK(torch::allclose(textbook->forward(x), pool_first->forward(x), 1e-5, 1e-5));
    }
  }
}

TEST_CASE("the CNN's third convolution: conv, batch norm and ReLU at 7x7 before the head, as plain LibTorch computes") {
  torch::manual_seed(13);
  fmnist::Cnn two(8, false, fmnist::BlockOrder::conv_pool_bn_relu);
  fmnist::Cnn three(8, false, fmnist::BlockOrder::conv_pool_bn_relu, /*conv3_channels=*/24);
  // The two-block CNN has no conv3 (its checkpoints and parameter names stay as they were); the third block adds
  // conv3 and bn3 and widens fc1 to 24 x 7 x 7 inputs.
  CHECK_FALSE(two->named_parameters().contains("conv3.weight"));
  REQUIRE(three->named_parameters().contains("conv3.weight"));
  CHECK(three->conv3->weight.sizes() == torch::IntArrayRef({24, 16, 3, 3}));
  CHECK(three->fc1->weight.sizes() == torch::IntArrayRef({128, 24 * 7 * 7}));
  torch::NoGradGuard ng;
  three->bn3->weight.uniform_(0.5, 2.0);
  three->bn3->bias.uniform_(-1.0, 1.0);
  three->bn3->running_mean.uniform_(-1.0, 1.0);
  three->bn3->running_var.uniform_(0.5, 2.0);
  const auto x = torch::randn({16, 1, 28, 28});
  namespace F = torch::nn::functional;
  for (const bool training : {false, true}) {
    CAPTURE(training);
    three->train(training);
    three->drop->eval();  // the oracle has no dropout; everything else runs in the mode under test
    // The oracle: the third block and the head written out with functional ops on the module's own parameters.
    auto h = three->block(three->block(x, three->conv1, three->bn1), three->conv2, three->bn2);
    auto& bn = three->bn3;
    const auto opts = F::BatchNormFuncOptions().weight(bn->weight).bias(bn->bias).training(training);
    auto c = F::conv2d(h, three->conv3->weight, F::Conv2dFuncOptions().padding(1));
    c = torch::relu(training ? F::batch_norm(c, torch::Tensor(), torch::Tensor(), opts)
                             : F::batch_norm(c, bn->running_mean.clone(), bn->running_var.clone(), opts));
    const auto want = F::linear(torch::relu(F::linear(c.flatten(1), three->fc1->weight, three->fc1->bias)),
                                three->fc2->weight, three->fc2->bias);
    CHECK(torch::allclose(three->forward(x), want, 1e-5, 1e-5));
  }
}

TEST_CASE("under bf16 autocast the deep MLP's gradients with recompute equal those without, bit for bit") {
  auto net = deep_mlp(6, 64, 4, 0.2, 2);
  auto x = torch::randn({8, 64});
  auto y = torch::randint(0, 4, {8});
  net->train();
  pt::precision::AutocastGuard ac(c10::DeviceType::CPU, c10::ScalarType::BFloat16);
  const auto want = grads_of(*net, [&](torch::Tensor in) { return net->forward(in); }, x, y, 9);
  check_equal(grads_of(*net, [&](torch::Tensor in) { return mem::recompute_sequential(net, 1, in); }, x, y, 9), want);
  check_equal(grads_of(*net, [&](torch::Tensor in) { return mem::recompute_sequential(net, 2, in); }, x, y, 9), want);
  // The recompute ran in bf16 too: without autocast in the recompute the gradients would be fp32 products of
  // other values; this checks that the scope, not the caller's state at backward time, decides.
  auto h = mem::recompute([&](const torch::Tensor& in) { return net[0]->as<testing::MlpBlock>()->forward(in); }, x);
  CHECK((h.scalar_type() == torch::kBFloat16));
}

TEST_CASE("under autocast, a weight used inside a recompute and again outside it gets both gradients") {
  // The recompute's forward runs under no-grad: a bf16 copy of the weight cast there has no autograd history, and
  // autocast's weight cache must not hand it to the later use outside the recompute (its gradient would be lost).
  torch::manual_seed(8);
  auto lin = torch::nn::Linear(8, 8);
  auto x = torch::randn({4, 8});
  auto run = [&](bool rc) {
    lin->zero_grad();
    pt::precision::AutocastGuard ac(c10::DeviceType::CPU, c10::ScalarType::BFloat16);
    auto h = rc ? mem::recompute([&](const torch::Tensor& in) { return lin(in); }, x) : lin(x);
    lin(h).to(torch::kFloat).sum().backward();
    return std::vector<torch::Tensor>{lin->weight.grad().clone(), lin->bias.grad().clone()};
  };
  const auto got = run(true), want = run(false);
  // Not bit for bit: without recompute the two uses share one cached bf16 cast, whose gradients are summed in bf16;
  // with recompute each use has its own cast and the sum is in fp32 (the bias's differs by a bf16 rounding).
  // A lost contribution would differ by the whole gradient of one use.
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(torch::allclose(got[i], want[i], /*rtol=*/2e-2, /*atol=*/2e-2));
  }
  lin->zero_grad();
  {
    pt::precision::AutocastGuard ac(c10::DeviceType::CPU, c10::ScalarType::BFloat16);
    lin(lin(x).detach()).to(torch::kFloat).sum().backward();  // the outer use alone
  }
  CHECK_FALSE(torch::allclose(lin->bias.grad(), want[1], 2e-2, 2e-2));
}

TEST_CASE("PyTorch's checkpoint(use_reentrant=False) on the same module and weights gives the same gradients") {
  if (!python_has_torch()) {
    MESSAGE("python3 with torch is not installed; skipped");
    return;
  }
  constexpr double kP = 0.25;
  auto net = deep_mlp(6, 48, 7, kP, 4);
  auto x = torch::randn({12, 48});
  auto y = torch::randint(0, 7, {12});
  net->train();
  for (const std::string mode : {"fp32", "bf16"}) {
    CAPTURE(mode);
    const auto dir = testing::temp_dir("recompute-oracle-" + mode);
    net->zero_grad();
    torch::manual_seed(17);
    {
      std::optional<pt::precision::AutocastGuard> ac;
      if (mode == "bf16") ac.emplace(c10::DeviceType::CPU, c10::ScalarType::BFloat16);
      auto loss = torch::nn::functional::cross_entropy(mem::recompute_sequential(net, 1, x), y);
      ac.reset();
      loss.backward();
    }
    pt::checkpoint::export_weights(*net, dir / "weights.pt");
    Bag data, grads;
    data.add("x", x);
    data.add("y", y);
    data.add("p", torch::tensor(kP, torch::kDouble));
    for (auto& p : net->named_parameters()) grads.add(p.key(), p.value().grad());
    pt::checkpoint::export_weights(data, dir / "data.pt");
    pt::checkpoint::export_weights(grads, dir / "grads.pt");
    const std::string cmd = "OMP_NUM_THREADS=1 python3 " POLICYTRAIN_SOURCE_DIR "/tests/integration/recompute_oracle.py " +
                            dir.string() + " " + mode + " 17 > " + (dir / "out.txt").string() + " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream f(dir / "out.txt");
    const std::string out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    INFO(out);
    CHECK(rc == 0);
    fs::remove_all(dir);
  }
}

TEST_CASE("through the Trainer with accumulation, training with recompute ends with the weights of training without") {
  auto x = torch::randn({64, 1, 28, 28});
  auto y = torch::randint(0, 10, {64});
  auto train = [&](bool rc) {
    torch::manual_seed(1);
    fmnist::Classifier task(8, rc);
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    pt::data::TensorLoader loader(x, y, {.batch_size = 8, .seed = 3});
    pt::Trainer<fmnist::Classifier, pt::accumulate::Steps> t(task, opt, pt::accumulate::Steps(2));
    torch::manual_seed(2);  // the dropout masks
    t.fit(loader, {.epochs = 2});
    CHECK(t.state().global_step == 8);
    return task;
  };
  auto a = train(false);
  auto b = train(true);
  CHECK(testing::same_params(a.module(), b.module()));
  auto ba = a.module().named_buffers();
  for (auto& buf : b.module().named_buffers()) CHECK(torch::equal(buf.value(), ba[buf.key()]));
}

TEST_CASE("activation memory of a 24-layer MLP (width 2048, batch 256) with recompute of every block: counted exactly" * doctest::test_suite("extended")) {
  // Blocks Linear(2048, 2048) -> GELU. Without recompute each block keeps two tensors of S = 256 x 2048 x 4 bytes
  // = 2 MiB for backward: the Linear's input (the previous block's output) and the GELU's input. With recompute
  // of every block it keeps only its input; of every second block, only every second input. Counted after the
  // forward (the output included, the input x excluded, being allocated before the count starts):
  //   plain: 24 GELU inputs + 24 block outputs = 48 S = 96 MiB;  every block: 24 S = 48 MiB;  every 2nd: 12 S.
  constexpr int64_t kDepth = 24, kWidth = 2048, kBatch = 256;
  constexpr int64_t S = kBatch * kWidth * 4;
  // Dropout(0) is the identity and keeps nothing.
  auto net = deep_mlp(kDepth, kWidth, 0, 0.0, 0);
  net->train();
  // Gradients exist before the step (zeroed, not freed), so the count is of activations and temporaries.
  for (auto& p : net->parameters()) p.mutable_grad() = torch::zeros_like(p);
  auto x = torch::randn({kBatch, kWidth});
  struct Row {
    int64_t every, after_forward, peak;
  };
  std::vector<Row> rows;
  for (const int64_t every : {0, 1, 2}) {
    int64_t after_forward = 0, peak = 0;
    {
      mem::TensorBytesMeter meter;
      auto out = every == 0 ? net->forward(x) : mem::recompute_sequential(net, every, x);
      auto loss = out.square().mean();
      after_forward = meter.live();
      loss.backward();
      peak = meter.peak();
    }
    rows.push_back({every, after_forward, peak});
    MESSAGE("every " << every << ": after forward " << after_forward / 1048576.0 << " MiB, peak of the step "
                     << peak / 1048576.0 << " MiB");
  }
  // Within 1 MiB: the loss and its scalars, and the saved CPU RNG state of each segment (about 5 KB each).
  const int64_t tol = 1 << 20;
  CHECK(std::abs(rows[0].after_forward - 48 * S) < tol);
  CHECK(std::abs(rows[1].after_forward - 24 * S) < tol);
  CHECK(std::abs(rows[2].after_forward - 12 * S) < tol);
  // The peak of the step is at the backward of the last block (or segment): what the forward kept, plus the
  // output's gradient (S) and the weight gradient of a 2048 x 2048 Linear before it is accumulated (8 S); with
  // recompute also the segment's recomputed activations (the GELU input and output of each of its k blocks,
  // 2 k S) and the gradient of a GELU input (S):
  //   plain 48 S + 9 S = 114 MiB;  every block 24 S + 9 S + 3 S = 72 MiB;  every 2nd 12 S + 9 S + 5 S = 52 MiB.
  CHECK(std::abs(rows[0].peak - 57 * S) < tol);
  CHECK(std::abs(rows[1].peak - 36 * S) < tol);
  CHECK(std::abs(rows[2].peak - 26 * S) < tol);
}

namespace {
/// The MLP task, which allocates (and touches) `big` bytes for a moment in the step numbered `at`.
struct SpikyTask : testing::MlpTask {
  int64_t step = 0, at = 3, big = 256ll << 20;
  torch::Tensor training_step(const pt::Batch& b) {
    if (++step == at) {
      auto t = torch::ones({big / 4});
      CHECK(t.sum().item<double>() == static_cast<double>(big / 4));
    }
    return testing::MlpTask::training_step(b);
  }
};
}  // namespace

TEST_CASE("MetricsLog: peak RSS per step sees a 256 MiB allocation in its step only, and the summary and progress show it") {
  // Large blocks from the system, returned on free, so that RSS follows the tensors (glibc otherwise keeps them).
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  const auto dir = testing::temp_dir("peak-memory");
  SpikyTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16});
  std::FILE* progress_out = std::tmpfile();
  using Log = pt::callbacks::MetricsLog;
  pt::Trainer<SpikyTask, Log, pt::callbacks::ProgressBar> t(task, opt, Log({.dir = dir, .print_summary = false}),
                                                             pt::callbacks::ProgressBar({.every = 1, .force_tty = 0, .out = progress_out}));
  t.fit(loader, {.epochs = 1});
  std::vector<double> peaks;
  std::ifstream f(dir / "steps.jsonl");
  for (std::string line; std::getline(f, line);) peaks.push_back(nlohmann::json::parse(line).at("peak_rss_mib").get<double>());
  REQUIRE(peaks.size() == 6);
  INFO("peaks (MiB): " << peaks[0] << " " << peaks[1] << " " << peaks[2] << " " << peaks[3] << " " << peaks[4] << " " << peaks[5]);
  const bool resettable = mem::reset_peak_rss();
  if (!resettable) {
    MESSAGE("/proc/self/clear_refs is not writable here: the peak is the process's; only the rise is checked");
    CHECK(peaks[2] - peaks[1] >= 250);
  } else {
    CHECK(peaks[2] - peaks[1] >= 250);  // step 3 (index 2) holds 256 MiB more at its peak
    CHECK(peaks[2] - peaks[4] >= 250);  // and the steps after it are measured from their own start
    CHECK(std::abs(peaks[4] - peaks[1]) < 32);
  }
  const auto s = t.get<Log>().summary();
  CHECK(s.at("peak_memory").at("rss_mib").get<double>() == doctest::Approx(peaks[2]));
  std::rewind(progress_out);
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, progress_out);
  buf[n] = 0;
  CHECK(std::string(buf).find(" mem ") != std::string::npos);
  std::fclose(progress_out);
  fs::remove_all(dir);
}
