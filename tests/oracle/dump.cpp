// The C++ side of the reference-parity tests (tests/oracle/*.py): `oracle_dump <case> <out.json>` runs one of our
// policies on a scripted sequence and writes its inputs and outputs as JSON; the Python script of the same name
// runs the reference (PyTorch, scikit-learn, Ultralytics' formulas) on the same inputs and compares.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/all.hpp>

namespace pt = policytrain;
using nlohmann::json;

namespace {

json to_json(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kDouble).contiguous().cpu();
  std::vector<double> v(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  json vals = json::array();
  for (double d : v) vals.push_back(std::isfinite(d) ? json(d) : json(std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf")));
  return {{"shape", t.sizes().vec()}, {"values", vals}};
}

// --- LossScaler: a scripted sequence of finite and non-finite gradients, with a state_dict round trip ---
json loss_scaler() {
  const pt::precision::LossScaler::Options o{.init_scale = 1024.0, .growth_factor = 2.0, .backoff_factor = 0.5,
                                             .growth_interval = 3};
  // 'f': finite, 'i': an inf in the second parameter's gradient, 'n': a NaN in the first's.
  const std::string script = "fffffinffffffiiffffffnfff";
  const size_t reload_at = 12;  // after this many steps the scaler is saved, a fresh one loads it, and goes on
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(11);
  std::vector<torch::Tensor> params{torch::randn({3, 2}, gen).requires_grad_(), torch::randn({5}, gen).requires_grad_()};
  torch::optim::SGD opt(params, torch::optim::SGDOptions(0.1));
  auto scaler = std::make_unique<pt::precision::LossScaler>(o);
  scaler->scale(torch::ones({}));  // the scale lives on the CPU
  json steps = json::array();
  json saved;
  const json init = {to_json(params[0]), to_json(params[1])};
  for (size_t k = 0; k < script.size(); ++k) {
    if (k == reload_at) {
      auto sd = scaler->state_dict();
      for (auto& [key, v] : sd) saved[key] = v.item<double>();
      scaler = std::make_unique<pt::precision::LossScaler>();
      scaler->load_state_dict(sd);
      scaler->scale(torch::ones({}));
    }
    const double s = scaler->scale_value();
    std::vector<torch::Tensor> g{torch::randn({3, 2}, gen), torch::randn({5}, gen)};
    if (script[k] == 'i') g[1][2] = std::numeric_limits<float>::infinity();
    if (script[k] == 'n') g[0][1][0] = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = g[i] * s;  // what backward of S*loss gives
    scaler->unscale(opt);
    json unscaled = json::array();
    for (auto& p : params) unscaled.push_back(to_json(p.grad()));
    const bool stepped = scaler->step(opt);
    scaler->update();
    json after = json::array();
    for (auto& p : params) after.push_back(to_json(p));
    steps.push_back({{"kind", std::string(1, script[k])}, {"scale_before", s}, {"grads", {to_json(g[0]), to_json(g[1])}},
                     {"unscaled", unscaled}, {"stepped", stepped}, {"scale_after", scaler->scale_value()},
                     {"growth_tracker", scaler->growth_tracker()}, {"skipped_steps", scaler->skipped_steps()},
                     {"params_after", after}});
  }
  return {{"options", {{"init_scale", o.init_scale}, {"growth_factor", o.growth_factor},
                       {"backoff_factor", o.backoff_factor}, {"growth_interval", o.growth_interval}}},
          {"lr", 0.1}, {"init", init}, {"reload_at", reload_at}, {"saved_state", saved}, {"steps", steps}};
}

// --- FusedAdamW: param groups with their own lr and weight decay, amsgrad on and off ---
json fused_adamw() {
  json cases = json::array();
  for (const bool amsgrad : {false, true}) {
    auto gen = torch::make_generator<at::CPUGeneratorImpl>(amsgrad ? 5 : 4);
    std::vector<torch::Tensor> a{torch::randn({4, 3}, gen).requires_grad_(), torch::randn({3}, gen).requires_grad_()};
    std::vector<torch::Tensor> b{torch::randn({2, 2, 2}, gen).requires_grad_()};
    json init = json::array();
    for (auto& p : a) init.push_back(to_json(p));
    for (auto& p : b) init.push_back(to_json(p));
    const json groups = {{{"lr", 1e-2}, {"weight_decay", 0.05}, {"betas", {0.9, 0.999}}, {"eps", 1e-8}, {"n", 2}},
                         {{"lr", 3e-3}, {"weight_decay", 0.5}, {"betas", {0.8, 0.99}}, {"eps", 1e-6}, {"n", 1}}};
    std::vector<torch::optim::OptimizerParamGroup> pg;
    pg.emplace_back(a, std::make_unique<torch::optim::AdamWOptions>(
                           torch::optim::AdamWOptions(1e-2).weight_decay(0.05).betas({0.9, 0.999}).eps(1e-8).amsgrad(amsgrad)));
    pg.emplace_back(b, std::make_unique<torch::optim::AdamWOptions>(
                           torch::optim::AdamWOptions(3e-3).weight_decay(0.5).betas({0.8, 0.99}).eps(1e-6).amsgrad(amsgrad)));
    pt::optim::FusedAdamW opt(pg);
    json steps = json::array();
    std::vector<torch::Tensor> all{a[0], a[1], b[0]};
    for (int t = 0; t < 12; ++t) {
      json grads = json::array();
      for (auto& p : all) {
        // Gradients that shrink and flip so that amsgrad's max matters.
        auto g = torch::randn(p.sizes(), gen) * (t % 4 == 3 ? 0.1 : 1.0 + t);
        p.mutable_grad() = g;
        grads.push_back(to_json(g));
      }
      opt.step();
      json after = json::array();
      for (auto& p : all) after.push_back(to_json(p));
      steps.push_back({{"grads", grads}, {"params_after", after}});
    }
    cases.push_back({{"amsgrad", amsgrad}, {"groups", groups}, {"init", init}, {"steps", steps}});
  }
  return {{"cases", cases}};
}

// --- ClassificationReport: random labels over 7 classes, class 3 never true, class 5 never predicted ---
json report() {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(21);
  const int64_t k = 7, n = 300;
  auto y_true = torch::randint(0, k, {n}, gen, torch::kLong);
  auto y_pred = torch::randint(0, k, {n}, gen, torch::kLong);
  y_true.masked_fill_(y_true == 3, 4);
  y_pred.masked_fill_(y_pred == 5, 6);
  // Half the predictions right, so the scores are not all near 1/k.
  auto right = torch::rand({n}, gen) < 0.5;
  y_pred = torch::where(right & (y_true != 5), y_true, y_pred);
  pt::MetricsAccumulator acc;
  auto logits = torch::full({n, k}, -5.0).scatter_(1, y_pred.unsqueeze(1), 5.0);
  acc.add(torch::tensor(0.0), logits, y_true);
  auto m = acc.result();
  auto r = m.report();
  std::vector<int64_t> t(y_true.data_ptr<int64_t>(), y_true.data_ptr<int64_t>() + n);
  std::vector<int64_t> p(y_pred.data_ptr<int64_t>(), y_pred.data_ptr<int64_t>() + n);
  return {{"k", k}, {"y_true", t}, {"y_pred", p}, {"report", r.to_json()}, {"text", r.to_string(4)},
          {"accuracy", m.accuracy}};
}

// --- Ema on a batch-norm model: the live state after every step taken, and the average ---
struct BnNetImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
  BnNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(5, 6));
    bn = register_module("bn", torch::nn::BatchNorm1d(6));
    fc2 = register_module("fc2", torch::nn::Linear(6, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(bn(fc1(x)))); }
};
TORCH_MODULE(BnNet);

json state_of(const torch::nn::Module& m) {
  json j;
  for (const auto& p : m.named_parameters(true)) j[p.key()] = to_json(p.value());
  for (const auto& b : m.named_buffers(true)) j[b.key()] = to_json(b.value());
  return j;
}

struct BnTask {
  BnNet net;
  std::vector<json> eval_states;
  int calls = 0;
  torch::nn::Module& module() { return *net; }
  // The 4th micro-batch's loss is NaN (after its forward updated the batch-norm statistics): a skipped step.
  torch::Tensor training_step(const pt::Batch& b) {
    auto loss = torch::nn::functional::cross_entropy(net->forward(b.x), b.y);
    return ++calls == 4 ? loss * std::numeric_limits<float>::quiet_NaN() : loss;
  }
  pt::Prediction validation_step(const pt::Batch& b) {
    eval_states.push_back(state_of(*net));
    auto out = net->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};

struct LiveLog {  // placed before Ema: sees the state Ema averages
  std::vector<json>* log;
  template <class C>
  void after_step(C& c, bool stepped) {
    if (stepped) log->push_back(state_of(c.module()));
  }
};

json ema() {
  torch::manual_seed(3);
  BnTask task;
  const json initial = state_of(*task.net);
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(9);
  auto x = torch::randn({60, 5}, gen) * 2 + 1;
  auto y = torch::randint(0, 3, {60}, gen, torch::kLong);
  pt::data::TensorLoader loader(x, y, {.batch_size = 10, .shuffle = false});
  auto xv = torch::randn({20, 5}, gen);
  pt::data::TensorLoader val(xv, torch::zeros({20}, torch::kLong), {.batch_size = 20, .shuffle = false});
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.2).momentum(0.9));
  std::vector<json> live;
  const double decay = 0.95, tau = 3;
  pt::Trainer<BnTask, pt::precision::Fp32, LiveLog, pt::callbacks::Ema> trainer(
      task, opt, pt::precision::Fp32{pt::NonFinite::skip}, LiveLog{&live}, pt::callbacks::Ema({.decay = decay, .tau = tau}));
  trainer.fit(loader, val, {.epochs = 2});
  const json live_after = state_of(*task.net);
  auto& e = trainer.get<pt::callbacks::Ema>();
  json avg;
  for (auto& [k, v] : e.state_dict()) avg[k] = to_json(v);
  return {{"decay", decay}, {"tau", tau}, {"initial", initial}, {"live", live}, {"updates", e.updates()},
          {"skipped", trainer.state().skipped_steps}, {"average", avg}, {"eval_state", task.eval_states.back()},
          {"live_after_eval", live_after}};
}

