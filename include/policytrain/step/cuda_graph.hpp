#pragma once
/// \file
/// step::CudaGraph — the whole optimizer step as one CUDA graph: forward, backward, unscale, clipping, the fused
/// optimizer's update and the loss scaler's bookkeeping are captured once, after a few eager warm-up steps, and
/// replayed for every following batch. What stays on the host per step is the Trainer's counters, after_step
/// (scale update, schedule, EMA) and on_step_end, each a handful of asynchronous launches.
///
/// How it works (PyTorch's "whole network capture", torch.cuda.graphs):
/// - `warmup_steps` eager steps on a side stream create the optimizer's state, cuBLAS/cuDNN handles and the
///   loss scaler's flags outside the graph.
/// - The capture: the gradients are released so that backward allocates them inside the graph's private memory
///   pool; every policy's prepare_capture(ctx) allocates what its captured work writes (outside the pool); the
///   batch is copied into static input tensors; the step is captured on a side stream
///   (cudaStreamCaptureModeThreadLocal, so a loader thread may go on copying), with autocast's cast cache off.
///   Capturing runs nothing: the captured step is then replayed for that batch.
/// - A replay: the batch is copied into the static inputs, the step tensor (Context::step_tensor) and the fused
///   optimizer's lr tensors are written (asynchronous fills), the graph is launched, and every policy's
///   on_replay(ctx) records what the graph did (the loss scaler: unscaled and stepped; GradClip: the norm). What a
///   callback reads of the step is the replayed step's own: TrainState::last_loss is a fresh copy of the loss the
///   graph rewrote (a tensor kept from an earlier step keeps its value), lr, skip count and scale are set on the
///   host after the replay as after an eager step. The gradients stay where
///   the graph writes them (keeps_grads()). The default CUDA generator is registered with every graph by
///   LibTorch, so dropout draws new numbers at each replay.
/// - A batch of another shape or dtype (the last, short batch of an epoch) runs eagerly, after the gradients are
///   zeroed in place; it is counted in fallbacks(). It is not padded: padding would change the loss's mean.
///
/// Requirements, checked: at compile time every policy with hooks inside the step is graph-safe (core/hooks.hpp:
/// a static_assert names the one that is not, e.g. DataParallel, accumulation, MetricsLog); at the start of a
/// fit, the model is on a CUDA device of a CUDA build, the optimizer is a fused one (optim::GraphReplayable: its
/// step counters and lr live on the device), and no policy refuses as configured (graph_refusal: a host-side
/// skip decision, loss scaling without device_skip). One micro-batch per step (accumulation is not graph-safe).
///
/// Not captured, so not graph-unsafe: everything in after_step, epoch, validation and checkpoint hooks.
/// `step::GraphEmulation` runs the same logic without CUDA (capture records the step, a replay runs it again on
/// the static inputs): it tests a composition's graph path on the CPU, not a graph's speed.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/core/parameters.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/optim/fused_common.hpp>

#ifdef POLICYTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace policytrain::step {

namespace detail {

/// Captures into and replays a CUDA graph (at::cuda::CUDAGraph), on a side stream as CUDA requires.
class CudaGraphBackend {
 public:
  static constexpr std::string_view name = "step::CudaGraph";

  /// Throws std::invalid_argument unless the model is on a CUDA device of a CUDA build.
  static void check_device(const torch::Device& device) {
#ifdef POLICYTRAIN_WITH_CUDA
    if (!device.is_cuda())
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::step::CudaGraph",
          policytrain::detail::format(
              "the model is on {}; a CUDA graph captures CUDA work only: move the model "
              "to a CUDA device, or drop step::CudaGraph (step::GraphEmulation runs its logic on the CPU)",
              device.str())));
#else
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::step::CudaGraph",
        policytrain::detail::format(
            "this build's LibTorch has no CUDA (the model is on {}); build against a CUDA "
            "LibTorch, or drop step::CudaGraph (step::GraphEmulation runs its logic on the CPU)",
            device.str())));
