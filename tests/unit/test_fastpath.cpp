// The fast path: prefetching loader (order, augmentation, persistence, skipping), gradient clipping (against
// LibTorch's clip_grad_norm_, after unscaling), metrics logs, performance knobs.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "unit/device_checks.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace pd = policytrain::data;
using testing::MlpTask;

namespace {

/// Random "images" [n, c, h, w] and labels.
std::pair<torch::Tensor, torch::Tensor> images(int64_t n = 100, int64_t c = 1, int64_t h = 28, int64_t w = 28) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(11);
  return {torch::rand({n, c, h, w}, gen), torch::randint(0, 10, {n}, gen, torch::kLong)};
}

std::vector<pt::Batch> collect(pd::PrefetchLoader& l) {
  std::vector<pt::Batch> out;
  for (auto&& b : l) out.push_back(b);
  return out;
}

bool same_batches(const std::vector<pt::Batch>& a, const std::vector<pt::Batch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i].x, b[i].x) || !torch::equal(a[i].y, b[i].y)) return false;
  return true;
}

/// A precision-category policy that scales the loss by S and unscales the gradients in before_step, as a
/// loss-scaling policy does; it reports its scale through loss_scale().
struct ScaleBy {
  static constexpr pt::Category category = pt::Category::precision;
  static constexpr std::string_view name = "test::ScaleBy";
  double s = 1024.0;
  template <class C> torch::Tensor transform_loss(C&, torch::Tensor l) { return l * s; }
  template <class C> void before_step(C& c) {
    torch::NoGradGuard ng;
    for (auto& p : c.module().parameters())
      if (p.grad().defined()) p.grad().div_(s);
  }
  double loss_scale() const { return s; }
};

/// A loss large enough that clipping at max_norm = 0.1 acts.
std::vector<torch::Tensor> grads_of(MlpTask& t, const pt::Batch& b) {
  t.module().zero_grad();
  (t.training_step(b) * 10).backward();
  std::vector<torch::Tensor> g;
  for (auto& p : t.module().parameters()) g.push_back(p.grad());
  return g;
}

std::vector<std::string> read_lines(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);) if (!l.empty()) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("PrefetchLoader yields exactly TensorLoader's batches, in its order, with 0, 1 and 3 workers") {
  auto [x, y] = images(100);
  for (int64_t rank : {0, 1}) {
    const pd::LoaderOptions lo{.batch_size = 16, .shuffle = true, .seed = 5, .rank = rank, .world_size = 2};
    pd::TensorLoader ref(x, y, lo);
    for (int64_t workers : {0, 1, 3}) {
      CAPTURE(workers);
      CAPTURE(rank);
      pd::PrefetchLoader l(x, y, lo, {.workers = workers, .prefetch = 2});
      REQUIRE(l.size() == ref.size());
      for (int64_t epoch : {0, 1, 2}) {
        ref.set_epoch(epoch);
        l.set_epoch(epoch);
        std::vector<pt::Batch> expected;
        for (auto&& b : ref) expected.push_back(b);
        CHECK(same_batches(collect(l), expected));
      }
    }
  }
}

TEST_CASE("PrefetchLoader's augmentation is deterministic for a seed whatever the number of workers") {
  auto [x, y] = images(90);
  const pd::LoaderOptions lo{.batch_size = 16, .shuffle = true, .seed = 9};
  pd::PrefetchOptions po{.workers = 0};
  po.augment.enabled = true;
  std::vector<std::vector<pt::Batch>> runs;
  for (int64_t workers : {0, 1, 3}) {
    po.workers = workers;
    pd::PrefetchLoader l(x, y, lo, po);
    l.set_epoch(1);
    runs.push_back(collect(l));
  }
  CHECK(same_batches(runs[0], runs[1]));
  CHECK(same_batches(runs[0], runs[2]));
  // The augmentation acts (the batches differ from the plain ones) and changes with the epoch.
  pd::TensorLoader ref(x, y, lo);
  ref.set_epoch(1);
  CHECK_FALSE(torch::equal(runs[0][0].x, ref.batch(0).x));
  CHECK(torch::equal(runs[0][0].y, ref.batch(0).y));
  pd::PrefetchLoader l2(x, y, lo, po);
  l2.set_epoch(2);
  ref.set_epoch(2);
  auto e2 = collect(l2);
  CHECK(torch::equal(e2[0].y, ref.batch(0).y));
  CHECK_FALSE(same_batches(e2, runs[0]));
}

