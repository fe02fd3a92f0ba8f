// Training loops on the same model and the same synthetic data already on the device (the C++ half of benchmark
// 2; bench/gpu/py_loops.py runs Python eager and Lightning the same way), and the data path from host memory
// (benchmark 3). Every variant: fresh model (seed 0), optim::FusedAdamW lr 1e-3 (PyTorch's AdamW(fused=True)),
// fp32, cross-entropy. Variants:
//   trainer          Trainer<Task, precision::Fp32> with NonFinite::ignore (no per-step read of the loss)
//   trainer_checked  Trainer<Task> with every default (reads the loss once per step to check it is finite)
//   libtorch_loop    a hand-written loop: forward, loss, backward, step, zero_grad(set_to_none)
//   trainer_graph    `trainer` with step::CudaGraph: the whole step captured once and replayed (CPU: its emulation)
// Data path variants (Trainer as `trainer`, Fashion-MNIST CNN, host tensors of Fashion-MNIST's shape):
//   tensor_loader    data::TensorLoader; the Trainer copies each batch from pageable memory
//   prefetch_w0      data::PrefetchLoader, no worker thread; on CUDA pinned batches copied on a side stream
//   prefetch_wN      the same with N worker threads assembling batches ahead
//   tensor_loader_1thread  tensor_loader with LibTorch's intra-op pool at one thread (at::set_num_threads(1)) for
//                    the variant: its CPU gather (index_select) then wakes no pool thread. A diagnostic: tells whether
//                    tensor_loader's lead over PrefetchLoader comes from the pool's threads, which spin-wait after
//                    each parallel region and so keep the host's cores awake (bench/RESULTS.md, "2026-11-26, H200
//                    traces").
// The recipe's data paths (--width, --conv3, --bf16: the main job's recipe model; full batches only; the step is one
// CUDA graph, its emulation on the CPU; bf16 autocast with --bf16 1):
//   resident_graph   synthetic batches already on the device, cycled: the step alone (the ceiling)
//   device_graph     data::DeviceLoader (uint8 on the device, crop + flip) with its tickets made into batches inside
//                    the captured step (DeviceBatchTask): one replay does data and step
//   device_outside   the same loader making each batch with eager kernels before the replay
//   augment_graph    data::PrefetchLoader with `workers` threads (crop + flip on the host, pinned copies), graph step
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "common.hpp"

#include "fashion_mnist/model.hpp"

