// The C++ side of the schedule parity test (tests/parity/schedules.py, CTest parity.schedules): reads the cases
// the Python side wrote, trains each with schedule::Lr in a real Trainer (a tiny linear model; scripted skipped
// steps through a precision policy; scripted validation metrics for reduce-on-plateau; a MetricsLog), and writes
// per optimizer step the lr of every param group and its momentum (SGD) / beta1 (AdamW) that the step was taken
// with. Usage: parity_schedules CASES.json OUT.json LOG_DIR
#include <cstdio>
#include <exception>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/callbacks/metrics_log.hpp>
#include <policytrain/trainer.hpp>
#include <policytrain/data/loader.hpp>
#include <policytrain/schedule/lr.hpp>

namespace pt = policytrain;
namespace sch = policytrain::schedule;
using nlohmann::json;

namespace {

/// A linear classifier; validation returns the case's scripted metric of that epoch as its loss.
struct Task {
  torch::nn::Linear lin{4, 3};
  std::vector<double> val;
  size_t val_calls = 0;
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(lin->forward(b.x), b.y); }
  pt::Prediction validation_step(const pt::Batch& b) {
    if (val_calls >= val.size()) throw std::runtime_error("parity_schedules: more validations than scripted metrics");
    // A double 0-dim loss: the evaluation's mean over one batch is the scripted value exactly.
    return {torch::tensor(val[val_calls++], torch::kFloat64), lin->forward(b.x)};
  }
};

/// Skips the optimizer steps whose attempt index is listed (as a loss scaler does on inf gradients).
struct SkipAt {
  static constexpr pt::Category category = pt::Category::precision;
  std::set<int64_t> skip;
  template <class C> bool step(C& c) {
    if (skip.count(c.state().global_step)) return false;
    c.optimizer().step();
    return true;
  }
};

/// The lr and momentum of every group that each step is taken with.
struct Recorder {
  json* lr;
  json* momentum;
  template <class C> void before_step(C& c) {
    json l = json::array(), m = json::array();
    for (auto& g : c.optimizer().param_groups()) {
      l.push_back(g.options().get_lr());
      m.push_back(sch::momentum_of(g.options()));
    }
    lr->push_back(l);
    momentum->push_back(m);
  }
};

template <class E>
E pick(const json& o, const char* key, std::initializer_list<std::pair<const char*, E>> names, E dflt) {
  if (!o.contains(key)) return dflt;
  const auto s = o.at(key).get<std::string>();
  for (auto& [n, e] : names)
    if (s == n) return e;
  throw std::invalid_argument(std::string("parity_schedules: unknown value '") + s + "' of " + key);
}

sch::LrOptions options_of(const json& c) {
  const json& o = c.at("options");
  sch::LrOptions r;
  r.kind = sch::kind_from_string(c.at("kind").get<std::string>());
  auto num = [&](const char* k, auto& field) {
    if (o.contains(k)) field = o.at(k).get<std::remove_reference_t<decltype(field)>>();
  };
  num("total_steps", r.total_steps);
  num("lrf", r.lrf);
  r.decay_end = pick(o, "decay_end", {{"last_step", sch::DecayEnd::last_step}, {"after_run", sch::DecayEnd::after_run}},
                     r.decay_end);
  num("count_skipped_steps", r.count_skipped_steps);
  r.unit = pick(o, "unit", {{"steps", sch::Unit::steps}, {"epochs", sch::Unit::epochs}}, r.unit);
  num("step_size", r.step_size);
  num("milestones", r.milestones);
  num("gamma", r.gamma);
  num("pct_start", r.pct_start);
  num("div_factor", r.div_factor);
  r.anneal = pick(o, "anneal", {{"cos", sch::Anneal::cos}, {"linear", sch::Anneal::linear}}, r.anneal);
  num("three_phase", r.three_phase);
  num("cycle_momentum", r.cycle_momentum);
  num("base_momentum", r.base_momentum);
  num("max_momentum", r.max_momentum);
  num("power", r.power);
  num("maximize", r.maximize);
  num("patience", r.patience);
  num("factor", r.factor);
  num("threshold", r.threshold);
  r.threshold_mode = pick(o, "threshold_mode", {{"rel", sch::ThresholdMode::rel}, {"abs", sch::ThresholdMode::abs}},
                          r.threshold_mode);
  num("cooldown", r.cooldown);
  num("plateau_eps", r.plateau_eps);
  num("warmup_steps", r.warmup_steps);
  r.warmup_mode = pick(o, "warmup_mode",
                       {{"sequential", sch::WarmupMode::sequential}, {"interpolate", sch::WarmupMode::interpolate}},
                       r.warmup_mode);
  num("warmup_start_factor", r.warmup_start_factor);
  return r;
}