TEST_CASE("Augmentation: a flip is torch::flip of the input, a crop a shifted window of the zero-padded input") {
  auto [x, y] = images(64, 2, 12, 10);
  auto idx = torch::arange(64, torch::kLong);
  pd::PrefetchOptions po;
  po.augment.enabled = true;
  SUBCASE("flip only") {
    po.augment.crop_padding = 0;
    auto b = pd::assemble_batch(x, y, idx, po, /*seed=*/3, /*epoch=*/0, /*index=*/0);
    int flips = 0;
    for (int64_t j = 0; j < 64; ++j) {
      const bool same = torch::equal(b.x[j], x[j]);
      const bool flipped = torch::equal(b.x[j], torch::flip(x[j], {-1}));
      CHECK((same || flipped));
      flips += flipped;
    }
    CHECK(flips > 10);  // about half of 64
    CHECK(flips < 54);
  }
  SUBCASE("crop and flip against padding, slicing and flipping with ATen ops") {
    po.augment.crop_padding = 4;
    auto b = pd::assemble_batch(x, y, idx, po, 3, 0, 0);
    auto padded = torch::constant_pad_nd(x, {4, 4, 4, 4}, 0.0);
    int matched = 0, shifted = 0;
    for (int64_t j = 0; j < 64; ++j) {
      // Find the window (and flip) that explains the output; exactly the windows of the padded image qualify.
      bool found = false;
      for (int64_t dy = -4; dy <= 4 && !found; ++dy)
        for (int64_t dx = -4; dx <= 4 && !found; ++dx)
          for (bool f : {false, true}) {
            auto win = padded[j].narrow(1, 4 + dy, 12).narrow(2, 4 + dx, 10);
            if (f) win = torch::flip(win, {-1});
            if (torch::equal(b.x[j], win)) {
              found = true;
              shifted += (dy != 0 || dx != 0);
              break;
            }
          }
      matched += found;
    }
    CHECK(matched == 64);
    CHECK(shifted > 40);  // 1 in 81 draws is (0, 0)
    // The same draws give the same windows as the exposed draw list says.
    auto draws = pd::detail::draw_augmentations(po.augment, 3, 0, 0, 64);
    for (int64_t j : {0, 7, 63}) {
      auto win = padded[j].narrow(1, 4 + draws[j].dy, 12).narrow(2, 4 + draws[j].dx, 10);
      if (draws[j].flip) win = torch::flip(win, {-1});
      CHECK(torch::equal(b.x[j], win));
    }
  }
  SUBCASE("normalisation, then channels-last") {
    po.augment.enabled = false;
    po.normalize = {.enabled = true, .mean = 0.25f, .std = 0.5f};
    po.channels_last = true;
    auto b = pd::assemble_batch(x, y, idx, po, 3, 0, 0);
    CHECK(b.x.is_contiguous(at::MemoryFormat::ChannelsLast));
    CHECK(torch::allclose(b.x, (x - 0.25) / 0.5, 1e-6, 1e-6));
    CHECK(torch::equal(b.y, y));
  }
}

TEST_CASE("PrefetchLoader normalises per channel: (x[c] - mean[c]) / std[c], the single-value form still applies to all") {
  auto [x, y] = images(40, 3, 5, 4);
  const pd::LoaderOptions lo{.batch_size = 8, .shuffle = true, .seed = 3};
  pd::TensorLoader ref(x, y, lo);
  const std::vector<float> mean{0.1f, 0.5f, 0.9f}, sd{0.2f, 0.3f, 0.4f};
  // [snippet:per_channel]
  pd::PrefetchOptions po{.workers = 2};
  po.normalize.enabled = true;
  po.normalize.channel_mean = {0.1f, 0.5f, 0.9f};  // one per channel (R, G, B)
  po.normalize.channel_std = {0.2f, 0.3f, 0.4f};
  // [/snippet:per_channel]
  pd::PrefetchLoader l(x, y, lo, po);
  const auto m = torch::tensor(mean).view({1, 3, 1, 1}), s = torch::tensor(sd).view({1, 3, 1, 1});
  size_t i = 0;
  for (auto&& b : l) {
    const auto expected = (ref.batch(i).x - m) / s;
    CHECK(torch::allclose(b.x, expected, 1e-6, 1e-6));
    CHECK(torch::equal(b.y, ref.batch(i).y));
    ++i;
  }
  CHECK(i == ref.size());
  // The channels really differ (a single mean/std would not give this batch).
  const auto b0 = l.assemble(0).x;
  CHECK_FALSE(torch::allclose(b0, (ref.batch(0).x - 0.5f) / 0.3f, 1e-3, 1e-3));
  // Single value: the same for every channel.
  pd::PrefetchOptions one{.workers = 0};
  one.normalize = {.enabled = true, .mean = 0.25f, .std = 0.5f};
  pd::PrefetchLoader l1(x, y, lo, one);
  CHECK(torch::allclose(l1.assemble(2).x, (ref.batch(2).x - 0.25f) / 0.5f, 1e-6, 1e-6));
  // A count that is not the channels', or a std <= 0, is refused up front.
  pd::PrefetchOptions bad = po;
  bad.normalize.channel_mean = {0.1f, 0.2f};
  CHECK_THROWS_WITH_AS(pd::PrefetchLoader(x, y, lo, bad), doctest::Contains("2 channel means and 3 channel stds"),
                       std::invalid_argument);
  bad = po;
  bad.normalize.channel_std = {0.2f, 0.0f, 0.4f};
  CHECK_THROWS_WITH_AS(pd::PrefetchLoader(x, y, lo, bad), doctest::Contains("std is 0"), std::invalid_argument);
}

