// expect: HookCheck<Tally.*a stateful policy .* must declare `static constexpr std::string_view name`
// A stateful policy without a name would have no prefix in a checkpoint.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct Tally {
#ifdef POLICYTRAIN_CF_CONTROL
  static constexpr std::string_view name = "Tally";
#endif
  int64_t n = 0;
  policytrain::StateDict state_dict() const { return {{"n", policytrain::scalar_tensor(n)}}; }
  void load_state_dict(const policytrain::StateDict& d) { n = policytrain::state_int(d, "n"); }
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, Tally> trainer(task, opt);
  (void)trainer;
}