namespace gpubench {
namespace {

template <class Task>
json run_variant(const std::string& variant, const torch::Device& dev, const RepPlan& plan, Task& task,
                 const std::vector<pt::Batch>& batches) {
  task.module().to(dev);
  task.module().train();
  pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
  json t;
  if (variant == "libtorch_loop") {
    t = time_reps(dev, plan, [&] {
      for (const auto& b : batches) {
        auto loss = task.training_step(b);
        loss.backward();
        opt.step();
        opt.zero_grad(/*set_to_none=*/true);
      }
    });
  } else if (variant == "trainer") {
    pt::Trainer<Task, pt::precision::Fp32> trainer(task, opt, pt::precision::Fp32(pt::NonFinite::ignore));
    t = time_reps(dev, plan, [&] { trainer.fit(batches, {.epochs = trainer.state().epoch + 1}); });
  } else if (variant == "trainer_checked") {
    pt::Trainer<Task> trainer(task, opt);
    t = time_reps(dev, plan, [&] { trainer.fit(batches, {.epochs = trainer.state().epoch + 1}); });
  } else if (variant == "trainer_graph") {
    // `trainer` with the whole step captured into a CUDA graph (step::CudaGraph); on the CPU (smoke runs) its
    // emulation, which times the code path, not a graph. The graph outlives a fit: the warm-up repetitions capture.
    const pt::precision::Fp32 fp32(pt::NonFinite::ignore);
    if (dev.is_cuda()) {
      pt::Trainer<Task, pt::precision::Fp32, pt::step::CudaGraph> trainer(task, opt, fp32);
      t = time_reps(dev, plan, [&] { trainer.fit(batches, {.epochs = trainer.state().epoch + 1}); });
      t["replays"] = trainer.template get<pt::step::CudaGraph>().replays();
    } else {
      pt::Trainer<Task, pt::precision::Fp32, pt::step::GraphEmulation> trainer(task, opt, fp32);
      t = time_reps(dev, plan, [&] { trainer.fit(batches, {.epochs = trainer.state().epoch + 1}); });
      t["replays"] = trainer.template get<pt::step::GraphEmulation>().replays();
    }
  } else {
    throw std::invalid_argument(fmt::format(
        "gpu_bench loops: variant '{}'; expected trainer, trainer_checked, trainer_graph or libtorch_loop", variant));
  }
  t["variant"] = variant;
  return t;
}

/// Records `steps` training steps with Kineto (CPU and CUDA activities) once `start` steps have been taken, into
/// `path`: host-side hooks only (after_step), so it composes with step::CudaGraph, whose replays the trace then shows
/// with everything launched around them (callbacks::Profiler's ranges sit inside the step, which a graph cannot).
struct ReplayTrace {
  std::filesystem::path path;  // empty: off
  int64_t start = 0, steps = 0, seen = 0;
  bool on = false;
  std::string step_name;                   // "ProfilerStep#N", as callbacks::Profiler names steps (trace_gaps.py)
  std::unique_ptr<at::RecordFunction> rf;  // open from one after_step to the next: a replay and what follows it
  template <class Ctx>
  void after_step(Ctx&, bool) {
    if (path.empty()) return;
    namespace ap = torch::autograd::profiler;
    ++seen;
    const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO, false, false, false);
    std::set<torch::profiler::impl::ActivityType> activities{torch::profiler::impl::ActivityType::CPU};
#ifdef POLICYTRAIN_WITH_CUDA
    activities.insert(torch::profiler::impl::ActivityType::CUDA);
#endif
    if (rf) {
      rf->end();
      rf.reset();
    }
    if (seen == start && !on) {
      ap::prepareProfiler(config, activities);
      ap::enableProfiler(config, activities, {});
      on = true;
    } else if (seen == start + steps && on) {
      std::filesystem::create_directories(path.parent_path());
      ap::disableProfiler()->save(path.string());
      on = false;
      path.clear();
      return;
    }
    if (on) {
      step_name = fmt::format("ProfilerStep#{}", seen);
      rf = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
      if (rf->isActive()) rf->before(step_name.c_str());
      else rf.reset();
    }
  }
};

// Times epochs of the recipe's step (autocast, FusedAdamW, the whole step as one graph) over `data`; with
// `ema_every` > 0 callbacks::Ema (decay 0.999, every `ema_every` steps) runs after each replay, and with a `trace`
// path one more epoch's steps 20-29 are recorded by Kineto (ReplayTrace) after the timing.
template <class Task, class Data>
json time_graph_epochs(const torch::Device& dev, RepPlan p, Task& task, torch::optim::Optimizer& opt, Data& data, bool bf16,
                       int64_t ema_every = 0, const std::filesystem::path& trace = {}) {
  pt::precision::Autocast amp({.dtype = bf16 ? torch::kBFloat16 : torch::kFloat, .on_nonfinite = pt::NonFinite::ignore});
  p.steps = static_cast<int64_t>(data.size());
  const pt::callbacks::Ema ema({.enabled = ema_every > 0, .decay = 0.999, .tau = 200, .every = std::max<int64_t>(1, ema_every)});
  auto go = [&](auto& trainer) {
    auto t = time_reps(dev, p, [&] { trainer.fit(data, {.epochs = trainer.state().epoch + 1}); });
    t["ema_every"] = ema_every;
    if (!trace.empty()) {
      auto& r = trainer.template get<ReplayTrace>();
      r.path = trace;
      r.start = 20;
      r.steps = 10;
      r.seen = 0;
      trainer.fit(data, {.epochs = trainer.state().epoch + 1, .limit_train_batches = 40});
      sync(dev);
      t["profile"] = trace.string();
    }
    return t;
  };
  if (dev.is_cuda()) {
    pt::Trainer<Task, pt::precision::Autocast, pt::step::CudaGraph, pt::callbacks::Ema, ReplayTrace> trainer(
        task, opt, amp, pt::step::CudaGraph(), ema, ReplayTrace{});
    return go(trainer);
  }
  pt::Trainer<Task, pt::precision::Autocast, pt::step::GraphEmulation, pt::callbacks::Ema, ReplayTrace> trainer(
      task, opt, amp, pt::step::GraphEmulation(), ema, ReplayTrace{});
  return go(trainer);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

}  // namespace

int run_loops(Args& a) {
  const auto dev = parse_device(a.str("device", "cuda"));
  const auto out = a.str("out", "loops_cpp.json");
  const auto models = split_list(a.str("models", "fmnist,mlp"));
  const auto variants = split_list(a.str("variants", "trainer,libtorch_loop,trainer_checked,trainer_graph"));
  const int64_t fb = a.num("fmnist-batch", 256), mb = a.num("mlp-batch", 64), mi = a.num("mlp-in", 256),
                mh = a.num("mlp-hidden", 256), md = a.num("mlp-depth", 4), mo = a.num("mlp-out", 10);
  const int64_t fsteps = a.num("fmnist-steps", 50), msteps = a.num("mlp-steps", 200);
  RepPlan plan{.warmup = a.num("warmup", 2), .min_reps = a.num("reps", 5), .max_reps = a.num("max-reps", 1000),
               .min_seconds = a.real("min-seconds", 0)};
  a.check_all_used();

  int failed = 0;
  json result = header(dev);
  result["benchmark"] = "loops";
  result["fmnist"] = {{"batch", fb}};
  result["mlp"] = {{"batch", mb}, {"in", mi}, {"hidden", mh}, {"depth", md}, {"out", mo}};
  result["rows"] = json::array();
  const auto fo = torch::TensorOptions(dev);
  const auto lo = torch::TensorOptions(dev).dtype(torch::kLong);
  for (auto& m : models) {
    for (auto& v : variants) {
      torch::manual_seed(0);
      json r = guarded(fmt::format("loops {} {}", m, v), dev, failed, [&] {
        json t;
        if (m == "fmnist") {
          plan.steps = fsteps;
          auto batches = cycled_batches(fsteps, 8, [&](int64_t) {
            return pt::Batch{torch::randn({fb, 1, 28, 28}, fo), torch::randint(10, {fb}, lo)};
          });
          fmnist::Classifier task;
          t = run_variant(v, dev, plan, task, batches);
          t["samples_per_second"] = t["steps_per_second"].get<double>() * fb;
        } else if (m == "mlp") {
          plan.steps = msteps;
          auto batches = cycled_batches(msteps, 8, [&](int64_t) {
            return pt::Batch{torch::randn({mb, mi}, fo), torch::randint(mo, {mb}, lo)};
          });
          ClassifierTask<Mlp> task{Mlp(mi, mh, md, mo)};
          t = run_variant(v, dev, plan, task, batches);
          t["samples_per_second"] = t["steps_per_second"].get<double>() * mb;
        } else {
          throw std::invalid_argument(fmt::format("gpu_bench loops: model '{}'; expected fmnist or mlp", m));
        }
        fmt::print(stderr, "loops: {} {} {:.1f} steps/s (cv {:.3f}, {} reps)\n", m, v,
                   t["steps_per_second"].get<double>(), t["cv"].get<double>(), t["reps"].get<int64_t>());
        return t;
      });
      r["model"] = m;
      r["variant"] = v;
      result["rows"].push_back(r);
      write_json(out, result);
    }
  }
  return failed ? 1 : 0;
}

int run_data(Args& a) {
  const auto dev = parse_device(a.str("device", "cuda"));
  const auto out = a.str("out", "data.json");
  const int64_t n = a.num("samples", 60000), batch = a.num("batch", 256), workers = a.num("workers", 2);
  const auto variants = split_list(a.str("variants", "tensor_loader,prefetch_w0,prefetch_wN,augment_w0,augment_wN,prefetch_wN_nosidestream,"
                                                 "prefetch_wN_pageable,tensor_loader_1thread"));
  const RepPlan plan{.warmup = a.num("warmup", 1), .min_reps = a.num("reps", 3), .max_reps = a.num("max-reps", 100),
                     .min_seconds = a.real("min-seconds", 0)};
  // --profile-dir D: after timing, each variant trains 12 more steps under callbacks::Profiler (Kineto), which
  // records steps 6-11 into D/<variant>/trace.json: the launch gaps of the training thread, loader against loader.
  const std::filesystem::path profile_dir = a.str("profile-dir", "");
  const int64_t width = a.num("width", 32), conv3 = a.num("conv3", 0);
  const bool bf16 = a.num("bf16", 0) != 0;
  // --ema K: the graph variants with callbacks::Ema every K steps (0: none); with --profile-dir, each graph variant
  // records steps 20-29 of one more epoch (Kineto, the replays and what is launched around them) into
  // D/<variant>/replay.json.
  const int64_t ema_every = a.num("ema", 0);
  a.check_all_used();

  // Host data of Fashion-MNIST's shape and range (the data path does not depend on the pixels' values).
  torch::manual_seed(1);
  auto x = torch::rand({n, 1, 28, 28});
  auto y = torch::randint(10, {n}, torch::kLong);
  const pt::data::LoaderOptions lo{.batch_size = batch, .shuffle = true, .seed = 1};
  auto graph_trace = [&](const std::string& v) {
    return profile_dir.empty() ? std::filesystem::path() : profile_dir / v / "replay.json";
  };
  int failed = 0;
  json result = header(dev);
  result["benchmark"] = "data";
  result["samples"] = n;
  result["batch"] = batch;
  result["workers"] = workers;
  result["rows"] = json::array();
  for (auto& v : variants) {
    json r = guarded(fmt::format("data {}", v), dev, failed, [&] {
      torch::manual_seed(0);
      fmnist::Classifier task;
      task.module().to(dev);
      pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
      pt::Trainer<fmnist::Classifier, pt::precision::Fp32> trainer(task, opt,
                                                                   pt::precision::Fp32(pt::NonFinite::ignore));
      RepPlan p = plan;
      json t;
      auto timed = [&](auto& loader) {
        p.steps = static_cast<int64_t>(loader.size());
        auto r = time_reps(dev, p, [&] { trainer.fit(loader, {.epochs = trainer.state().epoch + 1}); });
        // The loader alone (no training): one pass, each batch brought to the device as the Trainer does; the
        // training thread's cost per batch of getting the data there.
        sync(dev);
        const auto t0 = std::chrono::steady_clock::now();
        int64_t n = 0;
        for (auto&& b : loader) {
          pt::Batch d = b.x.device() == dev ? pt::Batch(b) : b.to(dev, /*non_blocking=*/true);
          (void)d;
          ++n;
        }
        sync(dev);
        r["loader_only_us_per_batch"] =
            1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / std::max<int64_t>(n, 1);
        if (!profile_dir.empty()) {
          pt::callbacks::Profiler prof({.dir = profile_dir / v, .wait = 4, .warmup = 2, .active = 6, .out = nullptr});
          pt::Trainer<fmnist::Classifier, pt::precision::Fp32, pt::callbacks::Profiler> profiled(
              task, opt, pt::precision::Fp32(pt::NonFinite::ignore), std::move(prof));
          profiled.fit(loader, {.epochs = 1, .limit_train_batches = 12});
          r["profile"] = (profile_dir / v / "trace.json").string();
        }
        return r;
      };
      if (v == "tensor_loader" || v == "tensor_loader_1thread") {
        pt::data::TensorLoader loader(x, y, lo);
        const int threads = at::get_num_threads();
        if (v == "tensor_loader_1thread") at::set_num_threads(1);
        try {
          t = timed(loader);
        } catch (...) {
          at::set_num_threads(threads);
          throw;
        }
        at::set_num_threads(threads);
        t["intra_op_threads"] = v == "tensor_loader_1thread" ? 1 : threads;
      } else if (v.starts_with("prefetch_w") || v.starts_with("augment_w")) {
        // augment_*: random crop (padding 4) and flip per sample, as the main job's --augment; w0 assembles on
        // the training thread (no prefetch), wN on `workers` threads.
        // _nosidestream: each batch copied on the training stream when read; _pageable: no pinned memory.
        const int64_t w = v.find("_w0") != std::string::npos ? 0 : workers;
        pt::data::PrefetchOptions po{.workers = w, .device = dev};
        po.augment.enabled = v.starts_with("augment");
        po.side_stream = !v.ends_with("_nosidestream");
        po.pin_memory = !v.ends_with("_pageable");
        pt::data::PrefetchLoader loader(x, y, lo, po);
        t = timed(loader);
        t["workers"] = w;
        t["augment"] = po.augment.enabled;
        t["buffers_allocated"] = loader.buffers_allocated();
        bool pinned = false;
#ifdef POLICYTRAIN_WITH_CUDA
        pinned = dev.is_cuda();
#endif
        t["pinned_side_stream"] = pinned;
      } else if (v == "resident_graph" || v == "device_graph" || v == "device_outside" || v == "augment_graph") {
        torch::manual_seed(0);
        fmnist::Classifier rtask(width, false, 0.0, fmnist::BlockOrder::conv_bn_relu_pool, conv3);
        rtask.module().to(dev);
        pt::optim::FusedAdamW ropt(rtask.module().parameters(), torch::optim::AdamWOptions(1e-3));
        auto glo = lo;
        glo.drop_last = true;  // full batches only: every step replays the graph
        pt::data::AugmentOptions aug{.enabled = true, .crop_padding = 4, .horizontal_flip = true, .fill = 0.0f};
        if (v == "resident_graph") {
          const auto fo = torch::TensorOptions(dev);
          auto batches = cycled_batches(n / batch, 8, [&](int64_t) {
            return pt::Batch{torch::randn({batch, 1, 28, 28}, fo), torch::randint(10, {batch}, fo.dtype(torch::kLong))};
          });
          t = time_graph_epochs(dev, plan, rtask, ropt, batches, bf16, ema_every, graph_trace(v));
        } else if (v == "augment_graph") {
          pt::data::PrefetchOptions po{.workers = workers, .device = dev};
          po.augment = aug;
          pt::data::PrefetchLoader loader(x, y, glo, po);
          t = time_graph_epochs(dev, plan, rtask, ropt, loader, bf16, ema_every, graph_trace(v));
          t["workers"] = workers;
        } else {
          pt::data::DeviceLoaderOptions dlo{.device = dev, .input_scale = 1.0 / 255, .mean = {0.286}, .std = {0.353},
                                            .augment = aug, .in_step = v == "device_graph"};
          pt::data::DeviceLoader loader((x * 255).to(torch::kByte), y, glo, dlo);
          pt::data::DeviceBatchTask<fmnist::Classifier> wrapped(rtask, v == "device_graph" ? &loader : nullptr);
          t = time_graph_epochs(dev, plan, wrapped, ropt, loader, bf16, ema_every, graph_trace(v));
        }
        t["samples_per_second"] = static_cast<double>((n / batch) * batch) /
                                  (t["step_seconds"].get<double>() * t["steps_per_rep"].get<double>());
        t["width"] = width;
        t["conv3"] = conv3;
        t["bf16"] = bf16;
      } else {
        throw std::invalid_argument(
            fmt::format("gpu_bench data: variant '{}'; expected tensor_loader, prefetch_w0, prefetch_wN, augment_w0, augment_wN, "
            "prefetch_wN_nosidestream, prefetch_wN_pageable, tensor_loader_1thread, resident_graph, device_graph, "
            "device_outside or augment_graph", v));
      }
      // An epoch is n samples (the last batch may be partial).
      if (!t.contains("samples_per_second"))
        t["samples_per_second"] =
            static_cast<double>(n) / (t["step_seconds"].get<double>() * t["steps_per_rep"].get<double>());
      fmt::print(stderr, "data: {} {:.0f} samples/s (cv {:.3f}, {} reps)\n", v, t["samples_per_second"].get<double>(),
                 t["cv"].get<double>(), t["reps"].get<int64_t>());
      return t;
    });
    r["variant"] = v;
    r["model"] = "fmnist";
    result["rows"].push_back(r);
    write_json(out, result);
  }
  return failed ? 1 : 0;
}

}  // namespace gpubench