namespace {
/// A transform that draws from the sample's generator: adds a random offset to the image and remaps the target.
pd::SampleTransform counting_transform(std::atomic<int64_t>& calls) {
  return [&calls](torch::data::Example<> ex, std::mt19937_64& rng) {
    ++calls;
    const auto offset = static_cast<float>(rng() % 1000) / 1000.0f;
    return torch::data::Example<>{ex.data + offset, (ex.target + 1) % 10};
  };
}
/// A map-style dataset over in-memory tensors that counts its reads (what an image folder's get would decode).
struct CountingDataset : torch::data::datasets::Dataset<CountingDataset> {
  torch::Tensor x, y;
  std::shared_ptr<std::atomic<int64_t>> gets = std::make_shared<std::atomic<int64_t>>(0);
  CountingDataset(torch::Tensor x_, torch::Tensor y_) : x(std::move(x_)), y(std::move(y_)) {}
  torch::data::Example<> get(size_t i) override {
    ++*gets;
    return {x[static_cast<int64_t>(i)].clone(), y[static_cast<int64_t>(i)].clone()};
  }
  std::optional<size_t> size() const override { return static_cast<size_t>(x.size(0)); }
};
}  // namespace

TEST_CASE("PrefetchLoader's user transform runs once per sample, after augmentation, as a plain loop with the same draws") {
  auto [x, y] = images(50, 3, 8, 8);
  const pd::LoaderOptions lo{.batch_size = 8, .shuffle = true, .seed = 12};
  pd::PrefetchOptions base{.workers = 0};
  base.augment.enabled = true;
  base.normalize.enabled = true;
  base.normalize.channel_mean = {0.4f, 0.5f, 0.6f};
  base.normalize.channel_std = {0.2f, 0.25f, 0.3f};
  pd::PrefetchLoader plain(x, y, lo, base);  // the built-in steps only
  std::atomic<int64_t> calls{0};
  for (int64_t workers : {0, 2}) {
    CAPTURE(workers);
    calls = 0;
    auto po = base;
    po.workers = workers;
    po.transform = counting_transform(calls);
    pd::PrefetchLoader l(x, y, lo, po);
    for (int64_t epoch : {0, 1}) {
      l.set_epoch(epoch);
      plain.set_epoch(epoch);
      size_t i = 0;
      for (auto&& b : l) {
        // The oracle: the batch without the transform, then the transform by hand on each sample with its generator.
        auto e = plain.assemble(i);
        for (int64_t j = 0; j < e.x.size(0); ++j) {
          std::mt19937_64 rng(pd::transform_seed(lo.seed, epoch, static_cast<int64_t>(i), j));
          const auto offset = static_cast<float>(rng() % 1000) / 1000.0f;
          e.x[j] += offset;
          e.y[j] = (e.y[j] + 1) % 10;
        }
        CHECK(torch::equal(b.x, e.x));
        CHECK(torch::equal(b.y, e.y));
        ++i;
      }
      CHECK(i == l.size());
    }
    CHECK(calls.load() == 2 * l.num_samples());  // exactly once per sample per epoch
  }
  // A transform that changes the shape is an error naming both shapes.
  auto po = base;
  po.transform = [](torch::data::Example<> ex, std::mt19937_64&) { return torch::data::Example<>{ex.data[0], ex.target}; };
  pd::PrefetchLoader l(x, y, lo, po);
  CHECK_THROWS_WITH_AS(*l.begin(), doctest::Contains("expected an input [3, 8, 8]"), std::invalid_argument);
}