// --- NominalBatch's warmup ramp of the accumulation: the micro-batches after which a step is taken ---
struct StepAt {
  std::vector<int64_t>* out;
  int64_t nb;
  template <class C>
  void after_step(C& c, bool) { out->push_back(c.state().epoch * nb + c.state().batch_in_epoch - 1); }
};
struct LinTask {
  torch::nn::Linear lin{4, 2};
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(lin(b.x), b.y); }
};

json nominal_ramp() {
  json cases = json::array();
  struct Case { int64_t nominal, batch, warmup, nb, epochs; };
  // Ratios with halves (20/8 = 2.5, 12/8 = 1.5, 36/8 = 4.5) test numpy's round-half-to-even.
  for (const Case c : {Case{64, 8, 100, 150, 1}, Case{20, 8, 30, 40, 1}, Case{12, 8, 7, 20, 1}, Case{36, 8, 50, 23, 3},
                       Case{64, 16, 0, 30, 1}}) {
    LinTask task;
    torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.1).weight_decay(5e-4));
    auto x = torch::randn({c.nb * c.batch, 4});
    auto y = torch::zeros({c.nb * c.batch}, torch::kLong);
    pt::data::TensorLoader loader(x, y, {.batch_size = c.batch, .shuffle = false});
    std::vector<int64_t> at;
    pt::accumulate::NominalBatch acc({.nominal = c.nominal, .batch = c.batch, .warmup_batches = c.warmup});
    pt::Trainer<LinTask, pt::accumulate::NominalBatch, StepAt> trainer(task, opt, acc, StepAt{&at, c.nb});
    trainer.fit(loader, {.epochs = c.epochs});
    json ramp = json::array();
    for (int64_t ni = 0; ni < c.nb * c.epochs; ++ni) ramp.push_back(acc.accumulate_at(ni));
    cases.push_back({{"nominal", c.nominal}, {"batch", c.batch}, {"warmup", c.warmup}, {"nb", c.nb}, {"epochs", c.epochs},
                     {"steps_at", at}, {"accumulate_at", ramp}, {"accumulate", acc.accumulate()},
                     {"weight_decay_factor", acc.weight_decay_factor()},
                     {"weight_decay", static_cast<torch::optim::SGDOptions&>(opt.param_groups()[0].options()).weight_decay()}});
  }
  return {{"cases", cases}};
}

