// expect: HookCheck<BestTracker.*lists hook::on_validation_end in its `using hooks`, but declares no on_validation_end the Trainer can call.*HookCheck<Unlisted.*declares the hook on_epoch_end but its `using hooks` does not list it
// A hook name outside the known list (`on_validaton_end`) compiles and never runs: C++ cannot enumerate a class's
// members, so the library cannot find it by itself. A policy that lists its hooks (`using hooks = policytrain::Hooks<
// policytrain::hook::...>`) has each listed hook checked to be declared as the Trainer calls it, and every hook it
// declares checked to be listed (issue 37). The control spells the hook right and lists what it declares.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct BestTracker {
  using hooks = policytrain::Hooks<policytrain::hook::on_validation_end>;
  double best = 1e9;
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> void on_validation_end(Ctx&, const policytrain::Metrics& m) { best = std::min(best, m.loss); }
#else
  template <class Ctx> void on_validaton_end(Ctx&, const policytrain::Metrics& m) { best = std::min(best, m.loss); }
#endif
};

struct Unlisted {
#ifdef POLICYTRAIN_CF_CONTROL
  using hooks = policytrain::Hooks<policytrain::hook::on_epoch_begin, policytrain::hook::on_epoch_end>;
#else
  using hooks = policytrain::Hooks<policytrain::hook::on_epoch_begin>;
#endif
  template <class Ctx> void on_epoch_begin(Ctx&) {}
  template <class Ctx> bool on_epoch_end(Ctx&) { return false; }
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, BestTracker, Unlisted> trainer(task, opt);
  (void)trainer;
}
