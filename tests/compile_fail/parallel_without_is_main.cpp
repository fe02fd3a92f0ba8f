// expect: ParallelServicesCheck<RankSilentParallel.*lacks `bool is_main\(\)`
// A parallel policy of a user's own without is_main(): the Trainer used to treat every rank as the main one
// (each logged and wrote the checkpoints); the parallel-services contract names the member. The control has it.
#include <cstdint>
#include <vector>
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct RankSilentParallel {
  static constexpr policytrain::Category category = policytrain::Category::parallel;
#ifdef POLICYTRAIN_CF_CONTROL
  bool is_main() const { return true; }
#endif
  int64_t world_size() const { return 1; }
  template <class Ctx> bool agree_any(Ctx&, bool b) { return b; }
  template <class Ctx> int64_t agree_min(Ctx&, int64_t v) { return v; }
  bool gradients_sharded() const { return false; }
  template <class Ctx> void reduce_gradient_statistic(Ctx&, torch::Tensor&, policytrain::GradientReduce) {}
  template <class Ctx> void reduce_metrics(Ctx&, policytrain::MetricsAccumulator&) {}
  template <class Ctx> void reduce_metric_states(Ctx&, const std::vector<policytrain::MetricState*>&) {}
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, RankSilentParallel> trainer(task, opt);
  (void)trainer;
}
