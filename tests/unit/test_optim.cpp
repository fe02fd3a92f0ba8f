// optim::FusedAdamW against LibTorch's own AdamW: same parameters after many steps, same saved state.
#include <doctest/doctest.h>

#include <sstream>

#include <policytrain/optim/fused_adamw.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;

TEST_CASE("FusedAdamW follows torch::optim::AdamW step for step") {
  auto [x, y] = testing::toy_data(64);
  for (bool amsgrad : {false, true}) {
    CAPTURE(amsgrad);
    testing::MlpTask a(1), b(2);
    testing::copy_weights(b.module(), a.module());
    const auto opts = torch::optim::AdamWOptions(3e-3).weight_decay(0.05).betas({0.9, 0.99}).eps(1e-8).amsgrad(amsgrad);
    torch::optim::AdamW ref(a.module().parameters(), opts);
    pt::optim::FusedAdamW fused(b.module().parameters(), opts);
    for (int step = 0; step < 25; ++step) {
      auto idx = torch::arange(step % 4 * 16, step % 4 * 16 + 16);
      pt::Batch batch{x.index_select(0, idx), y.index_select(0, idx)};
      for (auto* t : {&a, &b}) t->training_step(batch).backward();
      ref.step();
      fused.step();
      ref.zero_grad();
      fused.zero_grad();
    }
    CHECK(testing::max_rel_diff(b.module(), a.module()) < 1e-5);
    CHECK_FALSE(testing::same_params(b.module(), testing::MlpTask(1).module()));  // it did train
    // Same state layout: the fused optimizer's state loads into a plain AdamW and the steps agree.
    for (auto& p : b.module().parameters()) {
      auto& s = static_cast<torch::optim::AdamWParamState&>(*fused.state().at(p.unsafeGetTensorImpl()));
      CHECK(s.step() == 25);
    }
  }
}

TEST_CASE("FusedAdamW resumes from saved state exactly like an uninterrupted run") {
  auto [x, y] = testing::toy_data(32);
  pt::Batch batch{x, y};
  testing::MlpTask a(1), b(2);
  testing::copy_weights(b.module(), a.module());
  const auto opts = torch::optim::AdamWOptions(1e-2).weight_decay(0.01);
  pt::optim::FusedAdamW oa(a.module().parameters(), opts);
  pt::optim::FusedAdamW ob(b.module().parameters(), opts);
  auto train = [&](testing::MlpTask& t, torch::optim::Optimizer& o, int n) {
    for (int i = 0; i < n; ++i) {
      t.training_step(batch).backward();
      o.step();
      o.zero_grad();
    }
  };
  train(a, oa, 10);
  train(b, ob, 4);
  std::stringstream buf;
  {
    torch::serialize::OutputArchive ar;
    ob.save(ar);
    ar.save_to(buf);
  }
  pt::optim::FusedAdamW ob2(b.module().parameters(), opts);  // a fresh optimizer, as after a restart
  torch::serialize::InputArchive in;
  in.load_from(buf);
  ob2.load(in);
  train(b, ob2, 6);
  CHECK(testing::max_rel_diff(b.module(), a.module()) < 1e-6);
}
