#pragma once
/// \file
/// callbacks::StepPhases — host-side timing of each training micro-step's phases from the Trainer's hooks:
///   data     from the end of the previous micro-step (or the epoch's start) to the start of the forward
///            (waiting for the loader, moving the batch to the device);
///   forward  around_forward (training only: calls under NoGradGuard, i.e. evaluation, are not timed);
///   backward around_backward;
///   step     from the end of the last backward of a window to this callback's after_step: the precision
///            policy's unscale, clipping, the optimizer step and the after_step hooks of the policies before it.
/// Not a callback on its own: MetricsLog and TensorBoard each hold one. Cost: four clock reads per micro-step.
/// On CUDA the times are host times: kernels run asynchronously, so "data" can absorb compute that the host
/// waits for when it next synchronises.
#include <chrono>
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace policytrain::callbacks {

/// The phase durations of one optimizer step (summed over its micro-steps), in seconds.
struct PhaseTimes {
  ///@{
  /// Seconds in each phase (data, forward, backward, step; see the file comment).
  double data = 0, forward = 0, backward = 0, step = 0;
  ///@}
  /// Sum of the phases.
  double total() const { return data + forward + backward + step; }
  /// Adds `o` phase by phase.
  PhaseTimes& operator+=(const PhaseTimes& o) {
    data += o.data; forward += o.forward; backward += o.backward; step += o.step;
    return *this;
  }
};

/// Times each training micro-step's phases from the Trainer's hooks (see the file comment).
class StepPhases {
 public:
  /// The clock phases are timed with.
  using Clock = std::chrono::steady_clock;

  /// Where one phase began and ended (for traces).
  struct Span {
    /// The phase: "data", "forward", "backward" or "step".
    const char* name;
    ///@{
    /// When the phase began and ended.
    Clock::time_point begin, end;
    ///@}
  };

  /// Marks the epoch's start, where the first data phase begins.
  void epoch_begin() { mark_ = Clock::now(); }

  /// Times fn() as the forward (and the gap before it as data). Returns fn()'s result.
  template <class F>
  decltype(auto) forward(F&& fn) {
    if (!torch::GradMode::is_enabled()) return fn();  // evaluation
    const auto t0 = Clock::now();
    add(spans_data_, "data", mark_, t0, cur_.data);
    struct After {
      StepPhases* s; Clock::time_point t0;
      ~After() { s->add(s->spans_data_, "forward", t0, Clock::now(), s->cur_.forward); }
    } after{this, t0};
    return fn();
  }
  /// Times fn() as the backward; `last` says an optimizer step follows.
  template <class F>
  void backward(F&& fn, bool last) {
    const auto t0 = Clock::now();
    fn();
    const auto t1 = Clock::now();
    add(spans_data_, "backward", t0, t1, cur_.backward);
    mark_ = t1;
  }
  /// Ends the optimizer step: returns the phases of the window and starts the next.
  PhaseTimes step_end() {
    const auto t1 = Clock::now();
    add(spans_data_, "step", mark_, t1, cur_.step);
    mark_ = t1;
    PhaseTimes out = cur_;
    cur_ = {};
    last_spans_.swap(spans_data_);
    spans_data_.clear();
    return out;
  }
  /// The phases of the last completed optimizer step, in order, with their times.
  const std::vector<Span>& last_spans() const { return last_spans_; }

 private:
  void add(std::vector<Span>& v, const char* name, Clock::time_point a, Clock::time_point b, double& acc) {
    acc += std::chrono::duration<double>(b - a).count();
    v.push_back({name, a, b});
  }
  Clock::time_point mark_ = Clock::now();
  PhaseTimes cur_;
  std::vector<Span> spans_data_, last_spans_;
};

}  // namespace policytrain::callbacks
