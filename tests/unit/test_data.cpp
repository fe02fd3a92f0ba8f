// IDX reading (good and bad files), Fashion-MNIST, and the loader's order, sharding and batching.
#include <doctest/doctest.h>

#include <fstream>
#include <set>

#include <zlib.h>

#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

std::string idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>((d >> shift) & 0xFF));
  return s + payload;
}

void write_raw(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

void write_gz(const fs::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
}

std::string error_of(const fs::path& p, int ndim = 0) {
  try {
    pt::data::read_idx(p, ndim);
  } catch (const pt::data::IdxError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("IDX: gzipped and raw files read back exactly, big-endian types included") {
  auto dir = testing::temp_dir("idx-good");
  std::string pixels;
  for (int i = 0; i < 2 * 3 * 4; ++i) pixels.push_back(static_cast<char>(i * 7));
  const auto bytes = idx_bytes(0x08, {2, 3, 4}, pixels);
  write_raw(dir / "a-idx3-ubyte", bytes);
  write_gz(dir / "a-idx3-ubyte.gz", bytes);
  for (auto name : {"a-idx3-ubyte", "a-idx3-ubyte.gz"}) {
    auto t = pt::data::read_idx(dir / name, 3);
    CHECK(t.sizes() == torch::IntArrayRef({2, 3, 4}));
    CHECK((t.scalar_type() == torch::kUInt8));
    CHECK(t[1][2][3].item<int>() == static_cast<uint8_t>(23 * 7));
  }
  // int32, big-endian: 0x01020304 and -2
  write_gz(dir / "i.gz", idx_bytes(0x0C, {2}, std::string("\x01\x02\x03\x04\xff\xff\xff\xfe", 8)));
  auto t = pt::data::read_idx(dir / "i.gz");
  CHECK(t[0].item<int32_t>() == 0x01020304);
  CHECK(t[1].item<int32_t>() == -2);
}

TEST_CASE("IDX: every kind of bad file gives an error that names the file and the problem") {
  auto dir = testing::temp_dir("idx-bad");
  const auto good = idx_bytes(0x08, {4, 2, 2}, std::string(16, '\x05'));
  struct Case { std::string name, bytes, expect; int ndim; };
  std::vector<Case> cases{
      {"empty", "", "shorter than the 4-byte IDX magic", 0},
      {"wrong-magic", "\x12\x34\x08\x03" + good.substr(4), "wrong magic number", 0},
      {"bad-type", idx_bytes(0x42, {4}, "abcd"), "unknown IDX element type 0x42", 0},
      {"header-cut", good.substr(0, 9), "truncated inside the header", 0},
      {"data-cut", good.substr(0, good.size() - 3), "truncated: header declares 16 bytes of data, file has 13", 0},
      {"too-long", good + "xy", "but the file is longer", 0},
      {"wrong-ndim", good, "has 3 dimensions, expected 1", 1},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    for (bool gz : {false, true}) {
      const auto p = dir / (c.name + (gz ? ".gz" : ""));
      gz ? write_gz(p, c.bytes) : write_raw(p, c.bytes);
      const auto msg = error_of(p, c.ndim);
      CHECK(msg.find(p.string()) == 0);
      CHECK(msg.find(c.expect) != std::string::npos);
    }
  }
  // A gzip stream cut in the middle: zlib reports it, or the data comes up short; either way, a named error.
  write_gz(dir / "big.gz", idx_bytes(0x08, {1000}, std::string(1000, '\x11') + std::string()));
  {
    std::ifstream in(dir / "big.gz", std::ios::binary);
    std::string gz((std::istreambuf_iterator<char>(in)), {});
    write_raw(dir / "cut.gz", gz.substr(0, gz.size() / 2));
  }
  const auto msg = error_of(dir / "cut.gz");
  CHECK(msg.find((dir / "cut.gz").string()) == 0);
  CHECK((msg.find("truncated") != std::string::npos || msg.find("corrupt") != std::string::npos));
  CHECK(error_of(dir / "missing.gz").find("no such file") != std::string::npos);
}

TEST_CASE("IDX pair: images and labels must agree") {
  auto dir = testing::temp_dir("idx-pair");
  write_gz(dir / "train-images-idx3-ubyte.gz", idx_bytes(0x08, {3, 2, 2}, std::string(12, '\x01')));
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x08, {2}, std::string("\x01\x02", 2)));
  CHECK_THROWS_WITH_AS(pt::data::read_idx_pair(dir, "train"), doctest::Contains("2 labels, but train-images-idx3-ubyte.gz has 3 images"),
                       pt::data::IdxError);
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x08, {3}, std::string("\x01\x02\x0b", 3)));
  CHECK_THROWS_WITH_AS(pt::data::read_idx_pair(dir, "train"), doctest::Contains("label 11 out of range"), pt::data::IdxError);
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x08, {3}, std::string("\x01\x02\x09", 3)));
  auto pair = pt::data::read_idx_pair(dir, "train");
  CHECK((pair.labels.scalar_type() == torch::kLong));
  CHECK(pair.labels[2].item<int64_t>() == 9);
}

