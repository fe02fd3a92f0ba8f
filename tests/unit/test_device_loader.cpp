// data::DeviceLoader on the CPU as its device: TensorLoader's order, the vectorised augmentation against a
// per-sample reference (plain tensor ops) and PrefetchLoader's per-pixel loops for the same draws, the draws'
// statistics against PrefetchLoader's, exact mid-epoch resume through the Trainer, and its draws under
// step::GraphEmulation (the step capturing the loader's work) against the eager Trainer.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "unit/helpers.hpp"

namespace pt = policytrain;

namespace {

// uint8 images [n, c, h, w] with every value used, labels in [0, 3).
std::pair<torch::Tensor, torch::Tensor> u8_images(int64_t n, int64_t c = 2, int64_t h = 6, int64_t w = 5, uint64_t seed = 3) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(seed);
  return {torch::randint(0, 256, {n, c, h, w}, gen, torch::kByte), torch::randint(0, 3, {n}, gen, torch::kLong)};
}

// The per-sample reference: standardise, pad with `fill`, take the window at (dy, dx), flip it, cut out the
// square; each with plain tensor ops on one image.
torch::Tensor reference_sample(const torch::Tensor& img, const torch::Tensor& a, const torch::Tensor& b,
                               const torch::Tensor& draw, const pt::data::AugmentOptions& o, int64_t cutout) {
  const int64_t h = img.size(1), w = img.size(2), p = o.crop_padding;
  auto x = img.to(torch::kFloat).mul(a.squeeze(0)).add(b.squeeze(0));  // a, b: [1, C, 1, 1]
  const int64_t dy = draw[0].item<int64_t>(), dx = draw[1].item<int64_t>();
  const bool flip = draw[2].item<int64_t>() != 0;
  auto padded = torch::full({x.size(0), h + 2 * p, w + 2 * p}, o.fill, torch::kFloat);
  padded.slice(1, p, p + h).slice(2, p, p + w).copy_(x);
  auto win = padded.slice(1, p + dy, p + dy + h).slice(2, p + dx, p + dx + w).clone();
  if (flip) win = win.flip({2});
  if (cutout > 0) {
    const int64_t y0 = draw[3].item<int64_t>() - cutout / 2, x0 = draw[4].item<int64_t>() - cutout / 2;
    const int64_t ya = std::clamp<int64_t>(y0, 0, h), yb = std::clamp<int64_t>(y0 + cutout, 0, h);
    const int64_t xa = std::clamp<int64_t>(x0, 0, w), xb = std::clamp<int64_t>(x0 + cutout, 0, w);
    win.slice(1, ya, yb).slice(2, xa, xb).fill_(o.fill);
  }
  return win;
}

// Chi-square's upper quantile (Wilson-Hilferty), at z standard deviations.
double chi2_bound(double dof, double z) {
  const double t = 2.0 / (9.0 * dof);
  return dof * std::pow(1.0 - t + z * std::sqrt(t), 3.0);
}

// A task that records the batches its training step receives (a linear model on the flattened images).
struct Recording {
  testing::MlpTask inner;
  std::vector<torch::Tensor>* seen;
  explicit Recording(std::vector<torch::Tensor>* s, int64_t in) : inner(5, in, 8, 3), seen(s) {}
  torch::nn::Module& module() { return inner.module(); }
  torch::Tensor training_step(const pt::Batch& b) {
    seen->push_back(torch::cat({b.x.flatten(), b.y.to(torch::kFloat)}));
    return inner.training_step({b.x.flatten(1), b.y});
  }
};

torch::Tensor params_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> v;
  for (auto& p : m.parameters()) v.push_back(p.detach().flatten().clone());
  return torch::cat(v);
}

}  // namespace

