// The composition matrix: every pair of the policies below that the library accepts is trained a few steps and
// compared with the reference it claims; a pair it refuses is refused at compile time (a compile-fail test in
// tests/compile_fail/) or at fit begin with a message naming the fix (checked here). docs/compositions.md holds
// the verdicts this test prints (POLICYTRAIN_MATRIX_TABLE=1), and the test checks that the doc says the same.
//
// The reference is one plain LibTorch loop written by hand (forward under CPU bf16 autocast, the loss divided by
// the accumulation, clip_grad_norm_, the one-cycle lr and momentum of schedule::onecycle_at (itself checked
// against PyTorch's OneCycleLR in test_schedule_reference.cpp), Ultralytics' EMA update), in one process with the
// global batch. The other elements claim to change nothing: recompute (the same gradients), GraphEmulation (the
// eager step), DivergenceRollback on a run that never diverges, a Disk resume mid-epoch (the uninterrupted run),
// DataParallel on 2 ranks with half the batch each (one process with the whole batch). Compared: the weights,
// the EMA average, and the loss every optimizer step reports (under DataParallel the mean of the two ranks'
// losses: each reports its half batch's). Tolerances: 1e-6 in one process (the Trainer normalises a window's loss
// by its samples, the loop divides by the step count: other roundings), 2e-5 across 2 ranks (each rank's gradient
// is the mean of half the batch, then averaged: another summation order, amplified by 16 steps of momentum).
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <policytrain/all.hpp>
#include <policytrain/memory/recompute.hpp>
#include <policytrain/parallel.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

enum E : int { amp, steps, nominal, onecycle, ema, clip, rollback, resume, dp, dp_static, dp_unused, recompute, graph, kCount };
constexpr std::array<const char*, kCount> kName = {
    "precision::Autocast bf16", "accumulate::Steps(2)", "accumulate::NominalBatch(20)", "schedule::Lr onecycle",
    "callbacks::Ema", "callbacks::GradClip", "callbacks::DivergenceRollback", "checkpoint::Disk resume",
    "DataParallel", "DataParallel static_graph", "DataParallel find_unused_parameters", "memory::recompute",
    "step::GraphEmulation"};

constexpr bool is_dp(int e) { return e == dp || e == dp_static || e == dp_unused; }

/// Pairs refused at compile time, with the compile-fail test that shows it.
constexpr const char* compile_refusal(int a, int b) {
  if (a > b) std::swap(a, b);
  if (a == steps && b == nominal) return "two_accumulation_policies";
  if (b == graph && a == steps) return "graph_with_accumulation";
  if (b == graph && a == nominal) return "graph_with_nominal_batch";
  if (b == graph && is_dp(a)) return "graph_with_data_parallel";
  return nullptr;
}

/// Pairs refused at fit begin: what the message must contain (it names the fix).
const char* fit_refusal(int a, int b) {
  if (a > b) std::swap(a, b);
  if (a == dp_unused && b == recompute) return "Set static_graph = true in DataParallelOptions";
  return nullptr;
}

constexpr int64_t kN = 64, kBatch = 8, kEpochs = 2;
// bf16 autocast on 2 ranks: each rank's forward and backward round its half batch to bf16 (8 bits of mantissa,
// 2^-9 relative) where one process rounds the whole batch's; over 16 steps of lr 0.05 the weights move about 1e-3
// apart (measured 6e-4), far below a wrong gradient (a lost half moves them by 1e-2 per step).
constexpr double kBf16RankTol = 2e-3;
constexpr double kLr = 0.05, kWd = 0.01;

/// What a run turns on (the elements of one pair).
struct Cfg {
  std::array<bool, kCount> on{};
  bool has(E e) const { return on[e]; }
  int64_t accumulate() const { return has(steps) || has(nominal) ? 2 : 1; }
  int64_t total_steps() const { return kEpochs * kN / kBatch / accumulate(); }
  std::string label() const {
    std::string s;
    for (int e = 0; e < kCount; ++e)
      if (on[e]) s += (s.empty() ? "" : " x ") + std::string(kName[e]);
    return s;
  }
};

