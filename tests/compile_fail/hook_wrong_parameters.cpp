// expect: HookCheck<StepLogger.*declares after_step, but it cannot be called as after_step\(ctx, stepped\)
// A hook whose parameters the Trainer cannot pass.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct StepLogger {
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> void after_step(Ctx&, bool) {}
#else
  void after_step(int step) {}
#endif
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, StepLogger> trainer(task, opt);
  (void)trainer;
}