TEST_CASE("DeviceLoader: TensorLoader's order, sharding, padding and batches for the same seed and rank") {
  auto [x, y] = u8_images(53);
  const auto xf = x.to(torch::kFloat);
  for (int64_t world : {1, 3}) {
    for (int64_t rank = 0; rank < world; ++rank) {
      for (bool shuffle : {true, false}) {
        for (bool drop_last : {false, true}) {
          for (bool host_order : {false, true}) {
            const pt::data::LoaderOptions lo{.batch_size = 8, .shuffle = shuffle, .seed = 11, .drop_last = drop_last,
                                             .rank = rank, .world_size = world};
            pt::data::TensorLoader ref(xf, y, lo);
            pt::data::DeviceLoader dev(x, y, lo, {.host_order = host_order});
            INFO("world " << world << " rank " << rank << " shuffle " << shuffle << " drop_last " << drop_last);
            for (int64_t epoch : {0, 1, 4}) {
              ref.set_epoch(epoch);
              dev.set_epoch(epoch);
              REQUIRE(dev.size() == ref.size());
              CHECK(dev.num_samples() == ref.num_samples());
              CHECK(dev.padding() == ref.padding());
              size_t i = 0;
              for (auto b : dev) {
                CHECK(torch::equal(dev.indices(i), ref.indices(i)));
                const auto r = ref.batch(i);
                CHECK((b.x.scalar_type() == torch::kFloat));  // uint8 source: converted on the fly
                CHECK(torch::equal(b.x, r.x));
                CHECK(torch::equal(b.y, r.y));
                ++i;
              }
              CHECK(i == ref.size());
            }
          }
        }
      }
    }
  }
}

TEST_CASE("DeviceLoader: the batch's augmentation equals a per-sample reference bit for bit for the same draws, and "
          "PrefetchLoader's per-pixel loops") {
  auto [x, y] = u8_images(70, 3, 7, 6);
  pt::data::DeviceLoaderOptions o{.input_scale = 1.0 / 255, .mean = {0.2, 0.5, 0.3}, .std = {0.25, 0.4, 0.35}};
  o.augment = {.enabled = true, .crop_padding = 3, .horizontal_flip = true, .fill = -0.8f};
  for (int64_t cutout : {0, 3, 4}) {
    for (bool channels_last : {false, true}) {
      o.cutout = cutout;
      o.channels_last = channels_last;
      pt::data::DeviceLoader dev(x, y, {.batch_size = 16, .seed = 2}, o);
      const auto [a, b] = pt::data::detail::device_normalize_coefficients(o, 3, torch::kCPU);
      int64_t flips = 0, shifted = 0, cut = 0;
      for (int64_t epoch : {0, 3}) {
        dev.set_epoch(epoch);
        for (size_t i = 0; i < dev.size(); ++i) {
          const auto batch = dev.batch(i);
          const auto idx = dev.indices(i);
          const auto d = dev.draws(i);
          REQUIRE(d.size(0) == batch.size());
          CHECK(batch.x.is_contiguous(channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous));
          for (int64_t j = 0; j < batch.size(); ++j) {
            const auto want = reference_sample(x[idx[j].item<int64_t>()], a, b, d[j], o.augment, cutout);
            INFO("epoch " << epoch << " batch " << i << " sample " << j << " draw " << d[j]);
            CHECK(torch::equal(batch.x[j].contiguous(), want));
            flips += d[j][2].item<int64_t>();
            shifted += d[j][0].item<int64_t>() != 0 || d[j][1].item<int64_t>() != 0;
            cut += cutout > 0 && want.eq(o.augment.fill).any().item<bool>();
          }
        }
      }
      CHECK(flips > 0);  // the reference was exercised with each transformation
      CHECK(shifted > 0);
      if (cutout > 0) CHECK(cut > 0);
    }
  }
  SUBCASE("PrefetchLoader's augment_plane, fed the DeviceLoader's draws, gives the same float images") {
    const auto xf = x.to(torch::kFloat);
    pt::data::DeviceLoaderOptions fo;
    fo.augment = {.enabled = true, .crop_padding = 2, .horizontal_flip = true, .fill = 7.5f};
    pt::data::DeviceLoader dev(xf, y, {.batch_size = 32, .seed = 9}, fo);
    const auto batch = dev.batch(1);
    const auto idx = dev.indices(1), d = dev.draws(1);
    auto want = torch::empty_like(batch.x);
    const int64_t h = x.size(2), w = x.size(3);
    for (int64_t j = 0; j < batch.size(); ++j) {
      const pt::data::detail::SampleAug s{d[j][0].item<int64_t>(), d[j][1].item<int64_t>(), d[j][2].item<int64_t>() != 0};
      for (int64_t c = 0; c < 3; ++c)
        pt::data::detail::augment_plane(xf[idx[j].item<int64_t>()][c].contiguous().data_ptr<float>(),
                                        want[j][c].data_ptr<float>(), h, w, s, fo.augment.fill, 1.0f, 0.0f);
    }
    CHECK(torch::equal(batch.x, want));
  }
}

