// expect: policytrain::memory::recompute: an argument is of a type recompute cannot see into
// A struct of yours holding tensors (a U-Net's skip connections) passed to memory::recompute: recompute cannot see
// into it, so its tensors would be copied as plain values and get no gradient (or be back-propagated twice). A
// static_assert refuses it and names the fix; the compiler's "in instantiation of RecomputeArgument<Skips>" line
// names the type. The control passes the same tensors in a std::tuple, which recompute walks.
#include <torch/torch.h>
#include <policytrain/memory/recompute.hpp>

struct Skips {
  torch::Tensor near, far;
};

int main() {
  auto x = torch::randn({2}, torch::requires_grad());
#ifdef POLICYTRAIN_CF_CONTROL
  std::tuple<torch::Tensor, torch::Tensor> skips{x * 2, x * 3};
  auto y = policytrain::memory::recompute(
      [](const torch::Tensor& h, const std::tuple<torch::Tensor, torch::Tensor>& s) {
        return h + std::get<0>(s) + std::get<1>(s);
      },
      x, skips);
#else
  Skips skips{x * 2, x * 3};
  auto y = policytrain::memory::recompute([](const torch::Tensor& h, const Skips& s) { return h + s.near + s.far; }, x, skips);
#endif
  (void)y;
}
