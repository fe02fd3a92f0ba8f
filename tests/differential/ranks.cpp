// The C++ side of the differential tests of metrics and samplers (tests/differential/metrics.py, samplers.py): it
// runs the cases a driver wrote, through the Trainer's real paths on N ranks (parallel::launch_local, Gloo), and
// writes what each rank saw; the driver compares that with torchmetrics, torch's DistributedSampler and Lightning's
// UnrepeatedDistributedSampler, run in one Python process.
//
//   differential_ranks metrics  --nproc N CASES.json OUT   every case evaluated with Trainer::evaluate (the task's
//       epoch-level metrics and the built-in loss, accuracy and confusion matrix); OUT.rank<r>.json per rank
//   differential_ranks samplers --nproc N CASES.json OUT   every case trained (fit with validation) for some epochs,
//       stopped at max_steps mid-epoch, resumed from its checkpoint; the sample ids each rank trained and evaluated
//
// A case the library refuses records the refusal's message (the drivers say which refusals are expected).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/checkpoint.hpp>
#include <policytrain/data/from_torch.hpp>
#include <policytrain/data/unrepeated_distributed_sampler.hpp>
#include <policytrain/metric/classification.hpp>
#include <policytrain/metric/regression.hpp>
#include <policytrain/parallel.hpp>

namespace pt = policytrain;
namespace fs = std::filesystem;
namespace td = torch::data;
using nlohmann::json;