#endif
  }

  /// An eager step. Warm-up steps run on the side stream, as torch.cuda.graphs' warm-up does.
  template <class F>
  bool eager(F&& f, bool side) {
#ifdef POLICYTRAIN_WITH_CUDA
    if (side) return on_side_stream(std::forward<F>(f));
#endif
    return f();
  }

  /// Records `f` (a step) into a new graph; runs none of its device work. Returns what `f` returned.
  template <class F>
  bool capture(F&& f) {
#ifdef POLICYTRAIN_WITH_CUDA
    c10::cuda::device_synchronize();
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    return on_side_stream([&] {
      graph_->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      bool r = false;
      try {
        r = f();
      } catch (...) {
        try {
          graph_->capture_end();
        } catch (...) {
        }
        graph_.reset();
        throw;
      }
      graph_->capture_end();
      return r;
    });
#else
    (void)f;
    throw std::logic_error(policytrain::detail::error_message("policytrain::step::CudaGraph", "capture without CUDA"));
#endif
  }

  /// Launches the captured graph on the current stream.
  void replay() {
#ifdef POLICYTRAIN_WITH_CUDA
    graph_->replay();
#else
    throw std::logic_error(policytrain::detail::error_message("policytrain::step::CudaGraph", "replay without CUDA"));
#endif
  }

  /// Frees the graph and its memory pool.
  void reset() {
#ifdef POLICYTRAIN_WITH_CUDA
    graph_.reset();
#endif
  }

  /// Gradients are rewritten in place by each replay: nothing to do before one.
  template <class Params>
  static void before_replay(Params&) {}
  /// The tensor the captured step left as its output (the loss): the graph's own, rewritten by every replay.
  static torch::Tensor captured_output(const torch::Tensor& t) { return t; }
  /// After a replay: the graph has rewritten its output in place; nothing to do.
  static void update_output(torch::Tensor&, const torch::Tensor&) {}

 private:
#ifdef POLICYTRAIN_WITH_CUDA
  template <class F>
  bool on_side_stream(F&& f) {
    const auto current = c10::cuda::getCurrentCUDAStream();
    if (!side_) side_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, current.device_index());
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(*side_);
    bool r = false;
    {
      c10::cuda::CUDAStreamGuard guard(*side_);
      r = f();
    }
    at::cuda::CUDAEvent done;
    done.record(*side_);
    done.block(current);
    return r;
  }
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  std::optional<c10::cuda::CUDAStream> side_;
#endif
};

/// Runs the graph policy's logic on any device without CUDA: capture records the step, a replay releases the
/// gradients (a graph overwrites them) and runs the recorded step again on the static inputs.
class EmulationBackend {
 public:
  static constexpr std::string_view name = "step::GraphEmulation";
  static void check_device(const torch::Device&) {}
  template <class F>
  bool eager(F&& f, bool) { return f(); }
  template <class F>
  bool capture(F&& f) {
    step_ = std::forward<F>(f);
    return true;
  }
  void replay() {
    if (!step_)
      throw std::logic_error(
          policytrain::detail::error_message("policytrain::step::GraphEmulation", "replay before capture"));
    step_();
  }
  void reset() { step_ = nullptr; }
  /// A graph's backward writes fresh gradients: release them, so that the emulated backward does not accumulate.
  template <class Opt>
  static void before_replay(Opt& opt) { policytrain::detail::release_grads(opt); }
  /// A buffer of its own for the captured step's output (capture ran nothing: `t` is still the warm-up's tensor,
  /// which a callback may have kept).
  static torch::Tensor captured_output(const torch::Tensor& t) { return t.defined() ? torch::empty_like(t) : t; }
  /// After a replay: writes what the emulated step computed (`fresh`) into the output buffer, as a graph rewrites
  /// its output in place.
  static void update_output(torch::Tensor& out, const torch::Tensor& fresh) {
    if (out.defined() && fresh.defined() && !fresh.is_same(out)) out.copy_(fresh);
  }

 private:
  std::function<bool()> step_;
};

}  // namespace detail

/// The graph policy's settings.
struct GraphOptions {
  /// Eager steps before the capture (at least 1: the optimizer's state must exist before it is captured).
  int64_t warmup_steps = 3;
};

