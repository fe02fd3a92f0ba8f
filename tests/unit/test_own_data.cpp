// A user's own data: LibTorch's DataLoader through data::from_torch (workers, samplers, early exits, exact resume,
// data parallelism, validation over uneven shards), data::random_split, and the CSV reader.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <policytrain/data/csv.hpp>
#include <policytrain/data/from_torch.hpp>
#include <policytrain/data/split.hpp>
#include <policytrain/data/unrepeated_distributed_sampler.hpp>
#include <policytrain/metric/regression.hpp>
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

/// Records the epoch length the Trainer sees (what schedules and the progress bar read).
struct EpochLength {
  std::vector<int64_t>* out = nullptr;
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) { out->push_back(ctx.epoch_batches()); }
};

auto options(size_t workers, size_t batch = 8) { return td::DataLoaderOptions().batch_size(batch).workers(workers); }

}  // namespace

TEST_CASE("from_torch: LibTorch's DataLoader with 2 workers passes every early exit, in the sampler's order") {
  constexpr int64_t n = 64;
  IdTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.05);
  std::vector<int64_t> seen_lengths;
  pt::Trainer trainer(task, opt, EpochLength{&seen_lengths});
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
  CHECK(seen_lengths == std::vector<int64_t>{3, 3});  // the sampler's 8 batches, cut to the limit
  trainer.fit(train, {.epochs = 3});
  CHECK(seen_lengths == std::vector<int64_t>{3, 3, 8});  // the whole length where the sampler says it

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
  auto check_loader = [&](const std::string& name, auto make_loader) {
    CAPTURE(name);
    const fs::path dir = testing::temp_dir("own_data_maxsteps_" + name);
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

TEST_CASE("random_split: Python's random_split sets, disjoint, covering, seeded") {
  constexpr int64_t n = 50;
  auto x = torch::arange(n).unsqueeze(1).to(torch::kFloat32);
  auto y = torch::arange(n);
  const auto s = pt::data::random_split(x, y, 15, 42);
  CHECK(s.val_index.numel() == 15);
  CHECK(s.train_index.numel() == 35);
  CHECK(torch::equal(std::get<0>(torch::cat({s.train_index, s.val_index}).sort()), torch::arange(n)));  // disjoint, covering
  CHECK(torch::equal(s.val_y, s.val_index));
  CHECK(torch::equal(s.train_x.squeeze(1).to(torch::kLong), s.train_index));
  // Seeded: the same seed the same split, another seed another.
  CHECK(torch::equal(pt::data::random_split(x, y, 15, 42).val_index, s.val_index));
  CHECK(!torch::equal(pt::data::random_split(x, y, 15, 43).val_index, s.val_index));
  // Python's torch.utils.data.random_split on the same seed: the same parts, in the same order.
  const fs::path dir = testing::temp_dir("own_data_random_split");
  const std::string script =
      "import torch,sys\nfrom torch.utils.data import random_split\n"
      "p = random_split(range(50), [20, 18, 12], generator=torch.Generator().manual_seed(42))\n"
      "open(sys.argv[1], 'w').write('\\n'.join(' '.join(map(str, q.indices)) for q in p))\n";
  std::ofstream(dir / "split.py") << script;
  REQUIRE(std::system(("python3 " + (dir / "split.py").string() + " " + (dir / "split.txt").string()).c_str()) == 0);
  std::istringstream py(testing::read_text(dir / "split.txt"));
  const auto parts = pt::data::random_split_indices(n, {20, 18, 12}, 42);
  for (const auto& part : parts) {
    std::string line;
    std::getline(py, line);
    std::istringstream ls(line);
    std::vector<int64_t> expect;
    for (int64_t v; ls >> v;) expect.push_back(v);
    CHECK(std::vector<int64_t>(part.data_ptr<int64_t>(), part.data_ptr<int64_t>() + part.numel()) == expect);
  }
  // Python's two-part split holds the same sets as random_split's train and validation parts.
  const auto two = pt::data::random_split_indices(n, {35, 15}, 42);
  CHECK(torch::equal(std::get<0>(two[1].sort()), s.val_index));
  CHECK_THROWS_WITH_AS(pt::data::random_split_indices(n, {20, 20}, 1),
                       "policytrain::data::random_split: the lengths (20, 20) sum to 40, but the data set has 50 samples; "
                       "expected them to sum to 50", std::invalid_argument);
  CHECK_THROWS_AS(pt::data::random_split(x, y, 50, 1), std::invalid_argument);
}

TEST_CASE("read_csv: a numeric table into tensors, and every malformed file is an error naming row and column") {
  const fs::path dir = testing::temp_dir("own_data_csv");
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  const auto t = pt::data::read_csv(write("ok.csv", "a, b ,target\r\n1,2.5,-3e2\n\n 4 ,5,6"), torch::kFloat64);
  CHECK(t.names == std::vector<std::string>{"a", "b", "target"});
  CHECK(torch::equal(t.values, torch::tensor({1.0, 2.5, -300.0, 4.0, 5.0, 6.0}, torch::kFloat64).view({2, 3})));
  CHECK(torch::equal(t.columns({"target"}), torch::tensor({-300.0, 6.0}, torch::kFloat64).view({2, 1})));
  CHECK(torch::equal(t.columns_except({"target"}), torch::tensor({1.0, 2.5, 4.0, 5.0}, torch::kFloat64).view({2, 2})));
  CHECK((pt::data::read_csv(write("f.csv", "x\n0.1\n")).values.scalar_type() == torch::kFloat32));

  auto error_of = [&](const std::string& name, const std::string& text) -> std::string {
    try {
      pt::data::read_csv(write(name, text));
    } catch (const pt::data::CsvError& e) {
      return e.what();
    }
    return "(no error)";
  };
  const std::string f = (dir / "").string();
  auto expect_error = [&](const std::string& name, const std::string& text, const std::string& message) {
    CHECK(error_of(name, text) == "policytrain::data::read_csv: " + f + name + ": " + message);
  };
  expect_error("missing.csv", "a,b\n1,2\n3,\n",
               "row 2 (line 3), column 2 ('b'): the value is missing; expected a number (CsvOptions::non_finite "
               "reads a missing value as NaN, as pandas does)");
  expect_error("ragged.csv", "a,b,c\n1,2,3\n4,5\n",
               "row 2 (line 3): 2 fields, but the header has 3 columns; expected 3 fields in every row");
  expect_error("long.csv", "a,b\n1,2,3\n",
               "row 1 (line 2): 3 fields, but the header has 2 columns; expected 2 fields in every row");
  expect_error("text.csv", "a,b\n1,2\n3,four\n",
               "row 2 (line 3), column 2 ('b'): 'four' is not a number; expected a number");
  expect_error("trailing.csv", "a,b\n1,2x\n",
               "row 1 (line 2), column 2 ('b'): '2x' is not a number; expected a number");
  expect_error("nan.csv", "a\nnan\n",
               "row 1 (line 2), column 1 ('a'): 'nan' is a missing value; expected a number (CsvOptions::non_finite "
               "reads a missing value as NaN, as pandas does)");
  expect_error("inf.csv", "a\n1\n-Inf\n",
               "row 2 (line 3), column 1 ('a'): '-Inf' is not finite; expected a finite number "
               "(CsvOptions::non_finite reads it as an infinity, as pandas does)");
  expect_error("spaced_nan.csv", "a\n nan\n",  // pandas reads " nan" as text
               "row 1 (line 2), column 1 ('a'): ' nan' is not a number; expected a number");
  expect_error("empty.csv", "",
               "the file is empty; expected a header line and rows of numbers");
  expect_error("blank.csv", "\n \n",
               "the file is empty; expected a header line and rows of numbers");
  expect_error("header.csv", "a,b\n",
               "the header has no rows below it; expected at least one row of numbers");
  expect_error("noname.csv", "a,,c\n1,2,3\n",
               "header (line 1), column 2: the column has no name; expected a name for every column");
  expect_error("unclosed.csv", "a,b\n1,2\n3,\"4\n5\n",
               "line 3, column 2: the quoted field that starts there is not closed; expected a closing '\"' before "
               "the end of the file");
  expect_error("twice.csv", "a,b,a\n1,2,3\n",
               "header (line 1), columns 1 and 3 are both named 'a'; expected a different name for every column");
  expect_error("latin1.csv", "a,caf\xe9\n1,2\n",  // pandas refuses the file (UnicodeDecodeError)
               "header (line 1), column 2: the name 'caf?' is not UTF-8; expected a name in UTF-8 (pandas reads a "
               "file as UTF-8)");
  expect_error("multiline.csv", "a,b\n\"1\n\",2\n3,x\n",  // a quoted line break: the row starts on line 2
               "row 2 (line 4), column 2 ('b'): 'x' is not a number; expected a number");
  // float32 (the default dtype) rounds 1e39 to an infinity: refused as one, unless read as float64.
  expect_error("past_float32.csv", "a,b\n1,2\n3,\"1e39\"\n",
               "row 2 (line 3), column 2 ('b'): '1e39' is out of the range of float32; expected a finite number (read "
               "the file as float64, or with CsvOptions::non_finite, which reads it as an infinity)");
  CHECK(pt::data::read_csv(write("f64.csv", "a\n1e39\n"), torch::kFloat64).values.item<double>() == 1e39);
  CHECK_THROWS_WITH_AS(pt::data::read_csv((dir / "absent.csv").string()),
                       ("policytrain::data::read_csv: " + f + "absent.csv: cannot be opened; expected a readable CSV file").c_str(),
                       pt::data::CsvError);
  CHECK_THROWS_WITH_AS(t.columns({"c"}), "policytrain::data::CsvTable::columns: no column 'c'; the table has: a, b, target",
                       pt::data::CsvError);
}

// Excel's "CSV UTF-8" starts the file with a byte order mark and pandas' to_csv quotes names that need it: pandas reads
// both as the names they spell (tests/differential/csv.py compares read_csv with pandas on generated files).
TEST_CASE("read_csv: a UTF-8 byte order mark and quoted header names are the names they spell, as in pandas") {
  const fs::path dir = testing::temp_dir("own_data_csv_bom");
  const std::string file = (dir / "bom.csv").string();
  std::ofstream(file, std::ios::binary) << "\xEF\xBB\xBF\"x1\",\"a,b\",\"say \"\"hi\"\"\"\r\n1,\"2.5\",3\r\n";
  const auto t = pt::data::read_csv(file, torch::kFloat64);
  CHECK(t.names == std::vector<std::string>{"x1", "a,b", "say \"hi\""});
  CHECK(torch::equal(t.columns({"x1", "a,b"}), torch::tensor({1.0, 2.5}, torch::kFloat64).view({1, 2})));

  // Without a header and with non_finite: pandas' header=None names and its NaN and infinities.
  const std::string bare = (dir / "bare.csv").string();
  std::ofstream(bare, std::ios::binary) << "1,NA,\r\"-inf\",2e400,1e-400\r";
  const auto u = pt::data::read_csv(bare, {.header = false, .non_finite = true}, torch::kFloat64);
  CHECK(u.names == std::vector<std::string>{"0", "1", "2"});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(torch::allclose(u.values, torch::tensor({1.0, nan, nan, -inf, inf, 0.0}, torch::kFloat64).view({2, 3}),
                        0, 0, /*equal_nan=*/true));
}

namespace {
constexpr int64_t kRankSamples = 64, kRankEpochs = 3;

/// One rank of the 2-rank test: trains through from_torch with a DistributedRandomSampler of its rank, under
/// DataParallel, and writes the sample indices it trained, one line per epoch.
int run_rank(const fs::path& out) {
  pt::parallel::DataParallel dp({.timeout = std::chrono::milliseconds(20000)});
  const int world = dp.world_size(), rank = dp.rank();
  IdTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.05);
  auto train = pt::data::from_torch(
      id_dataset(kRankSamples),
      td::samplers::DistributedRandomSampler(kRankSamples, static_cast<size_t>(world), static_cast<size_t>(rank)),
      options(2));
  pt::Trainer<IdTask, pt::parallel::DataParallel> trainer(task, opt, std::move(dp));
  trainer.fit(train, {.epochs = kRankEpochs});
  {
    // random_split in each rank's process: the same split everywhere.
    auto [x, y] = testing::toy_data(kRankSamples);
    const auto split = pt::data::random_split(x, y, 10, 42);
    std::ofstream s(out / fmt::format("split{}.txt", rank));
    for (int64_t i = 0; i < split.val_index.numel(); ++i) s << split.val_index[i].item<int64_t>() << ' ';
    s << '\n';
  }
  std::ofstream f(out / fmt::format("ids{}.txt", rank));
  const auto per_epoch = static_cast<int64_t>(task.trained.size()) / kRankEpochs;
  for (int64_t e = 0; e < kRankEpochs; ++e) {
    for (int64_t i = 0; i < per_epoch; ++i) f << task.trained[static_cast<size_t>(e * per_epoch + i)] << ' ';
    f << '\n';
  }
  return 0;
}

const int kRankHook = [] {
  const char* scenario = std::getenv("POLICYTRAIN_TEST_WORKER");
  if (!scenario || std::string(scenario) != "own_data_ranks") return 0;
  const fs::path out = std::getenv("POLICYTRAIN_TEST_OUT");
  const std::string rank = std::getenv("RANK") ? std::getenv("RANK") : "0";
  std::freopen((out / ("stderr" + rank + ".txt")).c_str(), "w", stderr);
  testing::run_worker_and_exit([&] { return run_rank(out); });
}();

std::vector<std::vector<int64_t>> lines_of(const fs::path& p) {
  std::istringstream in(testing::read_text(p));
  std::vector<std::vector<int64_t>> v;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    v.emplace_back();
    for (int64_t x; ls >> x;) v.back().push_back(x);
  }
  return v;
}
}  // namespace