TEST_CASE("PrefetchLoader over a dataset reads each sample once in its workers and equals the in-memory loader, 0 or 2 workers") {
  auto [x, y] = images(45, 3, 6, 6);
  const pd::LoaderOptions lo{.batch_size = 8, .shuffle = true, .seed = 21, .rank = 1, .world_size = 2};
  std::atomic<int64_t> calls{0};
  pd::PrefetchOptions po{.workers = 0};
  po.augment.enabled = true;
  po.normalize.enabled = true;
  po.normalize.channel_mean = {0.4f, 0.5f, 0.6f};
  po.normalize.channel_std = {0.2f, 0.25f, 0.3f};
  po.transform = counting_transform(calls);
  pd::PrefetchLoader memory(x, y, lo, po);
  memory.set_epoch(3);
  const auto expected = collect(memory);
  std::vector<std::vector<pt::Batch>> runs;
  for (int64_t workers : {0, 2}) {
    CAPTURE(workers);
    po.workers = workers;
    CountingDataset ds(x, y);
    auto gets = ds.gets;
    pd::PrefetchLoader l(ds, lo, po);
    CHECK(gets->load() == 1);  // sample 0, for the shapes
    REQUIRE(l.size() == memory.size());
    l.set_epoch(3);
    runs.push_back(collect(l));
    CHECK(same_batches(runs.back(), expected));
    CHECK(gets->load() == 1 + l.num_samples());
  }
  CHECK(same_batches(runs[0], runs[1]));
  // A sample of another shape is an error naming it.
  struct Ragged : torch::data::datasets::Dataset<Ragged> {
    torch::data::Example<> get(size_t i) override {
      return {torch::zeros({3, 4, i == 5 ? 5 : 4}), torch::tensor(int64_t{0})};
    }
    std::optional<size_t> size() const override { return 10; }
  };
  pd::PrefetchLoader r(Ragged{}, {.batch_size = 10}, {.workers = 0});
  CHECK_THROWS_WITH_AS(*r.begin(), doctest::Contains("sample 5 of the dataset has an input [3, 4, 5]"), std::invalid_argument);
}

TEST_CASE("PrefetchLoader keeps its workers across epochs and passes cut short") {
  auto [x, y] = images(100);
  pd::PrefetchLoader l(x, y, {.batch_size = 10, .seed = 1}, {.workers = 2, .prefetch = 2});
  pd::TensorLoader ref(x, y, {.batch_size = 10, .seed = 1});
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    l.set_epoch(epoch);
    ref.set_epoch(epoch);
    // Odd epochs stop after 3 batches, as with --limit-train-batches.
    int64_t i = 0;
    for (auto&& b : l) {
      CHECK(torch::equal(b.x, ref.batch(static_cast<size_t>(i)).x));
      if (++i == 3 && epoch % 2 == 1) break;
    }
  }
  CHECK(l.threads_started() == 2);
}

TEST_CASE("PrefetchLoader::reshard_after re-shards an epoch as TensorLoader::reshard_after does, and refuses as it does") {
  // An elastic resume (docs/parallel.md, "Elastic restarts"): a run of one world size trained `done` samples of the
  // epoch; this run, of another, re-shards the rest. TensorLoader (tested against the samples' identity in
  // test_parallel.cpp) is the reference; sizes, global batches and the point of the stop come from a seeded generator.
  std::mt19937 gen(51);
  for (int round = 0; round < 6; ++round) {
    const int64_t n = std::uniform_int_distribution<int64_t>(40, 130)(gen);
    const int64_t new_world = std::uniform_int_distribution<int64_t>(1, 4)(gen);
    const int64_t per_rank = std::uniform_int_distribution<int64_t>(1, 6)(gen);
    const int64_t global = per_rank * new_world, batches = (n + global - 1) / global;
    const int64_t done = std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(1, batches - 1))(gen) * global;
    auto [x, y] = images(n);
    for (int64_t rank = 0; rank < new_world; ++rank) {
      const pd::LoaderOptions lo{.batch_size = per_rank, .shuffle = true, .seed = 9, .rank = rank,
                                 .world_size = new_world};
      CAPTURE(n);
      CAPTURE(new_world);
      CAPTURE(per_rank);
      CAPTURE(done);
      CAPTURE(rank);
      pd::TensorLoader ref(x, y, lo);
      ref.set_epoch(1);
      const int64_t k = ref.reshard_after(done);
      std::vector<pt::Batch> expected;
      for (auto&& b : ref) expected.push_back(b);
      for (int64_t workers : {0, 2}) {
        CAPTURE(workers);
        pd::PrefetchLoader l(x, y, lo, {.workers = workers, .prefetch = 2});
        l.set_epoch(1);
        auto first = l.begin();  // a pass in progress, ended by the re-shard
        (void)*first;
        CHECK(l.reshard_after(done) == k);
        CHECK(l.num_samples() == ref.num_samples());
        CHECK(l.padding() == ref.padding());
        CHECK(same_batches(collect(l), expected));
        // Not a whole number of this run's global batches: TensorLoader's refusal, passed on.
        if (global > 1)
          CHECK_THROWS_WITH_AS(l.reshard_after(done + 1),
                               doctest::Contains("not a whole number of this run's global batches"),
                               std::invalid_argument);
      }
    }
  }
}

