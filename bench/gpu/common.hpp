#pragma once
// Shared pieces of the GPU benchmarks (bench/gpu): arguments, timing (warm-up, repetitions, medians, the timed
// window in Unix time for the NVML sidecar), the models (ResNet-18-class CNN, GPT-2-small-class transformer,
// launch-bound MLP) and their tasks. Everything runs on the CPU too (`--device cpu`), so the whole suite is
// tested without a GPU (ctest -R bench.gpu.smoke); CUDA-only code is under POLICYTRAIN_WITH_CUDA.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <policytrain/all.hpp>

namespace gpubench {

namespace pt = policytrain;
using json = nlohmann::json;

/// `--key value` arguments; every value is looked up with a default, unknown keys are an error.
class Args {
 public:
  Args(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
      std::string k = argv[i];
      if (k.rfind("--", 0) != 0 || i + 1 >= argc)
        throw std::invalid_argument(fmt::format("gpu_bench: argument '{}' is not of the form --key value", k));
      kv_[k.substr(2)] = argv[++i];
    }
  }
  std::string str(const std::string& k, const std::string& def) {
    used_[k] = true;
    auto it = kv_.find(k);
    return it == kv_.end() ? def : it->second;
  }
  int64_t num(const std::string& k, int64_t def) { return std::stoll(str(k, std::to_string(def))); }
  double real(const std::string& k, double def) { return std::stod(str(k, fmt::format("{}", def))); }
  /// Throws naming the first argument that no benchmark read.
  void check_all_used() const {
    for (auto& [k, v] : kv_)
      if (!used_.count(k)) throw std::invalid_argument(fmt::format("gpu_bench: unknown argument --{} {}", k, v));
  }

 private:
  std::map<std::string, std::string> kv_;
  std::map<std::string, bool> used_;
};

/// The device from `--device` ("cuda" or "cpu"); CUDA must exist when asked for.
inline torch::Device parse_device(const std::string& s) {
  torch::Device d(s);
  if (d.is_cuda() && !torch::cuda::is_available())
    throw std::runtime_error("gpu_bench: --device cuda, but no CUDA device is available (or LibTorch has no CUDA)");
  if (d.is_cuda() && !d.has_index()) d = torch::Device(torch::kCUDA, 0);  // explicit, for streams and statistics
  return d;
}

/// Waits for the device's queued work (no-op on the CPU).
inline void sync(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize();
}

/// Seconds since the Unix epoch (the clock the NVML sidecar stamps its samples with).
inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// How a benchmark is repeated: `warmup` untimed repetitions, then timed ones until both `min_reps` and
/// `min_seconds` are reached (at most `max_reps`). A repetition runs `steps` steps and ends with a device sync.
struct RepPlan {
  int64_t steps = 10;
  int64_t warmup = 2;
  int64_t min_reps = 5;
  int64_t max_reps = 1000;
  double min_seconds = 0;
};

/// Runs `run()` (one repetition: plan.steps steps) as the plan says; returns the timing as JSON: median seconds
/// per step, steps/s, the repetitions' coefficient of variation, and the timed window [t0, t1] in Unix seconds.
template <class Run>
json time_reps(const torch::Device& dev, const RepPlan& plan, Run&& run) {
  for (int64_t i = 0; i < plan.warmup; ++i) run();
  sync(dev);
  std::vector<double> reps;
  const double t0 = unix_now();
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto s = std::chrono::steady_clock::now();
    run();
    sync(dev);
    const auto e = std::chrono::steady_clock::now();
    reps.push_back(std::chrono::duration<double>(e - s).count());
    const double elapsed = std::chrono::duration<double>(e - start).count();
    if (static_cast<int64_t>(reps.size()) >= plan.max_reps) break;
    if (static_cast<int64_t>(reps.size()) >= plan.min_reps && elapsed >= plan.min_seconds) break;
  }
  const double t1 = unix_now();
  const double med = median(reps);
  double mean = 0, var = 0;
  for (double r : reps) mean += r / reps.size();
  for (double r : reps) var += (r - mean) * (r - mean) / reps.size();
  return json{{"step_seconds", med / plan.steps},
              {"steps_per_second", plan.steps / med},
              {"reps", reps.size()},
              {"steps_per_rep", plan.steps},
              {"warmup_reps", plan.warmup},
              {"cv", mean > 0 ? std::sqrt(var) / mean : 0.0},
              {"window", {t0, t1}}};
}

