// A user's own data: LibTorch's DataLoader through data::from_torch (workers, samplers, early exits, exact resume,
// data parallelism), data::random_split, and the CSV reader.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>

#include <policytrain/data/from_torch.hpp>
#include <policytrain/parallel.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;
namespace td = torch::data;

namespace {

/// Samples of toy_data, each target carrying its label and its index: [label, index].
struct IdDataset : td::datasets::Dataset<IdDataset> {
  torch::Tensor x, y;
  IdDataset(torch::Tensor x_, torch::Tensor y_) : x(std::move(x_)), y(std::move(y_)) {}
  td::Example<> get(size_t i) override {
    const auto k = static_cast<int64_t>(i);
    return {x[k], torch::stack({y[k], torch::tensor(k)})};
  }
  std::optional<size_t> size() const override { return static_cast<size_t>(x.size(0)); }
};

/// Trains MlpTask on the label, and records the sample indices of every batch it trains or evaluates.
struct IdTask {
  testing::MlpTask inner;
  std::vector<int64_t> trained, evaluated;
  explicit IdTask(uint64_t seed = 1) : inner(seed) {}
  torch::nn::Module& module() { return inner.module(); }
  static pt::Batch label(const pt::Batch& b) { return {b.x, b.y.select(1, 0)}; }
  static void record(std::vector<int64_t>& to, const pt::Batch& b) {
    auto ids = b.y.select(1, 1).contiguous();
    to.insert(to.end(), ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  torch::Tensor training_step(const pt::Batch& b) {
    record(trained, b);
    return inner.training_step(label(b));
  }
  pt::Prediction validation_step(const pt::Batch& b) {
    record(evaluated, b);
    return inner.validation_step(label(b));
  }
};

auto id_dataset(int64_t n = 64) {
  auto [x, y] = testing::toy_data(n);
  return IdDataset(x, y).map(td::transforms::Stack<>());
}

/// A sampler that does not say how many samples it gives: LibTorch's SequentialSampler behind another type.
struct Unsized : td::samplers::SequentialSampler {
  using SequentialSampler::SequentialSampler;
};

/// The indices LibTorch's own sampler gives for `epoch`, batch by batch (the oracle of the order).
std::vector<int64_t> sampler_order(td::samplers::DistributedRandomSampler s, int64_t epoch, size_t batch) {
  s.set_epoch(static_cast<size_t>(epoch));
  s.reset();
  std::vector<int64_t> v;
  while (auto b = s.next(batch)) v.insert(v.end(), b->begin(), b->end());
  return v;
}

std::vector<torch::Tensor> params_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> v;
  for (auto& p : m.parameters()) v.push_back(p.detach().clone());
  return v;
}
bool same_params(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

auto options(size_t workers, size_t batch = 8) { return td::DataLoaderOptions().batch_size(batch).workers(workers); }

}  // namespace

TEST_CASE("from_torch: LibTorch's DataLoader with 2 workers passes every early exit, in the sampler's order") {
  constexpr int64_t n = 64;
  IdTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.05);
  pt::Trainer trainer(task, opt);
  auto train = pt::data::from_torch(id_dataset(n), td::samplers::DistributedRandomSampler(n), options(2));
  auto val = pt::data::from_torch(id_dataset(n), td::samplers::SequentialSampler(n), options(2));
  CHECK(train.batches_per_epoch() == 8);
  CHECK(val.num_samples() == n);

  // limit_train_batches: each epoch leaves the pass after 3 batches; the next epoch starts a new one, in the order
  // LibTorch's sampler gives for that epoch.
  trainer.fit(train, {.epochs = 2, .limit_train_batches = 3});
  std::vector<int64_t> expect;
  for (int64_t e = 0; e < 2; ++e) {
    auto o = sampler_order(td::samplers::DistributedRandomSampler(n), e, 8);
    expect.insert(expect.end(), o.begin(), o.begin() + 24);
  }
  CHECK(task.trained == expect);