TEST_CASE("from_torch under 2 ranks: the epoch reaches the DistributedRandomSampler, the shards are disjoint and covering, random_split agrees") {
  const fs::path out = testing::temp_dir("own_data_ranks");
  const int rc = pt::parallel::launch_local({.nproc = 2,
                                             .env = {{"POLICYTRAIN_TEST_WORKER", "own_data_ranks"},
                                                     {"POLICYTRAIN_TEST_OUT", out.string()},
                                                     {"OMP_NUM_THREADS", "1"}},
                                             .deadline = std::chrono::seconds(300)});
  INFO(testing::read_text(out / "stderr0.txt"), testing::read_text(out / "stderr1.txt"));
  REQUIRE(rc == 0);
  // random_split: the same split on both ranks, and here.
  auto [x, y] = testing::toy_data(kRankSamples);
  const auto split = pt::data::random_split(x, y, 10, 42);
  const std::vector<int64_t> here(split.val_index.data_ptr<int64_t>(), split.val_index.data_ptr<int64_t>() + 10);
  CHECK(lines_of(out / "split0.txt") == std::vector<std::vector<int64_t>>{here});
  CHECK(lines_of(out / "split1.txt") == std::vector<std::vector<int64_t>>{here});
  const auto r0 = lines_of(out / "ids0.txt"), r1 = lines_of(out / "ids1.txt");
  REQUIRE(r0.size() == kRankEpochs);
  REQUIRE(r1.size() == kRankEpochs);
  for (int64_t e = 0; e < kRankEpochs; ++e) {
    CAPTURE(e);
    const auto& a = r0[static_cast<size_t>(e)];
    const auto& b = r1[static_cast<size_t>(e)];
    CHECK(a.size() == kRankSamples / 2);
    CHECK(b.size() == kRankSamples / 2);
    std::set<int64_t> all(a.begin(), a.end());
    all.insert(b.begin(), b.end());
    CHECK(all.size() == static_cast<size_t>(kRankSamples));  // disjoint and covering
    // Each rank's order is LibTorch's sampler's for that rank and epoch.
    CHECK(a == sampler_order(td::samplers::DistributedRandomSampler(kRankSamples, 2, 0), e, 8));
    CHECK(b == sampler_order(td::samplers::DistributedRandomSampler(kRankSamples, 2, 1), e, 8));
    if (e > 0) CHECK(a != r0[static_cast<size_t>(e - 1)]);  // the order changes with the epoch
  }
}