/// Writes `j` to `path` (pretty-printed).
inline void write_json(const std::string& path, const json& j) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error(fmt::format("gpu_bench: cannot write {}", path));
  f << j.dump(2) << "\n";
}

/// What every result file carries: the LibTorch version, the device, whether this build has CUDA.
inline json header(const torch::Device& dev) {
  bool with_cuda = false;
#ifdef POLICYTRAIN_WITH_CUDA
  with_cuda = true;
#endif
  return json{{"libtorch", pt::detail::torch_version()}, {"device", dev.str()}, {"with_cuda", with_cuda}};
}

// --- models -------------------------------------------------------------------------------------------------

/// ResNet-18's basic block: two 3x3 convolutions with batch norm, a 1x1 projection when the shape changes.
struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride)
      : c1(register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)))),
        b1(register_module("b1", torch::nn::BatchNorm2d(out))),
        c2(register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
        b2(register_module("b2", torch::nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out)
      down = register_module("down", torch::nn::Sequential(
                                         torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                         torch::nn::BatchNorm2d(out)));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = b2(c2(torch::relu(b1(c1(x)))));
    return torch::relu(y + (down.is_empty() ? x : down->forward(x)));
  }
  torch::nn::Conv2d c1;
  torch::nn::BatchNorm2d b1;
  torch::nn::Conv2d c2;
  torch::nn::BatchNorm2d b2;
  torch::nn::Sequential down{nullptr};
};
TORCH_MODULE(BasicBlock);