TEST_CASE("Skipping batches (exact resume) does not assemble them") {
  auto [x, y] = images(100);
  pd::TensorLoader ref(x, y, {.batch_size = 10, .seed = 4});
  for (int64_t workers : {0, 2}) {
    CAPTURE(workers);
    // [snippet:skip]
    pd::PrefetchLoader l(x, y, {.batch_size = 10, .seed = 4}, {.workers = workers, .prefetch = 1});
    auto it = l.begin();
    for (int k = 0; k < 5; ++k) ++it;  // what the Trainer does to skip batch_in_epoch batches
    // [/snippet:skip]
    std::vector<pt::Batch> got;
    for (; it != l.end(); ++it) got.push_back(*it);
    REQUIRE(got.size() == 5);
    for (size_t k = 0; k < 5; ++k) CHECK(torch::equal(got[k].x, ref.batch(5 + k).x));
    CHECK(l.assembled() == 5);  // batches 0-4 were never assembled
    // A skip in the middle of a pass restarts the workers at the new position.
    auto it2 = l.begin();
    CHECK(torch::equal((*it2).y, ref.batch(0).y));
    it2 += 6;
    CHECK(torch::equal((*it2).y, ref.batch(6).y));
  }
}

TEST_CASE("PrefetchLoader assembles into a ring of buffers reused across epochs, never one a consumer still holds") {
  auto [x, y] = images(200);  // 13 batches of 16, the last of 8
  const pd::LoaderOptions lo{.batch_size = 16, .shuffle = true, .seed = 2};
  pd::TensorLoader ref(x, y, lo);
  for (int64_t workers : {0, 2}) {
    CAPTURE(workers);
    pd::PrefetchOptions po{.workers = workers, .prefetch = 2};
    po.augment.enabled = true;  // assembled into the buffer, not a copy of the inputs
    pd::PrefetchLoader l(x, y, lo, po);
    pd::PrefetchOptions plain = po;
    int64_t after_first = 0;
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      l.set_epoch(epoch);
      size_t i = 0;
      for (auto&& b : l) {  // each batch is dropped before the next is read, as in a training loop
        auto expect = pd::assemble_batch(x, y, l.order().indices(i), plain, lo.seed, epoch, static_cast<int64_t>(i));
        CHECK(torch::equal(b.x, expect.x));
        CHECK(torch::equal(b.y, expect.y));
        ++i;
      }
      CHECK(i == l.size());
      if (epoch == 0) after_first = l.buffers_allocated();
    }
    // The ring holds the batches in flight (workers x prefetch, the one being read, one being dropped) and one
    // for the short last batch, whatever the number of batches read (39 here): it does not grow with them.
    CHECK(after_first <= workers * 2 + 3);
    CHECK(l.buffers_allocated() <= workers * 2 + 3);
    CHECK(l.assembled() == 3 * static_cast<int64_t>(l.size()));
    CHECK(l.buffers_reused() == l.assembled() - l.buffers_allocated());
    // A consumer that keeps every batch: no buffer it holds is written again, so every batch stays intact.
    l.set_epoch(3);
    std::vector<pt::Batch> kept(l.begin(), l.end());
    REQUIRE(kept.size() == l.size());
    for (size_t i = 0; i < kept.size(); ++i) {
      auto expect = pd::assemble_batch(x, y, l.order().indices(i), plain, lo.seed, 3, static_cast<int64_t>(i));
      CHECK(torch::equal(kept[i].x, expect.x));
    }
    CHECK(l.buffers_allocated() >= static_cast<int64_t>(kept.size()));
  }
}

