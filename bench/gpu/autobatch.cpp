// Auto batch size: accumulate::AutoBatch's search on the device, for the ResNet-18-class CNN and the
// Fashion-MNIST CNN. A probe is one real training step (forward, backward, FusedAdamW step; fp32) at that
// micro-batch, measured on CUDA with accumulate::cuda_peak_bytes (the caching allocator's peak reserved bytes)
// against accumulate::cuda_memory_budget (the device's total memory). Reported: the batch found, its peak and
// fraction of the budget, the probes, and the search's wall time.
// On the CPU (smoke runs) there is no memory to measure: the probe still runs the real step but reports a
// nominal `cpu-bytes-per-sample` per sample against `cpu-budget-mib`, so the search logic runs end to end.
#include "common.hpp"

#include "fashion_mnist/model.hpp"

namespace gpubench {
namespace {

// A deep, narrow MLP (64 layers of width 64): its largest activation stays far below 2^31 elements at any batch that
// fits a GPU, so that memory, not max_batch, ends its search (ResNet-18 at 224x224 reaches the 32-bit indexing
// bound first on a large GPU), and a probe of millions of samples takes a fraction of a second.
struct DeepMlpImpl : torch::nn::Module {
  explicit DeepMlpImpl(int64_t width = 64, int64_t depth = 64) {
    for (int64_t i = 0; i < depth; ++i) layers->push_back(torch::nn::Linear(width, width)), layers->push_back(torch::nn::ReLU());
    layers->push_back(torch::nn::Linear(width, 10));
    register_module("layers", layers);
  }
  torch::Tensor forward(const torch::Tensor& x) { return layers->forward(x); }
  torch::nn::Sequential layers;
};
TORCH_MODULE(DeepMlp);
struct MlpTask {
  DeepMlp net;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
};

template <class Task, class MakeBatch>
json search(const std::string& name, const torch::Device& dev, Task& task, MakeBatch&& make_batch,
            pt::accumulate::AutoBatchOptions o, int64_t cpu_bytes_per_sample, int64_t cpu_budget) {
  task.module().to(dev);
  task.module().train();
  pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
  auto step = [&](int64_t b) {
    auto batch = make_batch(b);
    auto loss = task.training_step(batch);
    loss.backward();
    opt.step();
    opt.zero_grad(/*set_to_none=*/true);
  };
  int64_t budget = cpu_budget;
#ifdef POLICYTRAIN_WITH_CUDA
  const c10::DeviceIndex di = dev.index() < 0 ? 0 : dev.index();
  if (dev.is_cuda()) budget = pt::accumulate::cuda_memory_budget(di);
#endif
  pt::accumulate::AutoBatch ab(o, budget);
  auto probe = [&](int64_t b) -> int64_t {
    fmt::print(stderr, "autobatch: {} probe batch {}\n", name, b);
#ifdef POLICYTRAIN_WITH_CUDA
    if (dev.is_cuda()) return pt::accumulate::cuda_peak_bytes(step, b, di);
#endif
    step(b);
    return b * cpu_bytes_per_sample;
  };
  sync(dev);
  const double t0 = unix_now();
  const auto s = std::chrono::steady_clock::now();
  const int64_t found = ab.search(probe);
  sync(dev);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
  json probes = json::array();
  int64_t found_peak = -1;
  for (auto& p : ab.probes()) {
    probes.push_back({{"batch", p.batch}, {"peak_bytes", p.peak_bytes}, {"fits", p.fits}});
    if (p.batch == found && p.fits) found_peak = p.peak_bytes;
  }
  // The batch one up from the found one, when the search probed it: its peak (-1: out of memory).
  int64_t next_peak = -2;
  for (auto& p : ab.probes())
    if (p.batch == found + 1) next_peak = p.peak_bytes;
  json r{{"model", name},
         {"batch_found", found},
         {"limited_by", ab.limited_by() == pt::accumulate::SearchLimit::max_batch ? "max_batch" : "memory"},
         {"next_peak_bytes", next_peak},
         {"peak_bytes", found_peak},
         {"budget_bytes", budget},
         {"memory_fraction_target", o.memory_fraction},
         {"memory_fraction_used", static_cast<double>(found_peak) / static_cast<double>(budget)},
         {"max_batch", o.max_batch},
         {"search_seconds", secs},
         {"probes", probes},
         {"measured_memory", dev.is_cuda()},
         {"window", {t0, unix_now()}}};
  fmt::print(stderr, "autobatch: {} batch {} ({:.1f}% of the budget) in {:.1f} s, {} probes\n", name, found,
             100.0 * r["memory_fraction_used"].get<double>(), secs, probes.size());
  return r;
}

}  // namespace

int run_autobatch(Args& a) {
  const auto dev = parse_device(a.str("device", "cuda"));
  const auto out = a.str("out", "autobatch.json");
  const int64_t rs = a.num("resnet-size", 224), rw = a.num("resnet-width", 64), rc = a.num("resnet-classes", 1000);
  // The largest batches keep every activation below 2^31 elements (32-bit indexing in some kernels): ResNet-18's
  // first convolution at 224x224 has 802,816 outputs per sample, the CNN's first 25,088.
  const int64_t rmax = a.num("resnet-max-batch", 2560), fmax = a.num("fmnist-max-batch", 65536);
  const double fraction = a.real("memory-fraction", 0.9);
  const int64_t min_batch = a.num("min-batch", 2);  // batch norm in training needs 2 samples where the map is 1x1
  const int64_t cpu_bps = a.num("cpu-bytes-per-sample", 1 << 20), cpu_budget = a.num("cpu-budget-mib", 64) << 20;
  const std::string models = a.str("models", "resnet18,fmnist,mlp");
  const int64_t mlp_width = a.num("mlp-width", 64), mlp_max = a.num("mlp-max-batch", int64_t{1} << 23);
  a.check_all_used();

  int failed = 0;
  json result = header(dev);
  result["benchmark"] = "autobatch";
  result["precision"] = "fp32";
  result["rows"] = json::array();
  const auto fo = torch::TensorOptions(dev);
  const auto lo = torch::TensorOptions(dev).dtype(torch::kLong);
  pt::accumulate::AutoBatchOptions o;
  o.memory_fraction = fraction;
  o.min_batch = min_batch;
  // The memory-bound model first: its search is the one that must end within 0.05 of the memory target.
  if (models.find("mlp") != std::string::npos) {
    o.max_batch = mlp_max;
    json r = guarded("autobatch mlp", dev, failed, [&] {
      torch::manual_seed(0);
      MlpTask task{DeepMlp(mlp_width)};
      return search("mlp", dev, task, [&](int64_t b) {
        return pt::Batch{torch::randn({b, mlp_width}, fo), torch::randint(10, {b}, lo)};
      }, o, cpu_bps / 64, cpu_budget);
    });
    r["model"] = "mlp";
    r["image"] = {mlp_width};
    release_cached_memory(dev);
    result["rows"].push_back(r);
    write_json(out, result);
  }
  if (models.find("resnet18") != std::string::npos) {
    o.max_batch = rmax;
    json r = guarded("autobatch resnet18", dev, failed, [&] {
      torch::manual_seed(0);
      ClassifierTask<ResNet18> task{ResNet18(rc, rw)};
      return search("resnet18", dev, task, [&](int64_t b) {
        return pt::Batch{torch::randn({b, 3, rs, rs}, fo), torch::randint(rc, {b}, lo)};
      }, o, cpu_bps, cpu_budget);
    });
    r["model"] = "resnet18";
    r["image"] = {3, rs, rs};
    release_cached_memory(dev);
    result["rows"].push_back(r);
    write_json(out, result);
  }
  if (models.find("fmnist") != std::string::npos) {
    o.max_batch = fmax;
    json r = guarded("autobatch fmnist", dev, failed, [&] {
      torch::manual_seed(0);
      fmnist::Classifier task;
      return search("fmnist", dev, task, [&](int64_t b) {
        return pt::Batch{torch::randn({b, 1, 28, 28}, fo), torch::randint(10, {b}, lo)};
      }, o, cpu_bps / 16, cpu_budget);
    });
    r["model"] = "fmnist";
    r["image"] = {1, 28, 28};
    release_cached_memory(dev);
    result["rows"].push_back(r);
    write_json(out, result);
  }
  write_json(out, result);
  return failed ? 1 : 0;
}

}  // namespace gpubench