/// ResNet-18 (torchvision's layout: 7x7 stem, max-pool, 4 stages of 2 basic blocks, global pool, linear);
/// `width` 64 is ResNet-18 (11.7M parameters with 1000 classes).
struct ResNet18Impl : torch::nn::Module {
  explicit ResNet18Impl(int64_t classes = 1000, int64_t width = 64) {
    stem = register_module("stem", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, width, 7).stride(2).padding(3).bias(false)));
    bn = register_module("bn", torch::nn::BatchNorm2d(width));
    int64_t in = width;
    for (int64_t s = 0; s < 4; ++s) {
      const int64_t out = width << s;
      for (int64_t b = 0; b < 2; ++b) {
        blocks->push_back(BasicBlock(in, out, (s > 0 && b == 0) ? 2 : 1));
        in = out;
      }
    }
    register_module("blocks", blocks);
    fc = register_module("fc", torch::nn::Linear(in, classes));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(bn(stem(x))), 3, 2, 1);
    for (auto& m : *blocks) x = m->as<BasicBlock>()->forward(x);
    return fc(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  torch::nn::Conv2d stem{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::ModuleList blocks;
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet18);

/// A pre-norm GPT-2 block: causal self-attention (scaled_dot_product_attention) and a 4x GELU MLP.
struct GptBlockImpl : torch::nn::Module {
  GptBlockImpl(int64_t d, int64_t heads)
      : heads(heads),
        ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        qkv(register_module("qkv", torch::nn::Linear(d, 3 * d))),
        proj(register_module("proj", torch::nn::Linear(d, d))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        fc(register_module("fc", torch::nn::Linear(d, 4 * d))),
        out(register_module("out", torch::nn::Linear(4 * d, d))) {}
  torch::Tensor forward(torch::Tensor x) {
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
    auto t = qkv(ln1(x)).view({B, T, 3, heads, C / heads}).permute({2, 0, 3, 1, 4});
    auto y = at::scaled_dot_product_attention(t[0], t[1], t[2], /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
    x = x + proj(y.transpose(1, 2).reshape({B, T, C}));
    return x + out(torch::gelu(fc(ln2(x)), "tanh"));
  }
  int64_t heads;
  torch::nn::LayerNorm ln1;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear fc, out;
};
TORCH_MODULE(GptBlock);

/// GPT-2 small's shape with `layers` blocks: token and position embeddings, blocks, final norm, LM head.
struct GptImpl : torch::nn::Module {
  GptImpl(int64_t vocab, int64_t seq, int64_t d, int64_t heads, int64_t layers) {
    tok = register_module("tok", torch::nn::Embedding(vocab, d));
    pos = register_parameter("pos", torch::randn({seq, d}) * 0.01);
    for (int64_t i = 0; i < layers; ++i) blocks->push_back(GptBlock(d, heads));
    register_module("blocks", blocks);
    ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(d, vocab).bias(false)));
  }
  torch::Tensor forward(torch::Tensor idx) {
    auto x = tok(idx) + pos.slice(0, 0, idx.size(1));
    for (auto& m : *blocks) x = m->as<GptBlock>()->forward(x);
    return head(ln(x));
  }
  torch::nn::Embedding tok{nullptr};
  torch::Tensor pos;
  torch::nn::ModuleList blocks;
  torch::nn::LayerNorm ln{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Gpt);

/// A small launch-bound MLP: `in` -> `hidden` x `depth` (ReLU) -> `out`. Same as bench/gpu/py_loops.py's.
struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t hidden, int64_t depth, int64_t out) {
    int64_t w = in;
    for (int64_t i = 0; i < depth; ++i) {
      seq->push_back(torch::nn::Linear(w, hidden));
      seq->push_back(torch::nn::ReLU());
      w = hidden;
    }
    seq->push_back(torch::nn::Linear(w, out));
    register_module("seq", seq);
  }
  torch::Tensor forward(torch::Tensor x) { return seq->forward(x); }
  torch::nn::Sequential seq;
};
TORCH_MODULE(Mlp);

/// A classifier task over any module with forward(x) -> logits.
template <class Net>
struct ClassifierTask {
  Net net;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
};

/// Next-token prediction: x token ids [B, T], y the targets [B, T].
struct GptTask {
  Gpt net;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) {
    auto logits = net->forward(b.x);
    return torch::nn::functional::cross_entropy(logits.flatten(0, 1), b.y.flatten());
  }
};

/// `steps` batches cycling over `distinct` random batches made by `make(i)`: synthetic data already on the device.
template <class Make>
std::vector<pt::Batch> cycled_batches(int64_t steps, int64_t distinct, Make&& make) {
  std::vector<pt::Batch> pool;
  for (int64_t i = 0; i < distinct; ++i) pool.push_back(make(i));
  std::vector<pt::Batch> out;
  for (int64_t i = 0; i < steps; ++i) out.push_back(pool[static_cast<size_t>(i % distinct)]);
  return out;
}

/// Returns the caching allocator's free blocks to the device (CUDA), e.g. after an out-of-memory error.
void release_cached_memory(const torch::Device& dev);

/// Runs `fn()` -> json; an exception becomes {"error": message} (printed), so one failing row does not lose the
/// others. `failed` counts them; the benchmark then exits with status 1.
template <class F>
json guarded(const std::string& what, const torch::Device& dev, int& failed, F&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (const auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);  // drop LibTorch's backtrace
    fmt::print(stderr, "gpu_bench: {} FAILED: {}\n", what, msg);
    ++failed;
    release_cached_memory(dev);
    return json{{"error", msg}};
  }
}

/// Benchmarks (one translation unit each); each writes its JSON to `--out`.
int run_amp(Args& a);
int run_loops(Args& a);
int run_data(Args& a);
int run_autobatch(Args& a);

}  // namespace gpubench