namespace {
constexpr int64_t kEvalRows = 10;  // on 3 ranks: 4 + 3 + 3 (uneven) or 4 + 4 + 4 padded; LibTorch without duplicates 3 + 3 + 3

/// The model's output is its input: the Trainer evaluates fixed regression predictions (RMSE, an epoch-level metric).
struct RmseTask {
  torch::nn::Linear lin{nullptr};
  RmseTask() {
    torch::manual_seed(1);
    lin = torch::nn::Linear(1, 1);
  }
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return lin->forward(b.x).sum(); }
  pt::Prediction validation_step(const pt::Batch& b) { return {torch::zeros({}), b.x}; }
  pt::MetricCollection metrics() const {
    pt::MetricCollection c;
    c.add(pt::metric::RootMeanSquaredError{});
    return c;
  }
};

/// Rows of (prediction, target) pairs.
struct EvalRows : td::datasets::Dataset<EvalRows> {
  torch::Tensor x, y;
  EvalRows(torch::Tensor x_, torch::Tensor y_) : x(std::move(x_)), y(std::move(y_)) {}
  td::Example<> get(size_t i) override { return {x[static_cast<int64_t>(i)], y[static_cast<int64_t>(i)]}; }
  std::optional<size_t> size() const override { return static_cast<size_t>(x.size(0)); }
};