/// A step policy: the Trainer hands it each step's device work (run_step), which it runs eagerly, captures or
/// replays (see the file comment). `Backend`: detail::CudaGraphBackend (step::CudaGraph) or
/// detail::EmulationBackend (step::GraphEmulation).
template <class Backend>
class CapturedStep {
 public:
  /// Name in logs and summaries.
  static constexpr std::string_view name = Backend::name;
  /// The settings (warm-up steps).
  using Options = GraphOptions;

  /// Default settings.
  CapturedStep() = default;
  /// Throws std::invalid_argument for warmup_steps < 1.
  explicit CapturedStep(Options o) : o_(o) {
    if (o_.warmup_steps < 1)
      throw std::invalid_argument(policytrain::detail::error_message(
          policytrain::detail::format("policytrain::{}", name),
          policytrain::detail::format("warmup_steps {}; expected >= 1 (the optimizer's "
                                      "state must exist before the step is captured)",
                                      o_.warmup_steps)));
  }
  /// A copy or move takes the settings only: a graph belongs to the policy that captured it.
  ///@{
  CapturedStep(const CapturedStep& o) : o_(o.o_) {}
  CapturedStep(CapturedStep&& o) noexcept : o_(o.o_) {}
  ///@}

  /// The settings.
  const Options& options() const { return o_; }
  /// Counters since construction: steps run eagerly (warm-up and fallbacks), captures, replays, and eager steps
  /// for a batch whose shape differs from the captured one.
  ///@{
  int64_t eager_steps() const { return eager_; }
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }
  int64_t fallbacks() const { return fallbacks_; }
  ///@}

  /// Called by the Trainer (the contract: core/hooks.hpp); not meant to be called directly.
  ///@{
  template <class Ctx>
  void on_fit_begin(Ctx& ctx) {
    Backend::check_device(ctx.device());
    auto* opt = dynamic_cast<optim::GraphReplayable*>(&ctx.optimizer());
    if (!opt)
      throw std::invalid_argument(policytrain::detail::error_message(
          policytrain::detail::format("policytrain::{}", name),
          policytrain::detail::format(
              "the optimizer keeps its step state on the host (LibTorch's optimizers count steps and "
              "compute the bias correction in host code, which a replay would not run); use optim::FusedAdamW, "
              "optim::FusedAdam or optim::FusedSgd")));
    const auto why = ctx.graph_refusals();
    if (!why.empty()) {
      std::string all;
      for (const auto& w : why) all += (all.empty() ? "" : "; ") + w;
      throw std::invalid_argument(policytrain::detail::error_message(
          policytrain::detail::format("policytrain::{}", name),
          policytrain::detail::format("the step cannot be captured as configured: {}", all)));
    }
    // The graph outlives a fit (the next fit replays it at once), unless the optimizer changed; a state loaded
    // through the Trainer (a resume) drops it in load_state_dict.
    if (captured_ && opt != opt_) reset();
    opt_ = opt;
    if (!step_.defined() || step_.device() != ctx.device())
      step_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kLong).device(ctx.device()));
  }
  ///@}

  /// Nothing to save; loading a state (a resume: the optimizer's state tensors are new) drops the graph, so that
  /// the next step warms up and captures again.
  ///@{
  StateDict state_dict() const { return {}; }
  void load_state_dict(const StateDict&) { reset(); }
  ///@}

  /// Runs one step's device work `body(batch)`: eagerly (warm-up, or a batch of another shape), or by capturing
  /// it once and replaying the graph. Returns whether the step was taken (a replay: true; a skip is on the device).
  template <class Ctx, class Body>
  bool run_step(Ctx& ctx, const Batch& b, Body&& body) {
    if (warm_ < o_.warmup_steps) {
      ++warm_;
      ++eager_;
      return backend_.eager([&] { return body(b); }, /*side=*/true);
    }
    if (!captured_) capture(ctx, b, body);
    else if (!matches(b)) {
      ++fallbacks_;
      ++eager_;
      for (auto& p : unique_parameters(ctx.module()))
        if (p.grad().defined()) p.mutable_grad().zero_();
      return backend_.eager([&] { return body(b); }, /*side=*/false);
    } else {
      static_.x.copy_(b.x, /*non_blocking=*/true);
      static_.y.copy_(b.y, /*non_blocking=*/true);
    }
    step_.fill_(ctx.state().global_step);
    opt_->prepare_replay();
    Backend::before_replay(ctx.optimizer());
    in_graph_ = true;
    try {
      backend_.replay();
    } catch (...) {
      in_graph_ = false;
      throw;
    }
    in_graph_ = false;
    opt_->replayed();
    // The replayed step's own loss: the graph rewrites its loss tensor in place at every replay, so a callback
    // gets a copy (asynchronous, on the current stream) that a later replay leaves alone.
    if (captured_loss_.defined()) {
      Backend::update_output(captured_loss_, ctx.state().last_loss);
      ctx.state().last_loss = captured_loss_.clone();
    }
    ctx.replayed();
    ++replays_;
    return true;
  }

  /// Drops the graph and its memory pool (the gradients it wrote stay valid): the next step warms up and
  /// captures again.
  void reset() {
    backend_.reset();
    captured_ = false;
    warm_ = 0;
    static_ = Batch{};
    captured_loss_ = torch::Tensor();
  }

  /// Whether the step running now is captured (or replayed by the emulation).
  bool capturing() const { return in_graph_; }
  /// The device's copy of the global step of the step running now (written before each replay).
  const torch::Tensor& step_tensor() const { return step_; }
  /// Whether the Trainer must leave the gradients in place after a step (once captured: the graph writes them).
  bool keeps_grads() const { return captured_; }

 private:
  bool matches(const Batch& b) const {
    return b.x.sizes() == static_.x.sizes() && b.y.sizes() == static_.y.sizes() &&
           b.x.scalar_type() == static_.x.scalar_type() && b.y.scalar_type() == static_.y.scalar_type() &&
           b.x.device() == static_.x.device() && b.y.device() == static_.y.device();
  }

  template <class Ctx, class Body>
  void capture(Ctx& ctx, const Batch& b, Body& body) {
    static_ = Batch{b.x.clone(), b.y.clone()};
    policytrain::detail::release_grads(ctx.optimizer());  // backward allocates them in the graph's pool
    ctx.prepare_capture();
    step_.fill_(ctx.state().global_step);
    opt_->prepare_replay();  // the lr tensors are current: the captured step writes none
    in_graph_ = true;
    bool stepped = false;
    try {
      stepped = backend_.capture([this, body]() mutable -> bool { return body(static_); });
    } catch (const std::exception& e) {
      in_graph_ = false;
      throw std::runtime_error(policytrain::detail::error_message(
          policytrain::detail::format("policytrain::{}", name),
          policytrain::detail::format(
              "capturing the step failed: {}. A hook inside the step read a tensor on the host (an "
              ".item(), a print of a tensor) or allocated host-dependent state; find it with the error above, and make "
              "it graph-safe or drop it",
              e.what())));
    }
    in_graph_ = false;
    if (!stepped)
      throw std::logic_error(policytrain::detail::error_message(
          policytrain::detail::format("policytrain::{}", name),
          policytrain::detail::format("a policy decided on the host to skip the captured step; "
                                      "a captured step must skip on the device (found_inf)")));
    captured_ = true;
    captured_loss_ = Backend::captured_output(ctx.state().last_loss);  // rewritten at every replay
    ++captures_;
  }

  Options o_;
  Backend backend_;
  optim::GraphReplayable* opt_ = nullptr;
  Batch static_;
  torch::Tensor step_, captured_loss_;
  bool captured_ = false;
  bool in_graph_ = false;
  int64_t warm_ = 0, eager_ = 0, captures_ = 0, replays_ = 0, fallbacks_ = 0;
};

/// The whole optimizer step captured into one CUDA graph and replayed (see the file comment).
using CudaGraph = CapturedStep<detail::CudaGraphBackend>;
/// step::CudaGraph's logic without CUDA, for tests of a composition's graph path on the CPU.
using GraphEmulation = CapturedStep<detail::EmulationBackend>;

}  // namespace policytrain::step