TEST_CASE("DeviceLoader: its draws reach every shift and flip and are uniform within a chi-square bound, as "
          "PrefetchLoader's are, and the two histograms agree") {
  const int64_t n = 16200, p = 4, cells = (2 * p + 1) * (2 * p + 1) * 2;  // 100 per cell expected
  auto x = torch::zeros({n, 1, 9, 7}, torch::kByte);
  auto y = torch::zeros({n}, torch::kLong);
  pt::data::DeviceLoaderOptions o;
  o.augment = {.enabled = true, .crop_padding = p, .horizontal_flip = true};
  o.cutout = 3;
  pt::data::DeviceLoader dev(x, y, {.batch_size = 1000, .seed = 21}, o);
  std::vector<double> hd(static_cast<size_t>(cells)), hp(static_cast<size_t>(cells)), hc(9 * 7);
  auto cell = [&](int64_t dy, int64_t dx, bool flip) {
    return static_cast<size_t>(((dy + p) * (2 * p + 1) + (dx + p)) * 2 + (flip ? 1 : 0));
  };
  for (size_t i = 0; i < dev.size(); ++i) {
    const auto d = dev.draws(i);
    const auto acc = d.accessor<int64_t, 2>();
    for (int64_t j = 0; j < d.size(0); ++j) {
      hd[cell(acc[j][0], acc[j][1], acc[j][2] != 0)] += 1;
      hc[static_cast<size_t>(acc[j][3] * 7 + acc[j][4])] += 1;
    }
  }
  const pt::data::AugmentOptions po{.enabled = true, .crop_padding = p, .horizontal_flip = true};
  for (int64_t i = 0; i * 1000 < n; ++i)
    for (const auto& s : pt::data::detail::draw_augmentations(po, 21, 0, i, std::min<int64_t>(1000, n - i * 1000)))
      hp[cell(s.dy, s.dx, s.flip)] += 1;
  auto chi2 = [](const std::vector<double>& h, double total) {
    const double e = total / static_cast<double>(h.size());
    double c = 0;
    for (double v : h) c += (v - e) * (v - e) / e;
    return c;
  };
  const double bound = chi2_bound(static_cast<double>(cells - 1), 3.719);  // p = 1e-4
  for (const auto* h : {&hd, &hp}) {
    CHECK(std::count(h->begin(), h->end(), 0.0) == 0);  // every (dy, dx, flip) reached
    CHECK(chi2(*h, static_cast<double>(n)) < bound);
  }
  CHECK(chi2(hc, static_cast<double>(n)) < chi2_bound(9 * 7 - 1, 3.719));  // cutout centres over the image
  // Homogeneity of the two histograms (same distribution), cells - 1 degrees of freedom.
  double homog = 0;
  for (size_t k = 0; k < hd.size(); ++k) {
    const double e = (hd[k] + hp[k]) / 2;
    homog += (hd[k] - e) * (hd[k] - e) / e + (hp[k] - e) * (hp[k] - e) / e;
  }
  CHECK(homog < bound);
  // Flips off, padding 0: no shift, no flip drawn.
  o.augment.horizontal_flip = false;
  o.augment.crop_padding = 0;
  pt::data::DeviceLoader still(x, y, {.batch_size = 1000, .seed = 21}, o);
  CHECK(still.draws(0).slice(1, 0, 3).abs().sum().item<int64_t>() == 0);
}

TEST_CASE("DeviceLoader: a run resumed mid-epoch from the Trainer's state gets the same batches and weights bit for "
          "bit as an uninterrupted run") {
  auto [x, y] = u8_images(58);
  pt::data::DeviceLoaderOptions o{.input_scale = 1.0 / 255, .mean = {0.4}, .std = {0.3}};
  o.augment = {.enabled = true, .crop_padding = 2, .horizontal_flip = true, .fill = -1.3f};
  o.cutout = 2;
  const pt::data::LoaderOptions lo{.batch_size = 8, .seed = 4};
  const int64_t in = 2 * 6 * 5;
  std::vector<torch::Tensor> whole, parts;
  Recording a(&whole, in);
  {
    pt::data::DeviceLoader loader(x, y, lo, o);
    torch::optim::SGD opt(a.module().parameters(), 0.05);
    pt::Trainer<Recording> t(a, opt);
    t.fit(loader, {.epochs = 3});
  }
  Recording b(&parts, in);
  pt::StateDict state;
  {
    pt::data::DeviceLoader loader(x, y, lo, o);
    torch::optim::SGD opt(b.module().parameters(), 0.05);
    pt::Trainer<Recording> t(b, opt);
    t.fit(loader, {.epochs = 3, .max_steps = 11});  // epoch 1 (8 batches each), batch 3
    state = t.state_dict();
  }
  CHECK(parts.size() == 11);
  {
    Recording c(&parts, in);
    testing::copy_weights(c.module(), b.module());
    pt::data::DeviceLoader loader(x, y, lo, o);  // a new process's loader
    torch::optim::SGD opt(c.module().parameters(), 0.05);
    pt::Trainer<Recording> t(c, opt);
    t.load_state_dict(state);
    t.fit(loader, {.epochs = 3});
    CHECK(torch::equal(params_of(c.module()), params_of(a.module())));
  }
  REQUIRE(parts.size() == whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    INFO("batch " << i);
    CHECK(torch::equal(parts[i], whole[i]));
  }
}

