// AMP: step time (forward + backward + FusedAdamW step) of a ResNet-18-class CNN and a GPT-2-small-class
// transformer under fp32, TF32, bf16 autocast and fp16 autocast with loss scaling, each through
// Trainer<Task, precision::Autocast, callbacks::PerfKnobs>. cuDNN benchmark on for every row; TF32 off for
// fp32, bf16 and fp16 (PerfKnobs sets both TF32 flags to its option, so "fp32" is true fp32). ResNet rows run with
// channels-last off and on. A fresh model (same seed) per row; synthetic data already on the device.
#include "common.hpp"

#ifdef POLICYTRAIN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace gpubench {
namespace {

struct PrecisionRow {
  std::string name;
  c10::ScalarType dtype;
  bool tf32;
  bool host_read = false;  // fp16-sync: the scaler's inf flag read on the host every step (device_skip off)
};

PrecisionRow parse_precision(const std::string& s) {
  if (s == "fp32") return {s, torch::kFloat, false};
  if (s == "tf32") return {s, torch::kFloat, true};
  if (s == "bf16") return {s, torch::kBFloat16, false};
  if (s == "fp16") return {s, torch::kHalf, false};
  if (s == "fp16-sync") return {s, torch::kHalf, false, true};
  throw std::invalid_argument(
      fmt::format("gpu_bench amp: precision '{}'; expected fp32, tf32, bf16, fp16 or fp16-sync", s));
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = std::min(s.find(',', p), s.size());
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

void reset_peak(const torch::Device& dev) {
#ifdef POLICYTRAIN_WITH_CUDA
  if (dev.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(dev.index() < 0 ? 0 : dev.index());
#endif
}
/// Peak bytes allocated by tensors since reset_peak (CUDA), or null.
json peak_bytes(const torch::Device& dev) {
#ifdef POLICYTRAIN_WITH_CUDA
  if (dev.is_cuda()) {
    const auto st = c10::cuda::CUDACachingAllocator::getDeviceStats(dev.index() < 0 ? 0 : dev.index());
    return st.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  return nullptr;
}

/// One row: a fresh task from make_task(), trained through the Trainer with the given precision and knobs.
template <class Task, class MakeTask, class MakeBatch>
json run_row(const torch::Device& dev, const RepPlan& plan, const PrecisionRow& p, bool channels_last,
             MakeTask&& make_task, MakeBatch&& make_batch, double lr) {
  torch::manual_seed(0);
  Task task = make_task();
  task.module().to(dev);
  pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(lr));
  pt::precision::Autocast::Options ao;
  ao.dtype = p.dtype;
  ao.on_nonfinite = pt::NonFinite::ignore;  // no per-step read of the loss
  ao.device_skip = !p.host_read;            // fp16: the inf flag goes to FusedAdamW's kernel unless fp16-sync
  pt::callbacks::PerfKnobs::Options ko;
  ko.channels_last = channels_last;
  ko.cudnn_benchmark = true;
  ko.tf32 = p.tf32;
  pt::Trainer<Task, pt::precision::Autocast, pt::callbacks::PerfKnobs> trainer(
      task, opt, pt::precision::Autocast(ao), pt::callbacks::PerfKnobs(ko));
  auto batches = cycled_batches(plan.steps, 2, make_batch);
  reset_peak(dev);
  const int64_t steps0 = trainer.state().global_step, skipped0 = trainer.state().skipped_steps;
  json t = time_reps(dev, plan, [&] { trainer.fit(batches, {.epochs = trainer.state().epoch + 1}); });
  t["precision"] = p.name;
  t["channels_last"] = channels_last;
  t["skipped_steps"] = trainer.state().skipped_steps - skipped0;
  t["steps"] = trainer.state().global_step - steps0;
  t["loss_scale"] = trainer.template get<pt::precision::Autocast>().loss_scale();
  t["knobs"] = trainer.template get<pt::callbacks::PerfKnobs>().describe();
  t["peak_allocated_bytes"] = peak_bytes(dev);
  fmt::print(stderr, "amp: {} channels_last={} {:.2f} ms/step (cv {:.3f}, {} reps)\n", p.name, channels_last,
             1e3 * t["step_seconds"].get<double>(), t["cv"].get<double>(), t["reps"].get<int64_t>());
  return t;
}

}  // namespace

int run_amp(Args& a) {
  const auto dev = parse_device(a.str("device", "cuda"));
  const auto out = a.str("out", "amp.json");
  const auto models = split(a.str("models", "resnet18,gpt"));
  std::vector<PrecisionRow> precisions;
  for (auto& s : split(a.str("precisions", "fp32,tf32,bf16,fp16,fp16-sync"))) precisions.push_back(parse_precision(s));
  const RepPlan plan{.steps = a.num("steps", 5), .warmup = a.num("warmup", 2), .min_reps = a.num("reps", 5),
                     .max_reps = a.num("max-reps", 50), .min_seconds = a.real("min-seconds", 0)};
  const int64_t rb = a.num("resnet-batch", 256), rs = a.num("resnet-size", 224), rw = a.num("resnet-width", 64),
                rc = a.num("resnet-classes", 1000);
  const int64_t gb = a.num("gpt-batch", 8), gs = a.num("gpt-seq", 1024), gd = a.num("gpt-d", 768),
                gh = a.num("gpt-heads", 12), gl = a.num("gpt-layers", 12), gv = a.num("gpt-vocab", 50257);
  a.check_all_used();

  int failed = 0;
  json result = header(dev);
  result["benchmark"] = "amp";
  result["rows"] = json::array();
  for (auto& m : models) {
    if (m == "resnet18") {
      result["resnet18"] = {{"batch", rb}, {"image", {3, rs, rs}}, {"width", rw}, {"classes", rc}};
      for (bool cl : {false, true})
        for (auto& p : precisions) {
          auto make_batch = [&](int64_t) {
            auto x = torch::randn({rb, 3, rs, rs}, torch::TensorOptions(dev));
            if (cl) x = x.contiguous(at::MemoryFormat::ChannelsLast);
            return pt::Batch{x, torch::randint(rc, {rb}, torch::TensorOptions(dev).dtype(torch::kLong))};
          };
          json r = guarded(fmt::format("amp resnet18 {} channels_last={}", p.name, cl), dev, failed, [&] {
            return run_row<ClassifierTask<ResNet18>>(
                dev, plan, p, cl, [&] { return ClassifierTask<ResNet18>{ResNet18(rc, rw)}; }, make_batch, 1e-3);
          });
          r["model"] = "resnet18";
          r["precision"] = p.name;
          r["channels_last"] = cl;
          release_cached_memory(dev);
          result["rows"].push_back(r);
          write_json(out, result);  // after each row, so a timeout keeps what was measured
        }
    } else if (m == "gpt") {
      result["gpt"] = {{"batch", gb}, {"seq", gs}, {"d_model", gd}, {"heads", gh}, {"layers", gl}, {"vocab", gv}};
      for (auto& p : precisions) {
        auto make_batch = [&](int64_t) {
          auto o = torch::TensorOptions(dev).dtype(torch::kLong);
          return pt::Batch{torch::randint(gv, {gb, gs}, o), torch::randint(gv, {gb, gs}, o)};
        };
        json r = guarded(fmt::format("amp gpt {}", p.name), dev, failed, [&] {
          return run_row<GptTask>(dev, plan, p, false, [&] { return GptTask{Gpt(gv, gs, gd, gh, gl)}; }, make_batch,
                                  3e-4);
        });
        r["model"] = "gpt";
        r["precision"] = p.name;
        r["channels_last"] = false;
        release_cached_memory(dev);
        result["rows"].push_back(r);
        write_json(out, result);
      }
    } else {
      throw std::invalid_argument(fmt::format("gpu_bench amp: model '{}'; expected resnet18 or gpt", m));
    }
  }
  write_json(out, result);
  return failed ? 1 : 0;
}

}  // namespace gpubench
