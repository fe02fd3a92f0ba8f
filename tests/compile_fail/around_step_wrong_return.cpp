// expect: HookCheck<StepWrapper.*around_step\(ctx, fn\) must return whether the step was taken
// around_step must hand back fn()'s bool (whether the step was taken, which after_step and the counters read): a
// wrapper that returns void is refused, naming the hook and the signature to write.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct StepWrapper {
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx, class F> bool around_step(Ctx&, F&& fn) { return fn(); }
#else
  template <class Ctx, class F> void around_step(Ctx&, F&& fn) { fn(); }
#endif
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, StepWrapper> trainer(task, opt);
  (void)trainer;
}