TEST_CASE("DeviceLoader in_step: under step::GraphEmulation the captured step makes the batches, and the loader's "
          "draws advance exactly as in the eager Trainer (short batches included)") {
  auto [x, y] = u8_images(45, 1, 6, 6);
  pt::data::DeviceLoaderOptions o{.input_scale = 1.0 / 255, .mean = {0.5}, .std = {0.25}};
  o.augment = {.enabled = true, .crop_padding = 2, .horizontal_flip = true, .fill = -2.0f};
  o.cutout = 3;
  const pt::data::LoaderOptions lo{.batch_size = 8, .seed = 6};
  auto run = [&](bool graph, std::vector<torch::Tensor>& seen) {
    Recording task(&seen, 36);
    pt::optim::FusedAdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
    auto oo = o;
    oo.in_step = graph;
    pt::data::DeviceLoader loader(x, y, lo, oo);
    pt::data::DeviceBatchTask<Recording> wrapped(task, graph ? &loader : nullptr);
    if (graph) {
      pt::Trainer<pt::data::DeviceBatchTask<Recording>, pt::step::GraphEmulation> t(wrapped, opt,
                                                                                   pt::step::GraphEmulation({.warmup_steps = 2}));
      t.fit(loader, {.epochs = 3});
      const auto& g = t.get<pt::step::GraphEmulation>();
      CHECK(g.captures() == 1);
      CHECK(g.replays() == 3 * 5 - 2);  // 6 batches an epoch: 5 full ones, the short one eager
      CHECK(g.fallbacks() == 3);
    } else {
      pt::Trainer<pt::data::DeviceBatchTask<Recording>> t(wrapped, opt);
      t.fit(loader, {.epochs = 3});
    }
    return params_of(task.module());
  };
  std::vector<torch::Tensor> eager, graph;
  const auto we = run(false, eager), wg = run(true, graph);
  REQUIRE(graph.size() == eager.size());  // the capture ran nothing: one batch per step in both
  CHECK(eager.size() == 18);
  for (size_t i = 0; i < eager.size(); ++i) {
    INFO("step " << i);
    CHECK(torch::equal(graph[i], eager[i]));
  }
  CHECK(torch::equal(wg, we));
}

TEST_CASE("DeviceLoader: bad options and misuse are refused, naming the value and the fix") {
  auto [x, y] = u8_images(10);
  CHECK_THROWS_WITH_AS(pt::data::DeviceLoader(x, y, {}, {.mean = {0.1, 0.2, 0.3}}),
                       doctest::Contains("mean has 3 values for 2 channels"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(pt::data::DeviceLoader(x, y, {}, {.std = {0.0}}), doctest::Contains("std[0] is 0, expected > 0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(pt::data::DeviceLoader(x, y, {}, {.cutout = 4}),
                       doctest::Contains("cutout 4 with augment.enabled false"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(pt::data::DeviceLoader(x.flatten(1), y, {}, {}), doctest::Contains("need images [N, C, H, W]"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(pt::data::DeviceLoader(x, y.slice(0, 0, 9), {}, {}), doctest::Contains("10 inputs but 9 targets"),
                       std::invalid_argument);
  pt::data::DeviceLoader l(x, y, {.batch_size = 4}, {});
  CHECK_THROWS_WITH_AS(l.materialize(l.batch(0)), doctest::Contains("expected a ticket"), std::invalid_argument);
  // Without transformations a float source passes through untouched.
  pt::data::DeviceLoader plain(x.to(torch::kFloat).flatten(1), y, {.batch_size = 4, .shuffle = false}, {});
  CHECK(torch::equal(plain.batch(1).x, x.to(torch::kFloat).flatten(1).slice(0, 4, 8)));
}
