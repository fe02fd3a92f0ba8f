#pragma once
// The example's gradient-accumulation flags: --batch-size N|auto, --accumulate N, --nominal-batch NBS, and the
// auto batch size's --auto-memory-fraction and --auto-max-halvings; --accumulate-warmup NW ramps the nominal batch's
// accumulation from 1 over the first NW micro-batches (Ultralytics' warmup rule).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/accumulation/auto_batch.hpp>
#include <policytrain/accumulation/nominal_batch.hpp>
#include <policytrain/trainer.hpp>
#include <policytrain/data/loader.hpp>

namespace fmnist {

struct AccumulationFlags {
  int64_t accumulate = 1;        ///< micro-batches per optimizer step
  int64_t nominal = 0;           ///< nominal batch (0: off)
  bool auto_batch = false;       ///< --batch-size auto
  double memory_fraction = 0.9;
  int max_halvings = 4;
  int64_t accumulate_warmup = 0;  ///< Ultralytics' nw: micro-batches over which accumulate ramps from 1 (0: none)

  /// Registers the flags; `--batch-size` writes a number into `batch_size`, or selects auto.
  void add(CLI::App& app, int64_t& batch_size) {
    app.add_option_function<std::string>(
           "--batch-size",
           [this, &batch_size](const std::string& s) {
             if (s == "auto") {
               auto_batch = true;
               return;
             }
             std::size_t used = 0;
             const long long v = std::stoll(s, &used);
             if (used != s.size() || v <= 0) throw CLI::ValidationError("--batch-size", "expected a positive integer or 'auto', got '" + s + "'");
             batch_size = v;
           },
           "Micro-batch size, or 'auto' (CUDA only): the largest that fits --auto-memory-fraction of the GPU, with "
           "the accumulation chosen to keep the global batch (--nominal-batch, else 64)")
        ->default_str("64");
    app.add_option("--accumulate", accumulate, "Micro-batches per optimizer step (exact mean over the window)")
        ->check(CLI::PositiveNumber);
    app.add_option("--nominal-batch", nominal,
                   "Nominal batch: accumulate round(NBS / batch) micro-batches and scale the weight decay by "
                   "batch*accumulate/NBS (0: off)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--accumulate-warmup", accumulate_warmup,
                   "With --nominal-batch: ramp the accumulation from 1 to NBS / batch over this many micro-batches, "
                   "as Ultralytics' warmup (it uses max(warmup epochs x batches per epoch, 100)); 0: no ramp")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--auto-memory-fraction", memory_fraction, "--batch-size auto: fraction of GPU memory to fill")
        ->check(CLI::Range(0.05, 1.0));
    app.add_option("--auto-max-halvings", max_halvings,
                   "--batch-size auto: out-of-memory recoveries (halve the micro-batch, double the accumulation)")
        ->check(CLI::NonNegativeNumber);
  }

  /// Settles the micro-batch before the loader and the Trainer are built, and returns it. With --batch-size auto it
  /// searches on the GPU with real training steps; on the CPU it is an error.
  template <class Task>
  int64_t resolve(Task& task, const torch::Tensor& x, const torch::Tensor& y, int64_t batch_size) {
    if (nominal > 0 && accumulate > 1)
      throw std::invalid_argument("--accumulate and --nominal-batch both set; give one (the nominal batch derives the accumulation)");
    batch_ = batch_size;
    plan_ = {batch_, nominal > 0 ? policytrain::accumulate::nominal_accumulate(nominal, batch_) : accumulate};
    if (!auto_batch) return batch_;
    const auto params = task.module().parameters();
    const torch::Device device = params.empty() ? torch::Device(torch::kCPU) : params.front().device();
#ifdef POLICYTRAIN_WITH_CUDA
    if (device.is_cuda()) {
      const int64_t global = nominal > 0 ? nominal : 64 * accumulate;
      auto_.emplace(policytrain::accumulate::AutoBatchOptions{.global_batch = global, .max_batch = global,
                                                              .memory_fraction = memory_fraction,
                                                              .max_halvings = max_halvings},
                    policytrain::accumulate::cuda_memory_budget(device.index()));
      auto probe = [&](int64_t b) {
        return policytrain::accumulate::cuda_peak_bytes(
            [&](int64_t n) {
              auto idx = torch::arange(n, torch::kLong) % x.size(0);
              policytrain::Batch batch{x.index_select(0, idx).to(device), y.index_select(0, idx).to(device)};
              task.module().zero_grad(/*set_to_none=*/true);
              task.training_step(batch).backward();
              task.module().zero_grad(/*set_to_none=*/true);
            },
            b, device.index());
      };
      plan_ = auto_->plan(auto_->search(probe));
      batch_ = plan_.micro_batch;
      return batch_;
    }
#endif
#ifdef POLICYTRAIN_WITH_CUDA
    const std::string fix = "move the model to a CUDA device, or give --batch-size a number";
#else
    const std::string fix = "this build's LibTorch has no CUDA; give --batch-size a number";
#endif
    throw std::runtime_error("--batch-size auto is a CUDA feature (it measures GPU memory with real training steps), "
                             "and this run trains on the " + device.str() + "; " + fix);
  }

  /// The accumulation policy: NominalBatch covers --accumulate (nominal 0) and --nominal-batch.
  policytrain::accumulate::NominalBatch make() const {
    if (auto_batch && nominal == 0) return policytrain::accumulate::NominalBatch({.nominal = 0, .steps = plan_.accumulate});
    return policytrain::accumulate::NominalBatch(
        {.nominal = nominal, .batch = batch_, .steps = accumulate, .warmup_batches = nominal > 0 ? accumulate_warmup : 0});
  }

  /// trainer.fit, or with --batch-size auto the fit that recovers from out-of-memory errors (then
  /// `make_loader(micro_batch)` builds the loader for each micro-batch size).
  template <class TrainerT, class Loader, class MakeLoader, class Val>
  policytrain::FitResult fit(TrainerT& trainer, Loader& loader, MakeLoader&& make_loader, Val& val,
                             const policytrain::FitOptions& options) {
    if (!auto_) return trainer.fit(loader, val, options);
    auto r = policytrain::accumulate::fit_auto_batch(trainer, *auto_, plan_, make_loader, val, options);
    batch_ = plan_.micro_batch;
    return r;
  }

  nlohmann::json describe() const {
    nlohmann::json j{{"name", "accumulate::NominalBatch"}, {"micro_batch", batch_}, {"accumulate", plan_.accumulate},
                     {"nominal_batch", nominal}, {"auto_batch", auto_batch}};
    if (nominal > 0) j["accumulate_warmup_batches"] = accumulate_warmup;
    if (nominal > 0) j["weight_decay_factor"] = make().weight_decay_factor();
    if (auto_) j["out_of_memory_halvings"] = auto_->halvings();
    return j;
  }

 private:
  int64_t batch_ = 64;
  policytrain::accumulate::BatchPlan plan_{64, 1};
  std::optional<policytrain::accumulate::AutoBatch> auto_;
};

}  // namespace fmnist