/// Predictions and targets whose last rows carry most of the error, so that leaving them out shows.
std::pair<torch::Tensor, torch::Tensor> eval_rows() {
  torch::manual_seed(5);
  auto t = torch::randn({kEvalRows}, torch::kDouble);
  auto p = t + torch::randn({kEvalRows}, torch::kDouble) * torch::linspace(0.1, 20, kEvalRows, torch::kDouble);
  return {p, t};
}

/// Evaluates the rows through from_torch with the sampler `which` on this rank: "samples rmse", or the refusal.
template <class... Ps>
std::string evaluate_rows(const std::string& which, int64_t rank, int64_t world) {
  auto [p, t] = eval_rows();
  RmseTask task;
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  pt::Trainer<RmseTask, Ps...> trainer(task, opt);
  auto ds = [&] { return EvalRows(p, t).map(td::transforms::Stack<>()); };
  const auto n = static_cast<size_t>(kEvalRows), w = static_cast<size_t>(world), r = static_cast<size_t>(rank);
  auto report = [&](auto& loader) {
    try {
      const auto m = trainer.evaluate(loader);
      return fmt::format("{} {:.9f}", m.samples, m.get("rmse"));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
  };
  if (which == "unrepeated") {
    auto l = pt::data::from_torch(ds(), pt::data::UnrepeatedDistributedSampler(n, w, r), options(0, 3));
    return report(l);
  }
  auto l = pt::data::from_torch(ds(), td::samplers::DistributedSequentialSampler(n, w, r, which == "padded"), options(0, 3));
  return report(l);
}

const int kEvalHook = [] {
  const char* scenario = std::getenv("POLICYTRAIN_TEST_WORKER");
  if (!scenario || std::string(scenario) != "own_data_eval") return 0;
  const fs::path out = std::getenv("POLICYTRAIN_TEST_OUT");
  const std::string rank = std::getenv("RANK");
  std::freopen((out / ("stderr" + rank + ".txt")).c_str(), "w", stderr);
  testing::run_worker_and_exit([&] {
    std::ofstream f(out / ("eval" + rank + ".txt"));
    for (const char* which : {"unrepeated", "padded", "unpadded"})
      f << evaluate_rows<pt::parallel::DataParallel>(which, std::stoll(rank), 3) << '\n';
    return 0;
  });
}();
}  // namespace