  // evaluate(loader, limit) twice: two passes left early, each from the start.
  const auto m1 = trainer.evaluate(val, 2);
  const auto m2 = trainer.evaluate(val, 2);
  CHECK(m1.samples == 16);
  CHECK(m2.samples == 16);
  CHECK(m1.loss == m2.loss);
  std::vector<int64_t> first16(16);
  std::iota(first16.begin(), first16.end(), int64_t{0});
  first16.insert(first16.end(), first16.begin(), first16.end());
  CHECK(task.evaluated == first16);
  CHECK(trainer.evaluate(val).samples == n);  // and a whole pass after them
}

TEST_CASE("from_torch: a max_steps stop mid-epoch, then another fit, equals the uninterrupted run bit for bit") {
  constexpr int64_t n = 64;
  auto run = [&](bool split) {
    IdTask task;
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    pt::Trainer trainer(task, opt);
    auto train = pt::data::from_torch(id_dataset(n), td::samplers::RandomSampler(n), options(2), {.seed = 5});
    if (split) {
      const auto r = trainer.fit(train, {.epochs = 3, .max_steps = 11});  // epoch 1, 3 of its 8 batches
      CHECK(r.global_steps == 11);
      CHECK(trainer.state().epoch == 1);
      CHECK(trainer.state().batch_in_epoch == 3);
    }
    trainer.fit(train, {.epochs = 3});
    return std::pair(params_of(task.module()), task.trained);
  };
  const auto [whole, whole_ids] = run(false);
  const auto [split, split_ids] = run(true);
  CHECK(split_ids == whole_ids);
  CHECK(same_params(split, whole));
  // Every epoch trains every sample once, and the orders of epochs differ (RandomSampler seeded by (seed, epoch)).
  REQUIRE(whole_ids.size() == 3 * n);
  for (int64_t e = 0; e < 3; ++e) {
    std::set<int64_t> s(whole_ids.begin() + e * n, whole_ids.begin() + (e + 1) * n);
    CHECK(s.size() == static_cast<size_t>(n));
  }
  CHECK(!std::equal(whole_ids.begin(), whole_ids.begin() + n, whole_ids.begin() + n));
}

TEST_CASE("checkpoint::Disk: a max_steps stop mid-epoch is saved where it stopped, for every loader, and resumes exactly") {
  // The unsized loader: a sampler whose sample count is unknown, so the Trainer learns the epoch's length only at
  // its end. Before the Trainer said whether the epoch was cut, its last.ckpt said "epoch 2, batch 0" here.
  constexpr int64_t n = 64;
  auto [x, y] = testing::toy_data(n);
  using Train = pt::Trainer<IdTask, pt::checkpoint::Disk>;
  auto run = [&](const fs::path& dir, auto make_loader, int64_t max_steps, bool resume) {
    IdTask task;
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    Train trainer(task, opt, pt::checkpoint::Disk({.directory = dir, .resume = resume ? "auto" : "",
                                                   .export_final = false, .log = nullptr}));
    auto loader = make_loader();
    trainer.fit(loader, {.epochs = 3, .max_steps = max_steps});
    return std::tuple(params_of(task.module()), task.trained, trainer.state().epoch, trainer.state().batch_in_epoch);
  };
  auto check_loader = [&](const char* name, auto make_loader) {
    CAPTURE(name);
    const fs::path dir = testing::temp_dir(std::string("own_data_maxsteps_") + name);
    const auto [whole, whole_ids, e0, b0] = run(dir / "whole", make_loader, -1, false);
    const auto [p1, ids1, e1, b1] = run(dir / "cut", make_loader, 13, false);  // epoch 1, batch 5 of 8
    CHECK(e1 == 1);
    CHECK(b1 == 5);
    auto meta = pt::checkpoint::read_meta(dir / "cut" / "last.ckpt");
    CHECK(meta.at("epoch").template get<int64_t>() == 1);
    CHECK(meta.at("batch_in_epoch").template get<int64_t>() == 5);
    const auto [p2, ids2, e2, b2] = run(dir / "cut", make_loader, -1, true);
    CHECK(same_params(p2, whole));
    std::vector<int64_t> joined = ids1;
    joined.insert(joined.end(), ids2.begin(), ids2.end());
    CHECK(joined == whole_ids);  // every sample trained once per epoch, in the uninterrupted order
  };
  check_loader("tensor_loader", [&] { return pt::data::TensorLoader(x, torch::stack({y, torch::arange(n)}, 1), {.batch_size = 8, .seed = 2}); });
  check_loader("distributed_random", [&] {
    return pt::data::from_torch(id_dataset(n), td::samplers::DistributedRandomSampler(n), options(2));
  });
  check_loader("unsized", [&] { return pt::data::from_torch(id_dataset(n), Unsized(n), options(2)); });
}
