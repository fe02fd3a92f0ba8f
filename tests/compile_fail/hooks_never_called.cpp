// expect: HookCheck<TemplateAfterStep.*declares after_step, but it cannot be called as after_step\(ctx, stepped\).*void after_step\(Ctx& ctx, bool stepped\).*HookCheck<MutableMetrics.*declares on_validation_end, but it cannot be called as on_validation_end\(ctx, metrics\).*HookCheck<EpochIndex.*declares on_epoch_begin, but it cannot be called as on_epoch_begin\(ctx\).*HookCheck<Misspelt.*declares on_epoch_ends, which is not a hook.*did you mean on_epoch_end\?
// Hooks that compiled and were silently never called (issue 30): a member template with parameters the Trainer
// cannot pass (after_step taking a string, on_validation_end taking non-const Metrics, on_epoch_begin taking an
// epoch) and a name one letter away from a hook's (on_epoch_ends). Each is a static_assert naming the hook and the
// signature it needs; the compiler's "in instantiation of HookCheck<...>" line names the policy. The control
// declares the four hooks as the Trainer calls them.
#include <cstdint>
#include <string>

#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct TemplateAfterStep {
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> void after_step(Ctx&, bool) {}
#else
  template <class Ctx> void after_step(Ctx&, const std::string&) {}
#endif
};

struct MutableMetrics {
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> void on_validation_end(Ctx&, const policytrain::Metrics&) {}
#else
  template <class Ctx> void on_validation_end(Ctx&, policytrain::Metrics&) {}
#endif
};

struct EpochIndex {
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> void on_epoch_begin(Ctx&) {}
#else
  template <class Ctx> void on_epoch_begin(Ctx&, int64_t) {}
#endif
};

struct Misspelt {
#ifdef POLICYTRAIN_CF_CONTROL
  template <class Ctx> bool on_epoch_end(Ctx&) { return false; }
#else
  template <class Ctx> bool on_epoch_ends(Ctx&) { return false; }
#endif
};

int main() {
  testing::MlpTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<testing::MlpTask, TemplateAfterStep, MutableMetrics, EpochIndex, Misspelt> trainer(task, opt);
  (void)trainer;
}