// --- GradClip on a model with a tied weight: gradients before and after, by norm (p = 2, 1, inf) and by value ---
struct HolderImpl : torch::nn::Module {
  torch::Tensor weight;
  explicit HolderImpl(torch::Tensor w) { weight = register_parameter("weight", std::move(w)); }
};
TORCH_MODULE(Holder);
struct TiedImpl : torch::nn::Module {
  Holder enc{nullptr}, dec{nullptr};
  torch::Tensor bias;
  TiedImpl() {
    auto w = torch::randn({4, 4}) * 0.5;
    enc = register_module("enc", Holder(w));
    dec = register_module("dec", Holder(w));
    bias = register_parameter("bias", torch::randn({4}) * 0.1);
  }
  torch::Tensor forward(const torch::Tensor& x) { return torch::tanh(x.matmul(enc->weight.t())).matmul(dec->weight.t()) + bias; }
};
TORCH_MODULE(Tied);
struct ModuleCtx {
  torch::nn::Module* m;
  torch::nn::Module& module() { return *m; }
};

json grad_clip() {
  using GC = pt::callbacks::GradClip;
  json cases = json::array();
  struct Case { GC::Options o; const char* name; };
  const double inf = std::numeric_limits<double>::infinity();
  for (const Case c : {Case{{.mode = GC::Mode::norm, .max_norm = 0.05, .p = 2.0}, "norm2"},
                       Case{{.mode = GC::Mode::norm, .max_norm = 0.3, .p = 1.0}, "norm1"},
                       Case{{.mode = GC::Mode::norm, .max_norm = 0.02, .p = inf}, "norminf"},
                       Case{{.mode = GC::Mode::norm, .max_norm = 1e3, .p = 2.0}, "norm_no_clip"},
                       Case{{.mode = GC::Mode::value, .clip_value = 0.01}, "value"}}) {
    torch::manual_seed(17);
    Tied net;
    auto x = torch::randn({16, 4});
    torch::mse_loss(net->forward(x), x * 3).backward();
    json before, after;
    for (const auto& [k, p] : pt::unique_named_parameters(*net)) before[k] = to_json(p.grad());
    GC clip(c.o);
    ModuleCtx ctx{&*net};
    clip.before_step(ctx);
    for (const auto& [k, p] : pt::unique_named_parameters(*net)) after[k] = to_json(p.grad());
    const auto& o = clip.options();  // resolved: the mode's threshold is set, the other one is not
    cases.push_back({{"name", c.name}, {"mode", clip.clips_by_norm() ? "norm" : "value"},
                     {"max_norm", o.max_norm ? json(*o.max_norm) : json(nullptr)},
                     {"p", std::isinf(o.p) ? json("inf") : json(o.p)},
                     {"clip_value", o.clip_value ? json(*o.clip_value) : json(nullptr)},
                     {"grads_before", before}, {"grads_after", after},
                     {"norm", clip.clips_by_norm() ? json(clip.last_norm()) : json(nullptr)},
                     {"tied", {"enc.weight", "dec.weight"}}});
  }
  return {{"cases", cases}};
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::function<json()>> cases{{"loss_scaler", loss_scaler}, {"fused_adamw", fused_adamw},
                                                           {"report", report},           {"ema", ema},
                                                           {"nominal_ramp", nominal_ramp}, {"grad_clip", grad_clip}};
  if (argc != 3 || !cases.count(argv[1])) {
    std::fprintf(stderr, "usage: oracle_dump <case> <out.json>; cases:");
    for (auto& [k, v] : cases) std::fprintf(stderr, " %s", k.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  torch::set_num_threads(1);
  const json j = cases.at(argv[1])();
  std::ofstream(argv[2]) << j.dump() << "\n";
  return 0;
}