TEST_CASE("BufferRing: a buffer whose copy is pending is not handed out again, and only poll() asks the copy") {
  // On CUDA the pending copy is the host-to-device copy (its event); acquire() runs on the workers and must make
  // no CUDA call, so it never asks: poll(), on the training thread, does.
  auto x = torch::rand({4, 1, 2, 2}), y = torch::zeros({4}, torch::kLong);
  pd::detail::BufferRing ring;
  std::atomic<bool> finished{false};
  std::atomic<int> asked{0};
  std::thread::id asked_on;
  const void* first = nullptr;
  {
    auto b = ring.acquire(x, y, 4);
    first = b.x.data_ptr();
    ring.pending(b, [&] {
      ++asked;
      asked_on = std::this_thread::get_id();
      return finished.load();
    });
  }  // the consumer drops the batch: no tensor aliases the buffers, but the copy is still pending
  std::thread worker([&] {
    auto b = ring.acquire(x, y, 4);
    CHECK(b.x.data_ptr() != first);  // a new pair, not the one being copied
  });
  worker.join();
  CHECK(asked == 0);
  CHECK(ring.allocated() == 2);
  CHECK(ring.poll() == 1);  // still pending
  CHECK(asked == 1);
  CHECK(asked_on == std::this_thread::get_id());
  finished = true;
  CHECK(ring.poll() == 0);
  int64_t reused = ring.reused();
  std::thread worker2([&] {
    auto b = ring.acquire(x, y, 4);
    CHECK(b.x.data_ptr() == first);
  });
  worker2.join();
  CHECK(ring.reused() == reused + 1);  // taken again once the copy finished
  CHECK(ring.allocated() == 2);
  CHECK(asked == 2);
}

TEST_CASE("The main job's test-time augmentation (--tta) averages the logits of each image and of its mirror image") {
  torch::manual_seed(3);
  fmnist::Classifier task(8);
  task.module().eval();
  torch::NoGradGuard ng;
  auto x = torch::randn({6, 1, 28, 28});
  auto y = torch::randint(10, {6}, torch::kLong);
  const auto plain = task.validation_step(pt::Batch{x, y});
  task.tta_flip = true;
  const auto tta = task.validation_step(pt::Batch{x, y});
  // By hand: the image mirrored left-right (its columns gathered in reverse order), the logits averaged, the loss
  // the cross-entropy of the average.
  auto mirrored = x.index_select(3, torch::arange(27, -1, -1, torch::kLong));
  auto expect = (task.net->forward(x) + task.net->forward(mirrored)) / 2;
  CHECK(torch::allclose(tta.output, expect, 1e-6, 1e-6));
  CHECK(tta.loss.item<double>() == doctest::Approx(torch::nn::functional::cross_entropy(expect, y).item<double>()));
  CHECK(!torch::allclose(tta.output, plain.output, 1e-3, 1e-3));
  // An image equal to its mirror image gets its plain logits.
  auto symmetric = (x + mirrored) / 2;
  CHECK(torch::allclose(task.validation_step(pt::Batch{symmetric, y}).output, task.net->forward(symmetric), 1e-5, 1e-6));
}

TEST_CASE("A Trainer fed by PrefetchLoader (2 workers) trains exactly as one fed by TensorLoader") {
  auto [x, y] = testing::toy_data(96);
  const pd::LoaderOptions lo{.batch_size = 16, .shuffle = true, .seed = 3};
  pd::TensorLoader plain(x, y, lo);
  pd::PrefetchLoader fast(x, y, lo, {.workers = 2, .prefetch = 2});
  MlpTask a(1), b(1);
  torch::optim::SGD oa(a.module().parameters(), 0.1), ob(b.module().parameters(), 0.1);
  pt::Trainer<MlpTask> ta(a, oa), tb(b, ob);
  ta.fit(plain, {.epochs = 3, .limit_train_batches = 4});
  tb.fit(fast, {.epochs = 3, .limit_train_batches = 4});
  CHECK(testing::same_params(a.module(), b.module()));
}