/// Linear -> tanh -> Linear; with recompute each Linear is a memory::Recomputed module (the same parameter names).
torch::nn::Sequential make_net(bool rc) {
  torch::manual_seed(1);
  torch::nn::Sequential s;
  auto lin = [&](int64_t i, int64_t o) {
    torch::nn::Linear l(i, o);
    if (rc) s->push_back(pt::memory::Recomputed<torch::nn::Linear>(l));
    else s->push_back(l);
  };
  lin(8, 16);
  s->push_back(torch::nn::Functional([](const torch::Tensor& t) { return torch::tanh(t); }));
  lin(16, 3);
  return s;
}

struct Task {
  torch::nn::Sequential net;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
};

struct Result {
  torch::Tensor weights, average;  ///< flattened parameters, and the EMA average (undefined without Ema)
  std::vector<double> losses;      ///< the loss reported at each optimizer step
};

torch::Tensor flat(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> f;
  for (const auto& t : ts) f.push_back(t.detach().flatten());
  return torch::cat(f);
}

pt::optim::FusedSgd make_opt(torch::nn::Module& m) {
  return pt::optim::FusedSgd(m.parameters(), torch::optim::SGDOptions(kLr).momentum(0.9).weight_decay(kWd));
}

/// The one-cycle schedule over the whole run, given explicitly: the Disk resume pair stops the first fit with
/// max_steps, which would otherwise cap the schedule's horizon (schedule::Lr's documented rule) and make it
/// another schedule than the resumed fit's.
pt::schedule::LrOptions onecycle_options(const Cfg& c) { return {.kind = pt::schedule::Kind::onecycle, .total_steps = c.total_steps()}; }
constexpr double kEmaDecay = 0.9, kEmaTau = 4, kMaxNorm = 0.5;

/// The plain LibTorch loop, one process, the global batch.
Result reference(const Cfg& c) {
  auto net = make_net(false);
  auto opt = make_opt(*net);
  if (c.has(nominal))  // batch 8 x accumulate 2 / nominal 20
    static_cast<torch::optim::SGDOptions&>(opt.param_groups()[0].options()).weight_decay(kWd * 0.8);
  auto [x, y] = testing::toy_data(kN);
  pt::data::TensorLoader loader(x, y, {.batch_size = kBatch, .shuffle = false});
  const int64_t k = c.accumulate(), total = c.total_steps();
  std::vector<torch::Tensor> avg;
  for (auto& p : net->parameters()) avg.push_back(p.detach().clone());
  Result r;
  int64_t t = 0, micro = 0;
  for (int64_t e = 0; e < kEpochs; ++e) {
    loader.set_epoch(e);
    for (auto&& b : loader) {
      if (micro == 0 && c.has(onecycle)) {
        const auto pnt = pt::schedule::onecycle_at(onecycle_options(c), total, t);
        auto& o = static_cast<torch::optim::SGDOptions&>(opt.param_groups()[0].options());
        o.lr(kLr * pnt.lr_factor);
        o.momentum(pnt.momentum);
      }
      torch::Tensor loss;
      {
        std::optional<pt::precision::AutocastGuard> ac;
        if (c.has(amp)) ac.emplace(c10::DeviceType::CPU, c10::ScalarType::BFloat16);
        loss = torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
      }
      (loss / static_cast<double>(k)).backward();
      if (++micro < k) continue;
      micro = 0;
      if (c.has(clip)) torch::nn::utils::clip_grad_norm_(net->parameters(), kMaxNorm);
      opt.step();
      opt.zero_grad();
      ++t;
      const double d = kEmaDecay * (1 - std::exp(-static_cast<double>(t) / kEmaTau));
      torch::NoGradGuard ng;
      auto ps = net->parameters();
      for (size_t i = 0; i < ps.size(); ++i) avg[i].mul_(d).add_(ps[i].detach(), 1 - d);
      r.losses.push_back(loss.item<double>());
    }
  }
  r.weights = flat(net->parameters());
  if (c.has(ema)) r.average = flat(avg);
  return r;
}

// --- the Trainer side: a pair's policy types, built from a Cfg --------------------------------------------------

