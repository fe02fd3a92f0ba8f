#pragma once
// Small models, tasks and data shared by the unit tests.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include <policytrain/all.hpp>

namespace testing {

/// A whole file as text (empty when it cannot be read).
inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The end of a worker process of a multi-process test: runs `body` (its exit code), reports an exception on
/// stderr as "worker error: ..." with code 3, flushes and leaves without running destructors (a process group's
/// teardown must not outlive the test's choice of exit code).
template <class F>
[[noreturn]] void run_worker_and_exit(F&& body) {
  int code = 0;
  try {
    code = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker error: %s\n", e.what());
    code = 3;
  }
  std::fflush(nullptr);
  std::_Exit(code);
}

/// An MLP without batch norm or dropout, so that results depend only on the data and the arithmetic.
struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in = 8, int64_t hidden = 16, int64_t out = 3)
      : fc1(register_module("fc1", torch::nn::Linear(in, hidden))), fc2(register_module("fc2", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

struct MlpTask {
  Mlp net;
  explicit MlpTask(uint64_t seed = 1, int64_t in = 8, int64_t hidden = 16, int64_t out = 3) : net(nullptr) {
    torch::manual_seed(seed);
    net = Mlp(in, hidden, out);
  }
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const policytrain::Batch& b) {
    return torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
  }
  policytrain::Prediction validation_step(const policytrain::Batch& b) {
    auto out = net->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};

/// A fixed classification data set of n samples.
inline std::pair<torch::Tensor, torch::Tensor> toy_data(int64_t n = 96, int64_t in = 8, int64_t classes = 3, uint64_t seed = 7) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  auto x = torch::randn({n, in}, gen);
  auto y = torch::randint(0, classes, {n}, gen, torch::kLong);
  return {x, y};
}

/// Copies every parameter and buffer of `from` into `to` (same architecture).
inline void copy_weights(torch::nn::Module& to, const torch::nn::Module& from) {
  torch::NoGradGuard g;
  auto src = from.named_parameters(true);
  for (auto& p : to.named_parameters(true)) p.value().copy_(src[p.key()]);
}

inline bool same_params(const torch::nn::Module& a, const torch::nn::Module& b) {
  auto pb = b.named_parameters(true);
  for (const auto& p : a.named_parameters(true))
    if (!torch::equal(p.value(), pb[p.key()])) return false;
  return true;
}

inline double max_rel_diff(const torch::nn::Module& a, const torch::nn::Module& b) {
  double worst = 0;
  auto pb = b.named_parameters(true);
  for (const auto& p : a.named_parameters(true)) {
    auto d = (p.value() - pb[p.key()]).abs().max().item<double>();
    auto s = pb[p.key()].abs().max().item<double>();
    worst = std::max(worst, d / std::max(s, 1e-12));
  }
  return worst;
}

/// A callback that records, after every optimizer step, what a callback can read of that step: the loss tensor it
/// is handed (kept, and read only at the end, so that a tensor rewritten by a later step shows), the lr, the stepped
/// flag, the skip count and, when `read_now`, the loss, the loss scale and the clipped gradient norm as read at once
/// (off where the test forbids a host read, as under a CUDA sync debug mode). Copies share the rows.
struct StepStream {
  struct Row {
    int64_t step = 0, skipped = 0;
    bool stepped = false;
    double lr = 0;
    torch::Tensor loss, norm;  ///< as handed to the callback (not copied)
    double loss_now = std::numeric_limits<double>::quiet_NaN(), scale_now = 0, norm_now = 0;
  };
  std::shared_ptr<std::vector<Row>> rows = std::make_shared<std::vector<Row>>();
  bool read_now = true;

  template <class C>
  void after_step(C& c, bool stepped) {
    Row r;
    r.step = c.state().global_step;
    r.skipped = c.state().skipped_steps;
    r.stepped = stepped;
    r.lr = c.lr();
    r.loss = c.state().last_loss;
    if constexpr (C::template has<policytrain::callbacks::GradClip>())
      r.norm = c.template get<policytrain::callbacks::GradClip>().last_norm_tensor();
    if (read_now) {
      r.loss_now = c.state().loss_value();
      if constexpr (requires { c.template policy<policytrain::Category::precision>().loss_scale(); })
        r.scale_now = c.template policy<policytrain::Category::precision>().loss_scale();
      if (r.norm.defined()) r.norm_now = r.norm.template item<double>();
    }
    rows->push_back(std::move(r));
  }

  /// The losses as read now, from the tensors kept (one per step).
  std::vector<double> kept_losses() const {
    std::vector<double> v;
    for (const auto& r : *rows) v.push_back(r.loss.defined() ? r.loss.item<double>() : std::numeric_limits<double>::quiet_NaN());
    return v;
  }
  /// The gradient norms as read now, from the tensors kept (NaN where none).
  std::vector<double> kept_norms() const {
    std::vector<double> v;
    for (const auto& r : *rows) v.push_back(r.norm.defined() ? r.norm.item<double>() : std::numeric_limits<double>::quiet_NaN());
    return v;
  }
};

/// A fresh, empty directory under the system's temp dir.
inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("policytrain-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace testing