TEST_CASE("Clipping by norm matches torch::nn::utils::clip_grad_norm_ for p = 1, 2, 3.5, inf, and by value matches clamp") {
  auto [x, y] = testing::toy_data(32);
  const pt::Batch batch{x, y};
  for (double p : {1.0, 2.0, 3.5, std::numeric_limits<double>::infinity()}) {
    CAPTURE(p);
    MlpTask a(1), b(1);
    auto ga = grads_of(a, batch);
    auto gb = grads_of(b, batch);
    // Independent expectation of the total norm: the p-norm of all gradient elements together.
    auto flat = torch::cat({gb[0].flatten(), gb[1].flatten(), gb[2].flatten(), gb[3].flatten()});
    const double by_hand = std::isinf(p) ? flat.abs().max().item<double>() : flat.norm(p).item<double>();
    const double ref = torch::nn::utils::clip_grad_norm_(b.module().parameters(), 0.1, p);
    auto total = pt::callbacks::detail::clip_grad_norm_no_sync(ga, 0.1, p);
    CHECK(total.item<double>() == doctest::Approx(ref).epsilon(1e-5));
    CHECK(total.item<double>() == doctest::Approx(by_hand).epsilon(1e-5));
    REQUIRE(ref > 0.1);  // the clip acted
    for (size_t i = 0; i < ga.size(); ++i) CHECK(torch::allclose(ga[i], gb[i], 1e-5, 1e-7));
  }
  // Below the threshold nothing changes.
  MlpTask c(1);
  auto gc = grads_of(c, batch);
  std::vector<torch::Tensor> before;
  for (auto& g : gc) before.push_back(g.clone());
  pt::callbacks::detail::clip_grad_norm_no_sync(gc, 1e6, 2.0);
  for (size_t i = 0; i < gc.size(); ++i) CHECK(torch::equal(gc[i], before[i]));

  // By value, through a Trainer: one SGD step equals a plain loop with clamp.
  MlpTask d(1), e(1);
  torch::optim::SGD od(d.module().parameters(), 0.5), oe(e.module().parameters(), 0.5);
  using Clip = pt::callbacks::GradClip;
  pt::Trainer<MlpTask, Clip> t(d, od, Clip({.mode = Clip::Mode::value, .clip_value = 0.01}));
  std::vector<pt::Batch> data{batch};
  t.fit(data, {.epochs = 1});
  oe.zero_grad();
  e.training_step(batch).backward();
  for (auto& p : e.module().parameters()) p.grad().clamp_(-0.01, 0.01);
  oe.step();
  CHECK(testing::max_rel_diff(d.module(), e.module()) < 1e-6);
}

TEST_CASE("Clipping runs after the precision policy unscales: it sees and logs the unscaled norm") {
  auto [x, y] = testing::toy_data(64);
  std::vector<pt::Batch> data{{x.slice(0, 0, 32), y.slice(0, 0, 32)}, {x.slice(0, 32), y.slice(0, 32)}};
  using Clip = pt::callbacks::GradClip;
  MlpTask a(1), b(1);
  torch::optim::SGD oa(a.module().parameters(), 0.5), ob(b.module().parameters(), 0.5);
  pt::Trainer<MlpTask, ScaleBy, Clip> t(a, oa, Clip({.mode = Clip::Mode::norm, .max_norm = 0.05, .p = 2.0}));
  t.fit(data, {.epochs = 1});
  double last_ref = 0;
  for (const auto& batch : data) {
    ob.zero_grad();
    b.training_step(batch).backward();
    last_ref = torch::nn::utils::clip_grad_norm_(b.module().parameters(), 0.05, 2.0);
    ob.step();
  }
  REQUIRE(last_ref > 0.05);
  CHECK(t.get<Clip>().last_norm() == doctest::Approx(last_ref).epsilon(1e-4));  // not 1024x
  CHECK(testing::max_rel_diff(a.module(), b.module()) < 1e-5);
}

// The Profiler (Kineto trace, schedule, key averages) is tested in test_profiler.cpp.