template <int e> struct Types { using type = std::tuple<>; };
template <> struct Types<amp> { using type = std::tuple<pt::precision::Autocast>; };
template <> struct Types<steps> { using type = std::tuple<pt::accumulate::Steps>; };
template <> struct Types<nominal> { using type = std::tuple<pt::accumulate::NominalBatch>; };
template <> struct Types<onecycle> { using type = std::tuple<pt::schedule::Lr>; };
template <> struct Types<ema> { using type = std::tuple<pt::callbacks::Ema>; };
template <> struct Types<clip> { using type = std::tuple<pt::callbacks::GradClip>; };
template <> struct Types<rollback> { using type = std::tuple<pt::callbacks::DivergenceRollback>; };
template <> struct Types<resume> { using type = std::tuple<pt::checkpoint::Disk>; };
template <> struct Types<dp> { using type = std::tuple<pt::parallel::DataParallel>; };
template <> struct Types<dp_static> { using type = std::tuple<pt::parallel::DataParallel>; };
template <> struct Types<dp_unused> { using type = std::tuple<pt::parallel::DataParallel>; };
template <> struct Types<graph> { using type = std::tuple<pt::step::GraphEmulation>; };

template <class P>
P make_policy(const Cfg& c, const fs::path& dir, bool resuming) {
  if constexpr (std::is_same_v<P, pt::precision::Autocast>) return P({.dtype = torch::kBFloat16});
  else if constexpr (std::is_same_v<P, pt::accumulate::Steps>) return P(2);
  else if constexpr (std::is_same_v<P, pt::accumulate::NominalBatch>) return P({.nominal = 20, .batch = kBatch / (c.has(dp) || c.has(dp_static) || c.has(dp_unused) ? 2 : 1)});
  else if constexpr (std::is_same_v<P, pt::schedule::Lr>) return P(onecycle_options(c));
  else if constexpr (std::is_same_v<P, pt::callbacks::Ema>) return P({.decay = kEmaDecay, .tau = kEmaTau});
  else if constexpr (std::is_same_v<P, pt::callbacks::GradClip>) return P({.mode = P::Mode::norm, .max_norm = kMaxNorm});
  else if constexpr (std::is_same_v<P, pt::callbacks::DivergenceRollback>)
    return P({.snapshot_every = 2, .spike_factor = 100, .log = nullptr});
  else if constexpr (std::is_same_v<P, pt::checkpoint::Disk>)
    return P({.directory = dir, .every_steps = 1, .resume = resuming ? "auto" : "", .export_final = false, .log = nullptr});
  else if constexpr (std::is_same_v<P, pt::parallel::DataParallel>)
    return P({.timeout = std::chrono::seconds(60), .find_unused_parameters = c.has(dp_unused), .static_graph = c.has(dp_static)});
  else return P({.warmup_steps = 2});
}

/// One fit of Trainer<Task, Ps..., StepStream> (max_steps < 0: to the end); appends the reported losses.
template <class... Ps>
void fit_once(const Cfg& c, const fs::path& dir, bool resuming, int64_t max_steps, Result& r, std::tuple<Ps...>*) {
  Task task{make_net(c.has(recompute))};
  if (resuming) {  // other weights: the resume must bring the checkpoint's
    torch::NoGradGuard ng;
    for (auto& p : task.net->parameters()) p.uniform_(-1, 1);
  }
  auto opt = make_opt(task.module());
  testing::StepStream stream;
  pt::Trainer<Task, Ps..., testing::StepStream> trainer(task, opt, make_policy<Ps>(c, dir, resuming)..., stream);
  const int rank = std::getenv("RANK") ? std::atoi(std::getenv("RANK")) : 0;
  const int world = std::getenv("WORLD_SIZE") ? std::atoi(std::getenv("WORLD_SIZE")) : 1;
  auto [x, y] = testing::toy_data(kN);
  pt::data::TensorLoader loader(x, y, {.batch_size = kBatch / world, .shuffle = false, .rank = rank, .world_size = world});
  trainer.fit(loader, {.epochs = kEpochs, .max_steps = max_steps});
  for (const auto& row : *stream.rows) r.losses.push_back(row.loss_now);
  r.weights = flat(task.net->parameters());
  if constexpr ((std::is_same_v<Ps, pt::callbacks::Ema> || ...)) r.average = flat(trainer.template get<pt::callbacks::Ema>().average());
}

template <class... T>
using cat_t = decltype(std::tuple_cat(std::declval<T>()...));

/// Trains the pair (a, b) through the Trainer: straight, or stopped mid-run and resumed from its Disk checkpoint.
template <int A, int B>
Result run_pair(const Cfg& c, const fs::path& dir) {
  using Ps = cat_t<typename Types<A>::type, typename Types<B>::type>;
  Result r;
  if (c.has(resume)) fit_once(c, dir, false, c.total_steps() / 2 - 1, r, static_cast<Ps*>(nullptr));  // mid-epoch
  fit_once(c, dir, c.has(resume), -1, r, static_cast<Ps*>(nullptr));
  return r;
}