TEST_CASE("from_torch validation on 1 and 3 ranks: every row once, the metrics of one process over the whole set") {
  // The oracle: RMSE over the 10 rows by its definition, in one process.
  auto [p, t] = eval_rows();
  const std::string whole = fmt::format("{} {:.9f}", kEvalRows, (p - t).square().mean().sqrt().item<double>());
  const std::string refusal =
      "policytrain::data::from_torch: a DistributedSequentialSampler of 10 samples over 3 ranks (allow_duplicates = "
      "false) gives each rank 3, so the last 1 samples are never evaluated; evaluate through "
      "policytrain::data::UnrepeatedDistributedSampler(10, 3, rank), which gives every sample once over the ranks";
  // One process: each sampler gives every row.
  for (const char* which : {"unrepeated", "padded", "unpadded"}) {
    CAPTURE(which);
    CHECK(evaluate_rows<>(which, 0, 1) == whole);
  }
  // Three ranks: UnrepeatedDistributedSampler's uneven shards, and DistributedSequentialSampler's padding left out,
  // give the whole set's RMSE on every rank; without duplicates it evaluated 9 rows (RMSE 2.5 instead of 12.8) and is
  // refused. Before, the padded sampler counted rows 0 and 1 twice.
  const fs::path out = testing::temp_dir("own_data_eval");
  const int rc = pt::parallel::launch_local({.nproc = 3,
                                             .env = {{"POLICYTRAIN_TEST_WORKER", "own_data_eval"},
                                                     {"POLICYTRAIN_TEST_OUT", out.string()},
                                                     {"OMP_NUM_THREADS", "1"}},
                                             .deadline = std::chrono::seconds(300)});
  INFO(testing::read_text(out / "stderr0.txt"), testing::read_text(out / "stderr2.txt"));
  REQUIRE(rc == 0);
  for (int r = 0; r < 3; ++r) {
    CAPTURE(r);
    const auto lines = testing::read_text(out / fmt::format("eval{}.txt", r));
    CHECK(lines == whole + "\n" + whole + "\n" + refusal + "\n");
  }
}
