// expect: ParallelServicesCheck<CopyingParallel.*reduce_metrics takes the MetricsAccumulator by value
// A parallel policy of a user's own whose reduce_metrics takes the accumulator by value: it compiled, reduced a copy,
// and each rank reported its own shard's loss (18.44 and 37.41 over 8 samples each instead of 27.93 over 16). The
// contract checks the parameter's reference type and names the member. The control takes it by reference.
#include <cstdint>
#include <vector>
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct CopyingParallel {
  static constexpr policytrain::Category category = policytrain::Category::parallel;
  bool is_main() const { return true; }
  int64_t world_size() const { return 1; }
  template <class Ctx> bool agree_any(Ctx&, bool b) { return b; }
  template <class Ctx> int64_t agree_min(Ctx&, int64_t v) { return v; }
  bool gradients_sharded() const { return false; }
  template <class Ctx> void reduce_gradient_statistic(Ctx&, torch::Tensor&, policytrain::GradientReduce) {}
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> void reduce_metrics(Ctx&, policytrain::MetricsAccumulator&) {}
#else
  template <class Ctx> void reduce_metrics(Ctx&, policytrain::MetricsAccumulator) {}
#endif
  template <class Ctx> void reduce_metric_states(Ctx&, const std::vector<policytrain::MetricState*>&) {}
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, CopyingParallel> trainer(task, opt);
  (void)trainer;
}