json run_case(const json& c, const std::string& log_dir) {
  const int64_t epochs = c.at("epochs"), spe = c.at("steps_per_epoch"), batch = 8;
  const auto lrs = c.at("lrs").get<std::vector<double>>();
  const double mom = c.at("momentum");
  torch::manual_seed(0);
  Task task;
  task.val = c.value("val", std::vector<double>{});
  // One group (weight and bias), or two (weight; bias) with their own lrs.
  std::vector<std::vector<torch::Tensor>> params;
  if (lrs.size() == 1) params = {{task.lin->weight, task.lin->bias}};
  else params = {{task.lin->weight}, {task.lin->bias}};
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (c.at("optimizer") == "sgd") {
    for (size_t g = 0; g < lrs.size(); ++g)
      groups.emplace_back(params[g], std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(lrs[g]).momentum(mom)));
    opt = std::make_unique<torch::optim::SGD>(std::move(groups), torch::optim::SGDOptions(lrs[0]).momentum(mom));
  } else {
    for (size_t g = 0; g < lrs.size(); ++g)
      groups.emplace_back(params[g], std::make_unique<torch::optim::AdamWOptions>(
                                         torch::optim::AdamWOptions(lrs[g]).betas({mom, 0.999})));
    opt = std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(lrs[0]).betas({mom, 0.999}));
  }
  auto x = torch::randn({spe * batch, 4});
  auto y = torch::randint(0, 3, {spe * batch}, torch::kLong);
  pt::data::TensorLoader train(x, y, {.batch_size = batch, .shuffle = false});
  pt::data::TensorLoader val(x.slice(0, 0, batch), y.slice(0, 0, batch), {.batch_size = batch, .shuffle = false});

  json lr = json::array(), momentum = json::array();
  const auto skip = c.value("skip", std::vector<int64_t>{});
  const std::string dir = log_dir + "/" + c.at("name").get<std::string>();
  pt::Trainer<Task, sch::Lr, SkipAt, Recorder, pt::callbacks::MetricsLog> trainer(
      task, *opt, sch::Lr(options_of(c)), SkipAt{{skip.begin(), skip.end()}}, Recorder{&lr, &momentum},
      pt::callbacks::MetricsLog({.dir = dir, .print_summary = false}));
  pt::FitResult r = task.val.empty() ? trainer.fit(train, {.epochs = epochs}) : trainer.fit(train, val, {.epochs = epochs});
  return {{"name", c.at("name")}, {"lr", lr}, {"momentum", momentum}, {"skipped_steps", r.skipped_steps},
          {"steps_jsonl", dir + "/steps.jsonl"}};
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 4) {
    std::fprintf(stderr, "usage: parity_schedules CASES.json OUT.json LOG_DIR\n");
    return 2;
  }
  torch::set_num_threads(1);
  std::ifstream in(argv[1]);
  const json cases = json::parse(in);
  json out = json::array();
  for (const auto& c : cases) out.push_back(run_case(c, argv[3]));
  std::ofstream(argv[2]) << out.dump(1) << "\n";
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "parity_schedules: %s\n", e.what());
  return 1;
}
