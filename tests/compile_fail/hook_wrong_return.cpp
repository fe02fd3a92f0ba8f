// expect: HookCheck<EpochCounter.*on_epoch_end\(ctx\) returns neither void nor bool
// A hook with a wrong return type: the message says what to return, the instantiation names the policy.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct EpochCounter {
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> bool on_epoch_end(Ctx&) { return false; }
#else
  template <class Ctx> int on_epoch_end(Ctx&) { return 0; }
#endif
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, EpochCounter> trainer(task, opt);
  (void)trainer;
}