TEST_CASE("MetricsLog writes one CSV and JSONL row per step and per epoch, with the scale and grad norm") {
  auto dir = testing::temp_dir("metrics");
  auto [x, y] = testing::toy_data(80);
  pd::TensorLoader train(x, y, {.batch_size = 16, .seed = 1});
  pd::TensorLoader val(x, y, {.batch_size = 40, .shuffle = false});
  MlpTask task(1);
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  using Clip = pt::callbacks::GradClip;
  using Log = pt::callbacks::MetricsLog;
  pt::Trainer<MlpTask, ScaleBy, Clip, Log> t(task, opt, Clip({.mode = Clip::Mode::norm, .max_norm = 1.0}),
                                             Log({.dir = dir, .print_summary = false}));
  t.fit(train, val, {.epochs = 2});  // 5 steps per epoch
  auto csv = read_lines(dir / "steps.csv");
  REQUIRE(csv.size() == 11);
  CHECK(csv[0] == "epoch,step,batch_in_epoch,loss,lr,loss_scale,grad_norm,samples,samples_per_s,step_s,data_s,"
                  "forward_s,backward_s,optimizer_s,stepped,peak_rss_mib,peak_cuda_mib");
  auto jsonl = read_lines(dir / "steps.jsonl");
  REQUIRE(jsonl.size() == 10);
  for (size_t i = 0; i < jsonl.size(); ++i) {
    auto r = nlohmann::json::parse(jsonl[i]);
    CHECK(r.at("step") == static_cast<int64_t>(i + 1));
    CHECK(r.at("loss_scale") == 1024.0);
    CHECK(r.at("lr").get<double>() == doctest::Approx(0.1));
    CHECK(r.at("samples") == 16);
    CHECK(r.at("grad_norm").get<double>() > 0);
    const double parts = r.at("data_s").get<double>() + r.at("forward_s").get<double>() +
                         r.at("backward_s").get<double>() + r.at("optimizer_s").get<double>();
    CHECK(r.at("step_s").get<double>() == doctest::Approx(parts).epsilon(1e-6));
  }
  // The last row's norm is the clip's last measured norm; its loss the last loss.
  auto last = nlohmann::json::parse(jsonl.back());
  CHECK(last.at("grad_norm").get<double>() == doctest::Approx(t.get<Clip>().last_norm()).epsilon(1e-5));
  CHECK(last.at("loss").get<double>() == doctest::Approx(t.state().loss_value()).epsilon(1e-5));
  auto epochs = read_lines(dir / "epochs.jsonl");
  REQUIRE(epochs.size() == 2);
  REQUIRE(read_lines(dir / "epochs.csv").size() == 3);
  auto e1 = nlohmann::json::parse(epochs[1]);
  CHECK(e1.at("epoch") == 1);
  CHECK(e1.contains("val_loss"));
  CHECK(e1.contains("val_accuracy"));
  auto s = t.get<Log>().summary();
  const double w = s.at("data_wait_fraction");
  CHECK(w >= 0);
  CHECK(w <= 1);
  const auto& ph = s.at("step_seconds");
  CHECK(ph.at("total").get<double>() ==
        doctest::Approx(ph.at("data").get<double>() + ph.at("forward").get<double>() +
                        ph.at("backward").get<double>() + ph.at("step").get<double>()));
  CHECK(s.at("optimizer_steps") == 10);
}

TEST_CASE("PerfKnobs applies threads, determinism, cuDNN and TF32 flags, channels-last and the seed") {
  using Knobs = pt::callbacks::PerfKnobs;
  auto& g = at::globalContext();
  Knobs k({.channels_last = true, .cudnn_benchmark = true, .tf32 = true, .deterministic = true,
           .intra_threads = 1, .interop_threads = 1, .seed = 42});
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3));
  CHECK_FALSE(conv->weight.is_contiguous(at::MemoryFormat::ChannelsLast));
  k.apply(conv.get());
  CHECK(at::get_num_threads() == 1);
  CHECK(at::get_num_interop_threads() == 1);
  CHECK(g.deterministicAlgorithms());
  CHECK(g.benchmarkCuDNN());
  CHECK(g.allowTF32CuBLAS());
  CHECK(g.allowTF32CuDNN());
  CHECK(conv->weight.is_contiguous(at::MemoryFormat::ChannelsLast));
  auto d = k.describe();
  CHECK(d.at("deterministic") == true);
  CHECK(d.at("intra_threads") == 1);
  CHECK(d.at("interop_threads") == 1);
  CHECK(d.at("seed") == 42);
  // The seed: the same draws as seeding LibTorch by hand.
  auto a = torch::randn({4});
  torch::manual_seed(42);
  auto b = torch::randn({4});
  CHECK(torch::equal(a, b));
  pt::seed_everything(42);
  CHECK(torch::equal(torch::randn({4}), b));
  // Off again.
  Knobs off(Knobs::Options{});
  off.apply();
  CHECK_FALSE(g.deterministicAlgorithms());
  CHECK_FALSE(g.benchmarkCuDNN());
  CHECK_FALSE(g.allowTF32CuBLAS());
}

TEST_CASE("PerfKnobs: channels-last (and TF32 where it applies) keep the CNN's eval output within TF32's bound") {
  // The CPU half of the CUDA PerfKnobs test: eval mode, the tolerance derived from TF32's unit roundoff.
  const auto gap = device_checks::perf_knobs_gap(torch::kCPU);
  CAPTURE(gap.max_abs_diff);
  CHECK(gap.tolerance > 0);
  CHECK(gap.max_abs_diff <= gap.tolerance);
}
