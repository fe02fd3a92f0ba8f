// expect: HookCheck<StopOnStepEnd.*on_step_end\(ctx\) must return void \(the Trainer drops its result.*HookCheck<FlagBeforeStep.*before_step\(ctx\) must return void
// A hook whose result the Trainer drops (issue 37): `bool on_step_end` meant as "stop" and `bool before_step` compiled
// and their results were thrown away. Each is a static_assert naming the hook, where to return a stop instead, and the
// signature; the compiler's "in instantiation of HookCheck<...>" line names the policy. The control returns void.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct StopOnStepEnd {
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> void on_step_end(Ctx&) {}
#else
  template <class Ctx> bool on_step_end(Ctx& ctx) { return ctx.state().global_step >= 10; }
#endif
};

struct FlagBeforeStep {
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> void before_step(Ctx&) {}
#else
  template <class Ctx> bool before_step(Ctx&) { return true; }
#endif
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, StopOnStepEnd, FlagBeforeStep> trainer(task, opt);
  (void)trainer;
}
