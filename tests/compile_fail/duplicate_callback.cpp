// expect: the same callback type is given twice; give each callback once
// One callback type twice: ambiguous for get<T>() and for the hook order, so it is refused.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct Counter {
  int n = 0;
  template <class Ctx> void after_step(Ctx&, bool) { ++n; }
};
struct Other {};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
#ifdef POLICYTRAIN_CF_CONTROL
  policytrain::Trainer<testing::MlpTask, Counter, Other> trainer(task, opt);
#else
  policytrain::Trainer<testing::MlpTask, Counter, Counter> trainer(task, opt);
#endif
  (void)trainer;
}
