// expect: the Task lacks `torch::Tensor training_step\(const policytrain::Batch&\)`
// A Task without training_step.
#include <torch/torch.h>
#include <policytrain/policytrain.hpp>
#include "../unit/helpers.hpp"

struct Regressor {
  torch::nn::Linear net{4, 1};
  torch::nn::Module& module() { return *net; }
#ifdef POLICYTRAIN_CF_CONTROL
  torch::Tensor training_step(const policytrain::Batch& b) { return torch::mse_loss(net(b.x), b.y); }
#else
  torch::Tensor train_step(const policytrain::Batch& b) { return torch::mse_loss(net(b.x), b.y); }
#endif
};

int main() {
  Regressor task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  policytrain::Trainer<Regressor> trainer(task, opt);
  (void)trainer;
}