namespace {

/// Samples of (x, y) tensors, for LibTorch's DataLoader.
struct Tensors : td::datasets::Dataset<Tensors> {
  torch::Tensor x, y;
  Tensors(torch::Tensor x_, torch::Tensor y_) : x(std::move(x_)), y(std::move(y_)) {}
  td::Example<> get(size_t i) override { return {x[static_cast<int64_t>(i)], y[static_cast<int64_t>(i)]}; }
  std::optional<size_t> size() const override { return static_cast<size_t>(x.size(0)); }
};

/// Calls `f` with the loader a case names, over (x, y), this rank's shard. Loaders: tensor (TensorLoader, padded
/// by wrapping), unrepeated (from_torch with data::UnrepeatedDistributedSampler), sequential / sequential_padded
/// (DistributedSequentialSampler without and with allow_duplicates), random / random_padded
/// (DistributedRandomSampler).
template <class F>
void with_loader(const json& c, const std::string& kind, torch::Tensor x, torch::Tensor y, int64_t rank,
                 int64_t world, F&& f) {
  const int64_t batch = c.at("batch").get<int64_t>();
  const bool shuffle = c.value("shuffle", false);
  const uint64_t seed = c.value("loader_seed", uint64_t{0});
  const auto n = static_cast<size_t>(x.size(0)), w = static_cast<size_t>(world), r = static_cast<size_t>(rank);
  const auto options = td::DataLoaderOptions().batch_size(static_cast<size_t>(batch)).workers(c.value("workers", size_t{0}));
  auto stacked = [&] { return Tensors(x, y).map(td::transforms::Stack<>()); };
  if (kind == "tensor") {
    pt::data::TensorLoader l(x, y, {.batch_size = batch, .shuffle = shuffle, .seed = seed, .rank = rank, .world_size = world});
    f(l);
  } else if (kind == "unrepeated") {
    auto l = pt::data::from_torch(stacked(), pt::data::UnrepeatedDistributedSampler(n, w, r, shuffle, seed), options);
    f(l);
  } else if (kind == "sequential" || kind == "sequential_padded") {
    auto l = pt::data::from_torch(stacked(), td::samplers::DistributedSequentialSampler(n, w, r, kind == "sequential_padded"), options);
    f(l);
  } else if (kind == "random" || kind == "random_padded") {
    auto l = pt::data::from_torch(stacked(), td::samplers::DistributedRandomSampler(n, w, r, kind == "random_padded"), options);
    f(l);
  } else {
    throw std::invalid_argument("differential_ranks: unknown loader '" + kind + "'");
  }
}

std::vector<double> flat(const torch::Tensor& t) {
  auto c = t.to(torch::kDouble).contiguous().reshape({-1});
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// --- metrics -----------------------------------------------------------------------------------------------------

/// The model's output is its input: the Trainer evaluates the case's predictions with its built-in loss, accuracy
/// and confusion matrix.
struct BuiltinTask {
  json c;
  torch::nn::Linear lin{nullptr};
  explicit BuiltinTask(json c_) : c(std::move(c_)) {
    torch::manual_seed(1);
    lin = torch::nn::Linear(1, 1);
  }
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return lin->forward(b.x).sum(); }
  pt::Prediction validation_step(const pt::Batch& b) {
    const std::string kind = c.at("kind");
    torch::Tensor loss = kind == "multiclass" ? torch::nn::functional::cross_entropy(b.x, b.y)
                         : kind == "regression" ? torch::mse_loss(b.x.reshape({-1}), b.y.reshape({-1}))
                                                : torch::zeros({}, torch::kDouble);
    return {loss, b.x};
  }
};

/// BuiltinTask declaring every metric of its kind (its epoch-level metrics()).
struct ReplayTask : BuiltinTask {
  using BuiltinTask::BuiltinTask;
  // [snippet:metrics]
  pt::MetricCollection metrics() const {
    using pt::metric::Average;
    pt::MetricCollection m;
    const std::string kind = c.at("kind");
    if (kind == "regression") {
      m.add(pt::metric::MeanSquaredError{}).add(pt::metric::RootMeanSquaredError{});
      m.add(pt::metric::MeanAbsoluteError{}).add(pt::metric::R2Score{});
    } else if (kind == "multiclass") {
      const int64_t k = c.at("classes"), top = c.at("top_k");
      for (const auto& [avg, s] : std::vector<std::pair<Average, std::string>>{
               {Average::micro, "micro"}, {Average::macro, "macro"}, {Average::weighted, "weighted"}}) {
        for (const int64_t t : {int64_t{1}, top}) {
          const std::string p = t == 1 ? "" : "top" + std::to_string(t) + "_";
          m.add(pt::metric::Accuracy({.num_classes = k, .average = avg, .top_k = t, .name = p + "accuracy_" + s}));
          m.add(pt::metric::Precision({.num_classes = k, .average = avg, .top_k = t, .name = p + "precision_" + s}));
          m.add(pt::metric::Recall({.num_classes = k, .average = avg, .top_k = t, .name = p + "recall_" + s}));
          m.add(pt::metric::F1Score({.num_classes = k, .average = avg, .top_k = t, .name = p + "f1_" + s}));
          if (t == top) break;
        }
      }
      m.add(pt::metric::ConfusionMatrix(k));
    } else {
      m.add(pt::metric::BinaryAUROC{});
    }
    return m;
  }
  // [/snippet:metrics]
};

template <class Task, class... Ps>
json evaluate_case(const json& c, int64_t rank, int64_t world) {
  const std::string kind = c.at("kind");
  const int64_t n = c.at("n");
  auto x = torch::tensor(c.at("prediction").get<std::vector<double>>(), torch::kDouble);
  torch::Tensor y;
  if (kind == "multiclass") {
    x = x.view({n, c.at("classes").get<int64_t>()});
    y = torch::tensor(c.at("target").get<std::vector<int64_t>>(), torch::kLong);
  } else {
    if (c.value("column", false)) x = x.view({n, 1});  // a [batch, 1] output against [batch] targets
    y = torch::tensor(c.at("target").get<std::vector<double>>(), torch::kDouble);
  }
  Task task(c);
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  pt::Trainer<Task, Ps...> trainer(task, opt);
  json out;
  try {
    with_loader(c, c.at("loader"), x, y, rank, world, [&](auto& loader) {
      const auto m = trainer.evaluate(loader);
      out["samples"] = m.samples;
      out["loss"] = m.loss;
      if (m.has_accuracy()) out["accuracy"] = m.accuracy;
      if (!m.confusion.empty()) out["builtin_confusion"] = m.confusion;
      for (const auto& [name, v] : m.extra) out["metrics"][name] = v;
      for (const auto& [name, t] : m.tensors) out["metrics"][name] = flat(t);
    });
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  return out;
}

json run_metrics(const json& cases, int64_t rank, int64_t world) {
  json out = json::array();
  for (const auto& c : cases) {
    json r;
    if (world > 1) {
      r["declared"] = evaluate_case<ReplayTask, pt::parallel::DataParallel>(c, rank, world);
      r["builtin"] = evaluate_case<BuiltinTask, pt::parallel::DataParallel>(c, rank, world);
    } else {
      r["declared"] = evaluate_case<ReplayTask>(c, rank, world);
      r["builtin"] = evaluate_case<BuiltinTask>(c, rank, world);
    }
    out.push_back(r);
  }
  return out;
}

// --- samplers ----------------------------------------------------------------------------------------------------

/// Trains on the labels and records, per epoch, the sample ids of every batch trained and evaluated (the target's
/// second column is the sample's index).
struct IdTask {
  torch::nn::Linear lin{nullptr};
  int64_t epoch = 0;
  std::map<int64_t, std::vector<int64_t>> trained, evaluated;
  IdTask() {
    torch::manual_seed(1);
    lin = torch::nn::Linear(1, 1);
  }
  torch::nn::Module& module() { return *lin; }
  static void record(std::vector<int64_t>& to, const pt::Batch& b) {
    auto ids = b.y.select(1, 1).contiguous();
    to.insert(to.end(), ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  torch::Tensor training_step(const pt::Batch& b) {
    record(trained[epoch], b);
    return torch::mse_loss(lin->forward(b.x).reshape({-1}), b.y.select(1, 0).to(torch::kFloat32));
  }
  pt::Prediction validation_step(const pt::Batch& b) {
    record(evaluated[epoch], b);
    return {torch::zeros({}), b.x};
  }
  std::vector<std::string> metric_names() const { return {"loss"}; }
};

/// Tells the task the epoch the Trainer is in (a resumed run starts inside one).
struct EpochOfTask {
  IdTask* task = nullptr;
  template <class Ctx>
  void on_epoch_begin(Ctx& ctx) { task->epoch = ctx.state().epoch; }
};

template <class... Ps>
json train_case(const json& c, const fs::path& dir, int64_t rank, int64_t world) {
  const int64_t n = c.at("n");
  const auto x = torch::arange(n, torch::kFloat32).unsqueeze(1) / static_cast<double>(n);
  const auto y = torch::stack({torch::arange(n) % 3, torch::arange(n)}, 1);
  json out;
  for (const int64_t stop : {c.at("stop_step").get<int64_t>(), int64_t{-1}}) {  // the stopped run, then its resume
    IdTask task;
    torch::optim::SGD opt(task.module().parameters(), 0.01);
    pt::Trainer<IdTask, EpochOfTask, pt::checkpoint::Disk, Ps...> trainer(
        task, opt, EpochOfTask{&task},
        pt::checkpoint::Disk({.directory = dir, .resume = stop < 0 ? "auto" : "", .export_final = false, .log = nullptr}));
    with_loader(c, c.at("train_loader"), x, y, rank, world, [&](auto& train) {
      json vc = c;
      vc["batch"] = c.at("val_batch");
      vc["shuffle"] = c.value("val_shuffle", false);
      with_loader(vc, c.at("val_loader"), x, y, rank, world, [&](auto& val) {
        trainer.fit(train, val, {.epochs = c.at("epochs").get<int64_t>(), .max_steps = stop});
      });
    });
    json run;
    for (const auto& [e, ids] : task.trained) run["trained"][std::to_string(e)] = ids;
    for (const auto& [e, ids] : task.evaluated) run["evaluated"][std::to_string(e)] = ids;
    out[stop < 0 ? "resumed" : "stopped"] = run;
  }
  return out;
}

json run_samplers(const json& cases, const fs::path& work, int64_t rank, int64_t world) {
  json out = json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    const fs::path dir = work / ("case" + std::to_string(i));
    json r;
    try {
      r = world > 1 ? train_case<pt::parallel::DataParallel>(cases[i], dir, rank, world) : train_case<>(cases[i], dir, rank, world);
    } catch (const std::exception& e) {
      r["error"] = e.what();
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 || std::string(argv[2]) != "--nproc") {
    std::fprintf(stderr, "usage: differential_ranks metrics|samplers --nproc N CASES.json OUT\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int nproc = std::atoi(argv[3]);
  const fs::path cases_file = argv[4], out = argv[5];
  if (nproc > 1 && !std::getenv("RANK")) {
    pt::parallel::LaunchOptions o{.nproc = nproc, .env = {{"OMP_NUM_THREADS", "1"}}, .deadline = std::chrono::seconds(300)};
    o.args.assign(argv, argv + argc);
    return pt::parallel::launch_local(o);
  }
  const int64_t rank = std::getenv("RANK") ? std::atoi(std::getenv("RANK")) : 0;
  try {
    std::ifstream in(cases_file);
    const json cases = json::parse(in);
    json result;
    if (mode == "metrics") {
      result = run_metrics(cases, rank, nproc);
    } else if (mode == "samplers") {
      const fs::path work = out.string() + ".work";
      result = run_samplers(cases, work, rank, nproc);
    } else {
      std::fprintf(stderr, "differential_ranks: unknown mode '%s'\n", mode.c_str());
      return 2;
    }
    std::ofstream(out.string() + ".rank" + std::to_string(rank) + ".json") << result.dump();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "differential_ranks: rank %lld: %s\n", static_cast<long long>(rank), e.what());
    return 1;
  }
  return 0;
}
