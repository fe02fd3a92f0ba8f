// expect: step::CudaGraph captures the optimizer step, but this policy has hooks inside it
// A callback with a hook inside the step (before_step), composed with the graph policy without declaring itself
// graph-safe: a static_assert names it and the fix. The control declares `graph_safe = true`.
#include <torch/torch.h>
#include <policytrain/all.hpp>
#include "../unit/helpers.hpp"

struct ReadsNormOnHost {
#ifdef POLICYTRAIN_CF_CONTROL
  static constexpr bool graph_safe = true;
#endif
  template <class Ctx>
  void before_step(Ctx& ctx) { (void)ctx; }
};

int main() {
  testing::MlpTask task;
  policytrain::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
  policytrain::Trainer<testing::MlpTask, ReadsNormOnHost, policytrain::step::CudaGraph> trainer(task, opt);
  (void)trainer;
}
