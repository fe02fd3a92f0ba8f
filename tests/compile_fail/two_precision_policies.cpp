// expect: more than one precision policy given; keep exactly one precision:: policy
// Two policies of one category: a static_assert names the category and the fix.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct MyPrecision {
  static constexpr policytrain::Category category = policytrain::Category::precision;
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
#ifdef POLICYTRAIN_CF_CONTROL
  policytrain::Trainer<testing::MlpTask, MyPrecision> trainer(task, opt);
#else
  policytrain::Trainer<testing::MlpTask, policytrain::precision::Fp32, MyPrecision> trainer(task, opt);
#endif
  (void)trainer;
}
