// expect: ParallelServicesCheck<BoolOnlyParallel.*lacks `template <class Ctx> bool agree_any\(Ctx& ctx, bool b\)`
// A parallel policy of a user's own whose agree_any takes only the flag: before the parallel-services contract
// (core/parallel_services.hpp) the Trainer's inline `requires` did not match it and fell back to one process's
// identity, so it compiled and the ranks could disagree at run time. The control declares it with the context.
#include <cstdint>
#include <vector>
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct BoolOnlyParallel {
  static constexpr policytrain::Category category = policytrain::Category::parallel;
  bool is_main() const { return true; }
  int64_t world_size() const { return 1; }
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> bool agree_any(Ctx&, bool b) { return b; }
#else
  bool agree_any(bool b) { return b; }
#endif
  template <class Ctx> int64_t agree_min(Ctx&, int64_t v) { return v; }
  bool gradients_sharded() const { return false; }
  template <class Ctx> void reduce_gradient_statistic(Ctx&, torch::Tensor&, policytrain::GradientReduce) {}
  template <class Ctx> void reduce_metrics(Ctx&, policytrain::MetricsAccumulator&) {}
  template <class Ctx> void reduce_metric_states(Ctx&, const std::vector<policytrain::MetricState*>&) {}
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, BoolOnlyParallel> trainer(task, opt);
  (void)trainer;
}