TEST_CASE("Fashion-MNIST from Debian's package: sizes, labels and normalisation") {
  const auto dir = pt::data::default_fashion_mnist_dir();
  REQUIRE_MESSAGE(fs::exists(dir), "Fashion-MNIST is not installed at " << dir << " (scripts/setup installs it)");
  auto test = pt::data::load_fashion_mnist(dir, false);
  CHECK(test.x.sizes() == torch::IntArrayRef({10000, 1, 28, 28}));
  CHECK(test.y.sizes() == torch::IntArrayRef({10000}));
  CHECK(torch::equal(torch::bincount(test.y), torch::full({10}, 1000, torch::kLong)));  // the test set is balanced
  // Standardised with the training set's statistics: the test set's mean and std are close to 0 and 1.
  CHECK(std::abs(test.x.mean().item<double>()) < 0.05);
  CHECK(std::abs(test.x.std().item<double>() - 1.0) < 0.05);
}

TEST_CASE("stratified_split: exact size, disjoint, every class within one sample of its share, seeded") {
  SUBCASE("a hand-computed case: floors, then the largest remainders") {
    // Classes of 5, 3 and 2 samples, 3 held out: shares 1.5, 0.9, 0.6 -> floors 1, 0, 0; the two samples left go
    // to the largest remainders, class 1 (0.9) and class 2 (0.6): one sample of each class.
    auto y = torch::tensor({0, 1, 0, 2, 0, 1, 0, 2, 0, 1}, torch::kLong);
    auto x = torch::arange(10).to(torch::kFloat).unsqueeze(1);
    auto s = pt::data::stratified_split(x, y, 3, 1);
    CHECK(torch::equal(torch::bincount(s.val_y, {}, 3), torch::tensor({1, 1, 1}, torch::kLong)));
    CHECK(torch::equal(torch::bincount(s.train_y, {}, 3), torch::tensor({4, 2, 1}, torch::kLong)));
    // The rows travel with their labels: x holds the original index.
    CHECK(torch::equal(s.val_x.squeeze(1).to(torch::kLong), s.val_index));
    CHECK(torch::equal(s.val_y, y.index_select(0, s.val_index)));
  }
  SUBCASE("Fashion-MNIST's training set: 5,000 held out, 500 of each class, disjoint from the 55,000 trained on") {
    const auto dir = pt::data::default_fashion_mnist_dir();
    REQUIRE_MESSAGE(fs::exists(dir), "Fashion-MNIST is not installed at " << dir);
    auto train = pt::data::load_fashion_mnist(dir, true);
    auto s = pt::data::stratified_split(train.x, train.y, 5000, 0);
    CHECK(s.val_y.size(0) == 5000);
    CHECK(s.train_y.size(0) == 55000);
    CHECK(torch::equal(torch::bincount(s.val_y), torch::full({10}, 500, torch::kLong)));
    // Disjoint, and together every image once.
    auto all = std::get<0>(torch::sort(torch::cat({s.train_index, s.val_index})));
    CHECK(torch::equal(all, torch::arange(60000, torch::kLong)));
    // The same seed gives the same split; another seed another one.
    CHECK(torch::equal(pt::data::stratified_split(train.x, train.y, 5000, 0).val_index, s.val_index));
    CHECK_FALSE(torch::equal(pt::data::stratified_split(train.x, train.y, 5000, 1).val_index, s.val_index));
  }
  SUBCASE("an unbalanced set: sizes exact, each class within one of n_val * n_c / N") {
    auto gen = torch::make_generator<at::CPUGeneratorImpl>(3);
    auto y = torch::clamp(torch::randint(0, 9, {997}, gen, torch::kLong) - 2, 0);  // class 0 is a third
    auto x = torch::zeros({997, 2});
    for (int64_t n_val : {1, 10, 333, 996}) {
      CAPTURE(n_val);
      auto s = pt::data::stratified_split(x, y, n_val, 5);
      CHECK(s.val_y.size(0) == n_val);
      auto counts = torch::bincount(y, {}, 7).to(torch::kDouble), got = torch::bincount(s.val_y, {}, 7).to(torch::kDouble);
      CHECK((got - counts * n_val / 997.0).abs().max().item<double>() < 1.0);
    }
  }
  SUBCASE("bad arguments name the value and what was expected") {
    auto y = torch::tensor({0, 1, 1}, torch::kLong);
    CHECK_THROWS_WITH_AS(pt::data::stratified_split(torch::zeros({3}), y, 3, 0),
                         doctest::Contains("expected 0 <= n_val < 3"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(pt::data::stratified_split(torch::zeros({2}), y, 1, 0),
                         doctest::Contains("2 images but 3 labels"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(pt::data::stratified_split(torch::zeros({3}), y.to(torch::kFloat), 1, 0),
                         doctest::Contains("expected int64"), std::invalid_argument);
  }
}

TEST_CASE("TensorLoader: seeded order, every sample once per epoch, batches and sharding") {
  const int64_t n = 50;
  auto x = torch::arange(n, torch::kFloat).unsqueeze(1);
  auto y = torch::arange(n, torch::kLong);
  auto epoch_ids = [](pt::data::TensorLoader& l) {
    std::vector<int64_t> ids;
    for (auto b : l)
      for (int64_t i = 0; i < b.size(); ++i) ids.push_back(b.y[i].item<int64_t>());
    return ids;
  };
  pt::data::TensorLoader a(x, y, {.batch_size = 8, .seed = 5}), b(x, y, {.batch_size = 8, .seed = 5}),
      c(x, y, {.batch_size = 8, .seed = 6});
  CHECK(a.size() == 7);  // 6 full batches and one of 2
  auto ea = epoch_ids(a);
  CHECK(ea == epoch_ids(b));
  CHECK(ea != epoch_ids(c));
  CHECK(std::set<int64_t>(ea.begin(), ea.end()).size() == n);
  a.set_epoch(1);
  CHECK(epoch_ids(a) != ea);
  a.set_epoch(0);
  CHECK(epoch_ids(a) == ea);  // the order depends only on (seed, epoch)
  for (auto batch : a) CHECK(torch::equal(batch.x.squeeze(1).to(torch::kLong), batch.y));  // pairs stay together

  pt::data::TensorLoader dl(x, y, {.batch_size = 8, .shuffle = false, .drop_last = true});
  CHECK(dl.size() == 6);

  // Two ranks: equal shards (25 each), disjoint, together the whole set.
  pt::data::TensorLoader r0(x, y, {.batch_size = 8, .seed = 1, .rank = 0, .world_size = 2});
  pt::data::TensorLoader r1(x, y, {.batch_size = 8, .seed = 1, .rank = 1, .world_size = 2});
  auto s0 = epoch_ids(r0), s1 = epoch_ids(r1);
  CHECK(s0.size() == 25);
  CHECK(s1.size() == 25);
  std::set<int64_t> all(s0.begin(), s0.end());
  for (auto i : s1) CHECK(all.insert(i).second);
  CHECK(all.size() == n);
  // Three ranks: 50 does not divide; the list wraps so that every rank gets 17 (one sample seen twice).
  pt::data::TensorLoader t2(x, y, {.batch_size = 8, .rank = 2, .world_size = 3});
  CHECK(t2.num_samples() == 17);
  CHECK_THROWS_AS(pt::data::TensorLoader(x, y, {.rank = 3, .world_size = 2}), std::invalid_argument);
}