using Runner = Result (*)(const Cfg&, const fs::path&);
struct Cell {
  int a, b;
  Runner run;  ///< null: refused at compile time
};

template <int A, int B>
constexpr Cell cell() {
  if constexpr (compile_refusal(A, B) != nullptr || (is_dp(A) && is_dp(B))) return {A, B, nullptr};
  else return {A, B, &run_pair<A, B>};
}

// Every pair a < b (the table is indexed a * kCount + b; a runner is instantiated once per set of policy types).
template <int A, int B>
constexpr Cell cell_if_upper() {
  if constexpr (A < B) return cell<A, B>();
  else return {A, B, nullptr};
}
template <size_t... I>
constexpr auto make_upper(std::index_sequence<I...>) {
  return std::array<Cell, sizeof...(I)>{cell_if_upper<static_cast<int>(I) / kCount, static_cast<int>(I) % kCount>()...};
}
const auto kCells = make_upper(std::make_index_sequence<kCount * kCount>{});

Cfg cfg_of(int a, int b) {
  Cfg c;
  c.on[a] = c.on[b] = true;
  return c;
}

void save_result(const fs::path& p, const Result& r) {
  std::vector<torch::Tensor> v{r.weights, r.average.defined() ? r.average : torch::empty({0}),
                               torch::tensor(r.losses, torch::kDouble)};
  torch::save(v, p.string());
}
Result load_result(const fs::path& p) {
  std::vector<torch::Tensor> v;
  torch::load(v, p.string());
  Result r{v[0], v[1].numel() ? v[1] : torch::Tensor(), {}};
  for (int64_t i = 0; i < v[2].numel(); ++i) r.losses.push_back(v[2][i].item<double>());
  return r;
}

/// A rank of a DataParallel pair: POLICYTRAIN_MATRIX_WORKER = "a b", POLICYTRAIN_MATRIX_DIR.
const int kWorkerHook = [] {
  const char* pair = std::getenv("POLICYTRAIN_MATRIX_WORKER");
  if (!pair) return 0;
  const fs::path dir = std::getenv("POLICYTRAIN_MATRIX_DIR");
  const std::string rank = std::getenv("RANK") ? std::getenv("RANK") : "0";
  std::freopen((dir / ("stderr" + rank + ".txt")).c_str(), "w", stderr);
  int a = 0, b = 0;
  std::istringstream(pair) >> a >> b;
  testing::run_worker_and_exit([&] {
    save_result(dir / ("rank" + rank + ".pt"), kCells[static_cast<size_t>(a * kCount + b)].run(cfg_of(a, b), dir / "ckpt"));
    return 0;
  });
}();

using testing::read_text;

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

/// Compares a run with the reference; returns an empty string or what differs.
std::string compare(const Result& got, const Result& want, double tol) {
  std::string why;
  if (got.losses.size() != want.losses.size())
    return fmt::format("{} steps reported, the reference took {}", got.losses.size(), want.losses.size());
  double dl = 0;
  int64_t first = -1;  // the first step whose loss differs
  for (size_t i = 0; i < got.losses.size(); ++i) {
    dl = std::max(dl, std::abs(got.losses[i] - want.losses[i]));
    if (first < 0 && !(std::abs(got.losses[i] - want.losses[i]) <= tol)) first = static_cast<int64_t>(i);
  }
  const double dw = max_diff(got.weights, want.weights);
  const double da = want.average.defined() ? max_diff(got.average, want.average) : 0.0;
  if (!(dw <= tol && da <= tol && dl <= tol))
    why = fmt::format("max |weights - ref| {:.3g}, |EMA - ref| {:.3g}, |losses - ref| {:.3g} (tolerance {:.0e}); "
                      "first step with another loss: {} of {}", dw, da, dl, tol, first, got.losses.size());
  return why;
}

/// The tolerance of a pair's comparison with the reference (see the file comment and kBf16RankTol).
double tolerance(const Cfg& c) {
  const bool ranks = c.has(dp) || c.has(dp_static) || c.has(dp_unused);
  return !ranks ? 1e-6 : c.has(amp) ? kBf16RankTol : 2e-5;
}

/// The verdict of a pair, as docs/compositions.md lists it.
std::string verdict(int a, int b) {
  if (is_dp(a) && is_dp(b)) return "";
  if (const char* cf = compile_refusal(a, b)) return fmt::format("refused at compile time (tests/compile_fail/{}.cpp)", cf);
  if (const char* fix = fit_refusal(a, b)) return fmt::format("refused before the first gradient: \"{}\"", fix);
  return fmt::format("accepted: {} within {:.0e}", is_dp(a) || is_dp(b) ? "2 ranks equal 1 process" : "equals the plain loop",
                     tolerance(cfg_of(a, b)));
}

std::string table() {
  std::string t = "| pair | verdict |\n|---|---|\n";
  for (int a = 0; a < kCount; ++a)
    for (int b = a + 1; b < kCount; ++b)
      if (const auto v = verdict(a, b); !v.empty()) t += fmt::format("| {} x {} | {} |\n", kName[a], kName[b], v);
  return t;
}

}  // namespace

TEST_CASE("composition matrix: every accepted pair equals its reference, every refused pair is refused naming the fix") {
  const auto root = testing::temp_dir("matrix");
  int checked = 0;
  for (int a = 0; a < kCount; ++a)
    for (int b = a + 1; b < kCount; ++b) {
      if (is_dp(a) && is_dp(b)) continue;
      const Cfg c = cfg_of(a, b);
      CAPTURE(c.label());
      const Cell& cell = kCells[static_cast<size_t>(a * kCount + b)];
      if (const char* cf = compile_refusal(a, b)) {
        CHECK_FALSE(static_cast<bool>(cell.run));
        CHECK(fs::exists(fs::path(POLICYTRAIN_SOURCE_DIR) / "tests" / "compile_fail" / (std::string(cf) + ".cpp")));
        continue;
      }
      REQUIRE(static_cast<bool>(cell.run));
      const auto dir = root / fmt::format("{}-{}", a, b);
      fs::create_directories(dir);
      const char* refusal = fit_refusal(a, b);
      if (is_dp(a) || is_dp(b)) {
        const int code = pt::parallel::launch_local({.nproc = 2,
                                                     .program = "/proc/self/exe",
                                                     .env = {{"POLICYTRAIN_MATRIX_WORKER", fmt::format("{} {}", a, b)},
                                                             {"POLICYTRAIN_MATRIX_DIR", dir.string()},
                                                             {"OMP_NUM_THREADS", "1"}},
                                                     .stop_others_on_failure = refusal == nullptr,
                                                     .deadline = std::chrono::seconds(120)});
        const std::string e0 = read_text(dir / "stderr0.txt"), e1 = read_text(dir / "stderr1.txt");
        INFO("rank 0: " << e0 << "\nrank 1: " << e1);
        if (refusal) {
          CHECK(code != 0);
          CHECK(e0.find(refusal) != std::string::npos);
          CHECK(e1.find(refusal) != std::string::npos);
        } else {
          REQUIRE(code == 0);
          const Result r0 = load_result(dir / "rank0.pt"), r1 = load_result(dir / "rank1.pt");
          CHECK(torch::equal(r0.weights, r1.weights));  // the ranks never disagree
          Result mean = r0;
          for (size_t i = 0; i < mean.losses.size() && i < r1.losses.size(); ++i) mean.losses[i] = (r0.losses[i] + r1.losses[i]) / 2;
          const std::string why = compare(mean, reference(c), tolerance(c));
          INFO(why);
          CHECK(why.empty());
        }
      } else if (refusal) {
        CHECK_THROWS_WITH(cell.run(c, dir / "ckpt"), doctest::Contains(refusal));
      } else {
        const std::string why = compare(cell.run(c, dir / "ckpt"), reference(c), tolerance(c));
        INFO(why);
        CHECK(why.empty());
      }
      ++checked;
    }
  CHECK(checked > 0);
  fs::remove_all(root);
}

TEST_CASE("docs/compositions.md lists exactly the composition matrix's verdicts") {
  const std::string t = table();
  if (std::getenv("POLICYTRAIN_MATRIX_TABLE")) std::printf("%s", t.c_str());
  const std::string doc = read_text(fs::path(POLICYTRAIN_SOURCE_DIR) / "docs" / "compositions.md");
  const auto begin = doc.find("<!-- matrix:begin -->\n"), end = doc.find("<!-- matrix:end -->");
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  const auto from = begin + std::string("<!-- matrix:begin -->\n").size();
  CHECK(doc.substr(from, end - from) == t);
}
