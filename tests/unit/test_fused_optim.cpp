// optim::FusedAdamW, FusedAdam and FusedSgd against Python's torch.optim.{AdamW,Adam,SGD}(fused=True) as the oracle:
// the same initial parameters and gradient sequence (exchanged with torch::pickle_save / torch.save), the same
// grad_scale/found_inf (set on the Python optimizer as torch.amp.GradScaler does), parameters compared after every
// step and the state at the end. Both sides run the same ATen kernel, so equality is exact.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>

#include <torch/serialize.h>

#include <policytrain/optim/fused_adam.hpp>
#include <policytrain/optim/fused_adamw.hpp>
#include <policytrain/optim/fused_sgd.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;
using torch::Tensor;

namespace {

struct Case {
  std::string kind;  // adamw | adam | sgd
  std::map<std::string, double> options;
  std::vector<double> group_lr;
  std::vector<int64_t> group_of;  // the group of each parameter
  std::vector<double> grad_scale;  // per step; 0: none
  std::vector<double> found_inf;   // per step; -1: none
  size_t steps() const { return grad_scale.size(); }
};

struct Inputs {
  std::vector<Tensor> params;
  std::vector<std::vector<Tensor>> grads;  // [step][param], already multiplied by the step's grad_scale
};

Inputs make_inputs(const Case& c, uint64_t seed) {
  torch::manual_seed(seed);
  const std::vector<std::vector<int64_t>> shapes{{4, 3}, {3}, {5}, {2, 2}, {7}};
  Inputs in;
  for (size_t i = 0; i < c.group_of.size(); ++i) in.params.push_back(torch::randn(shapes[i % shapes.size()]));
  for (size_t t = 0; t < c.steps(); ++t) {
    std::vector<Tensor> g;
    for (auto& p : in.params) g.push_back(torch::randn_like(p) * (c.grad_scale[t] > 0 ? c.grad_scale[t] : 1.0));
    // A step the scaler skips has a non-finite gradient: the kernel must not let it through.
    if (c.found_inf[t] == 1) g[0].view(-1)[0] = std::numeric_limits<float>::infinity();
    in.grads.push_back(std::move(g));
  }
  return in;
}

std::vector<Tensor> clone_all(const std::vector<Tensor>& v) {
  std::vector<Tensor> out;
  for (auto& t : v) out.push_back(t.detach().clone().requires_grad_(true));
  return out;
}

template <class Opt, class Options>
std::unique_ptr<torch::optim::Optimizer> build(const Case& c, const std::vector<Tensor>& params, Options defaults) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (size_t g = 0; g < c.group_lr.size(); ++g) {
    std::vector<Tensor> ps;
    for (size_t i = 0; i < params.size(); ++i)
      if (c.group_of[i] == static_cast<int64_t>(g)) ps.push_back(params[i]);
    auto o = std::make_unique<Options>(defaults);
    o->lr(c.group_lr[g]);
    groups.emplace_back(ps, std::move(o));
  }
  return std::make_unique<Opt>(groups, defaults);
}

/// The optimizer of `c.kind`: the fused one, or (plain = true) LibTorch's own class with the same options.
std::unique_ptr<torch::optim::Optimizer> make(const Case& c, const std::vector<Tensor>& params, bool plain = false) {
  const auto& o = c.options;
  if (c.kind == "sgd") {
    auto d = torch::optim::SGDOptions(0.1).momentum(o.at("momentum")).dampening(o.at("dampening"))
                 .weight_decay(o.at("weight_decay")).nesterov(o.at("nesterov") != 0);
    return plain ? build<torch::optim::SGD>(c, params, d) : build<pt::optim::FusedSgd>(c, params, d);
  }
  const auto betas = std::make_tuple(o.at("beta1"), o.at("beta2"));
  if (c.kind == "adamw") {
    auto d = torch::optim::AdamWOptions().betas(betas).eps(o.at("eps")).weight_decay(o.at("weight_decay"))
                 .amsgrad(o.at("amsgrad") != 0);
    return plain ? build<torch::optim::AdamW>(c, params, d) : build<pt::optim::FusedAdamW>(c, params, d);
  }
  auto d = torch::optim::AdamOptions().betas(betas).eps(o.at("eps")).weight_decay(o.at("weight_decay"))
               .amsgrad(o.at("amsgrad") != 0);
  return plain ? build<torch::optim::Adam>(c, params, d) : build<pt::optim::FusedAdam>(c, params, d);
}

void sync_counts(const Case& c, torch::optim::Optimizer& opt) {
  if (c.kind == "adamw") dynamic_cast<pt::optim::FusedAdamW&>(opt).sync_step_counts();
  if (c.kind == "adam") dynamic_cast<pt::optim::FusedAdam&>(opt).sync_step_counts();
}

/// Steps [from, to) of the sequence; returns the parameters after each step.
std::vector<std::vector<Tensor>> run(const Case& c, const Inputs& in, torch::optim::Optimizer& opt,
                                     std::vector<Tensor>& params, size_t from, size_t to) {
  std::vector<std::vector<Tensor>> out;
  auto* scaling = dynamic_cast<pt::optim::FusedGradScaling*>(&opt);
  for (size_t t = from; t < to; ++t) {
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = in.grads[t][i].clone();
    const auto f = torch::TensorOptions().dtype(torch::kFloat);
    if (scaling)
      scaling->set_grad_scaling(c.grad_scale[t] > 0 ? torch::full({}, c.grad_scale[t], f) : Tensor{},
                                c.found_inf[t] >= 0 ? torch::full({}, c.found_inf[t], f) : Tensor{});
    opt.step();
    std::vector<Tensor> snap;
    for (auto& p : params) snap.push_back(p.detach().clone());
    out.push_back(std::move(snap));
  }
  return out;
}

bool python_available() {
  static const bool ok = std::system("python3 -c 'import torch' >/dev/null 2>&1") == 0;
  return ok;
}

/// Python's torch.optim runs over the same inputs, all cases in one Python process (importing torch is slow):
/// for each, {"params": [[Tensor] per step], "state": [{name: Tensor}]}.
std::vector<c10::impl::GenericDict> python_oracle(const std::vector<std::pair<Case, Inputs>>& cases, const std::string& name) {
  const auto dir = testing::temp_dir("fused-optim-" + name);
  const fs::path script = fs::path(POLICYTRAIN_SOURCE_DIR) / "tests/unit/fused_optim_oracle.py";
  std::string cmd = "python3 " + script.string();
  for (size_t k = 0; k < cases.size(); ++k) {
    const auto& [c, in] = cases[k];
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("kind", c.kind);
    c10::Dict<std::string, double> opts;
    for (auto& [key, v] : c.options) opts.insert(key, v);
    d.insert("options", opts);
    d.insert("group_lr", c10::List<double>(c.group_lr));
    d.insert("group_of", c10::List<int64_t>(c.group_of));
    d.insert("grad_scale", c10::List<double>(c.grad_scale));
    d.insert("found_inf", c10::List<double>(c.found_inf));
    d.insert("params", c10::List<Tensor>(in.params));
    c10::List<c10::List<Tensor>> grads;
    for (auto& g : in.grads) grads.push_back(c10::List<Tensor>(g));
    d.insert("grads", grads);
    const auto bytes = torch::pickle_save(d);
    const auto in_file = dir / ("in" + std::to_string(k) + ".pt");
    std::ofstream(in_file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    cmd += " " + in_file.string() + " " + (dir / ("out" + std::to_string(k) + ".pt")).string();
  }
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
  std::vector<c10::impl::GenericDict> results;
  for (size_t k = 0; k < cases.size(); ++k) {
    std::ifstream f(dir / ("out" + std::to_string(k) + ".pt"), std::ios::binary);
    std::vector<char> out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    results.push_back(torch::pickle_load(out).toGenericDict());
  }
  fs::remove_all(dir);
  return results;
}

/// Our state of parameter `p` under Python's names (the step as a float, as PyTorch keeps it).
std::map<std::string, Tensor> our_state(const Case& c, torch::optim::Optimizer& opt, const Tensor& p) {
  std::map<std::string, Tensor> s;
  auto it = opt.state().find(p.unsafeGetTensorImpl());
  if (it == opt.state().end()) return s;
  auto adam_like = [&](auto& st) {
    s["exp_avg"] = st.exp_avg();
    s["exp_avg_sq"] = st.exp_avg_sq();
    if (st.max_exp_avg_sq().defined()) s["max_exp_avg_sq"] = st.max_exp_avg_sq();
    s["step"] = torch::full({}, static_cast<double>(st.step()), torch::kFloat);
  };
  if (c.kind == "sgd") s["momentum_buffer"] = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
  if (c.kind == "adamw") adam_like(static_cast<torch::optim::AdamWParamState&>(*it->second));
  if (c.kind == "adam") adam_like(static_cast<torch::optim::AdamParamState&>(*it->second));
  return s;
}

/// Checks our run of `c` against Python's (`py`): every step's parameters and the final state equal.
void check_case(const Case& c, const Inputs& in, const c10::impl::GenericDict& py) {
  auto params = clone_all(in.params);
  auto opt = make(c, params);
  const auto ours = run(c, in, *opt, params, 0, c.steps());
  auto py_params = py.at("params").toList();
  REQUIRE(py_params.size() == ours.size());
  for (size_t t = 0; t < ours.size(); ++t) {
    auto step_params = py_params.get(t).toList();
    for (size_t i = 0; i < params.size(); ++i) {
      CAPTURE(t);
      CAPTURE(i);
      const auto theirs = step_params.get(i).toTensor();
      CHECK(torch::equal(ours[t][i], theirs));
      // A skipped step (found_inf = 1) leaves the parameters as they were: the formula, not only Python's word.
      if (c.found_inf[t] == 1) CHECK(torch::equal(ours[t][i], t == 0 ? in.params[i] : ours[t - 1][i]));
      CHECK(ours[t][i].isfinite().all().item<bool>());
    }
  }
  sync_counts(c, *opt);
  auto py_state = py.at("state").toList();
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(i);
    auto mine = our_state(c, *opt, params[i]);
    auto theirs = py_state.get(i).toGenericDict();
    CHECK(mine.size() == theirs.size());
    for (const auto& kv : theirs) {
      const auto key = kv.key().toStringRef();
      CAPTURE(key);
      REQUIRE(mine.count(key) == 1);
      CHECK(torch::equal(mine[key], kv.value().toTensor().to(mine[key].dtype())));
    }
  }
  // It did train (a test that cannot fail otherwise: every parameter moved).
  for (size_t i = 0; i < params.size(); ++i) CHECK_FALSE(torch::equal(params[i], in.params[i]));
}

/// Runs each case in C++ and in Python and checks every step's parameters and the final state are equal.
void check_against_python(const std::vector<Case>& cases, const std::string& name, uint64_t seed = 11) {
  if (!python_available()) {
    MESSAGE("python3 with torch is not installed; skipped");
    return;
  }
  std::vector<std::pair<Case, Inputs>> all;
  for (auto& c : cases) all.emplace_back(c, make_inputs(c, seed++));
  const auto oracle = python_oracle(all, name);
  for (size_t k = 0; k < all.size(); ++k) {
    CAPTURE(k);
    check_case(all[k].first, all[k].second, oracle[k]);
  }
}

const std::vector<double> kNoScale(8, 0.0), kNoInf(8, -1.0);
// The loss scaler's sequence: a scale that changes, two skipped steps (inf in the gradients), found_inf 0 otherwise.
const std::vector<double> kScale{1024, 1024, 2048, 1024, 1024, 512, 512, 1024}, kInf{0, 0, 1, 0, 0, 1, 0, 0};

Case adam_case(const std::string& kind, bool amsgrad, double wd) {
  return {kind, {{"beta1", 0.9}, {"beta2", 0.99}, {"eps", 1e-8}, {"weight_decay", wd}, {"amsgrad", amsgrad ? 1.0 : 0.0}},
          {1e-2, 3e-3}, {0, 1, 0, 1, 1}, kNoScale, kNoInf};
}
Case sgd_case(double momentum, double dampening, bool nesterov, double wd) {
  return {"sgd", {{"momentum", momentum}, {"dampening", dampening}, {"nesterov", nesterov ? 1.0 : 0.0}, {"weight_decay", wd}},
          {0.05, 0.01}, {0, 1, 0, 1, 1}, kNoScale, kNoInf};
}
Case scaled(Case c) {
  c.grad_scale = kScale;
  c.found_inf = kInf;
  return c;
}

}  // namespace

TEST_CASE("FusedAdamW equals torch.optim.AdamW(fused=True) step for step") {
  std::vector<Case> cases;
  for (bool amsgrad : {false, true})
    for (auto c : {adam_case("adamw", amsgrad, 0.05), scaled(adam_case("adamw", amsgrad, 0.05))}) cases.push_back(c);
  check_against_python(cases, "adamw");
}

TEST_CASE("FusedAdam equals torch.optim.Adam(fused=True) step for step" * doctest::test_suite("extended")) {
  std::vector<Case> cases;
  for (bool amsgrad : {false, true})
    for (auto c : {adam_case("adam", amsgrad, 0.0), adam_case("adam", amsgrad, 0.01), scaled(adam_case("adam", amsgrad, 0.01))})
      cases.push_back(c);
  check_against_python(cases, "adam");
}

TEST_CASE("FusedSgd equals torch.optim.SGD(fused=True) step for step") {
  std::vector<Case> cases;
  for (auto c : {sgd_case(0.937, 0, true, 5e-4),  // the Ultralytics default
                 sgd_case(0.9, 0.1, false, 1e-2), sgd_case(0, 0, false, 1e-3), sgd_case(0.5, 0, false, 0)}) {
    cases.push_back(c);
    cases.push_back(scaled(c));
  }
  check_against_python(cases, "sgd");
}

TEST_CASE("FusedSgd: a first step skipped by found_inf leaves zero buffers, then equals Python started a step later" * doctest::test_suite("extended")) {
  if (!python_available()) {
    MESSAGE("python3 with torch is not installed; skipped");
    return;
  }
  // PyTorch's own run with a skipped first step leaves its buffers as torch.empty_like memory (see fused_sgd.hpp),
  // so the oracle is Python on the sequence without that step.
  auto c = sgd_case(0.937, 0, true, 5e-4);
  c.found_inf = {1, 0, 0, 0, 0, 0, 0, 0};
  const auto in = make_inputs(c, 5);
  auto params = clone_all(in.params);
  auto opt = make(c, params);
  auto ours = run(c, in, *opt, params, 0, 1);
  for (size_t i = 0; i < params.size(); ++i) CHECK(torch::equal(ours[0][i], in.params[i]));
  for (auto& p : params)
    CHECK(torch::equal(static_cast<torch::optim::SGDParamState&>(*opt->state().at(p.unsafeGetTensorImpl())).momentum_buffer(),
                       torch::zeros_like(p)));
  for (auto& snap : run(c, in, *opt, params, 1, c.steps())) ours.push_back(std::move(snap));
  Case later = c;
  later.grad_scale.erase(later.grad_scale.begin());
  later.found_inf = std::vector<double>(c.steps() - 1, -1.0);
  Inputs in_later{in.params, {in.grads.begin() + 1, in.grads.end()}};
  auto py = python_oracle({{later, in_later}}, "sgd-later").at(0).at("params").toList();
  for (size_t t = 1; t < c.steps(); ++t)
    for (size_t i = 0; i < params.size(); ++i) CHECK(torch::equal(ours[t][i], py.get(t - 1).toList().get(i).toTensor()));
}

TEST_CASE("fused optimizers resume from saved state exactly like an uninterrupted run, and load into LibTorch's class") {
  for (auto c : {scaled(adam_case("adamw", true, 0.05)), scaled(adam_case("adam", false, 0.01)),
                 scaled(sgd_case(0.937, 0, true, 5e-4)), scaled(sgd_case(0.9, 0.1, false, 1e-2))}) {
    CAPTURE(c.kind);
    const auto in = make_inputs(c, 3);
    auto pa = clone_all(in.params);
    auto oa = make(c, pa);
    run(c, in, *oa, pa, 0, c.steps());

    auto pb = clone_all(in.params);
    auto ob = make(c, pb);
    run(c, in, *ob, pb, 0, 4);  // includes the skipped step 2
    std::stringstream saved;
    {
      torch::serialize::OutputArchive ar;
      ob->save(ar);
      ar.save_to(saved);
    }
    auto resume = [&](bool plain) {
      auto pc = clone_all(pb);
      auto oc = make(c, pc, plain);
      torch::serialize::InputArchive ar;
      std::stringstream copy(saved.str());
      ar.load_from(copy);
      oc->load(ar);
      if (c.kind != "sgd") {  // the saved step counts are the true ones: 4 calls, one of them skipped
        auto& s = *oc->state().at(pc[0].unsafeGetTensorImpl());
        CHECK((c.kind == "adamw" ? static_cast<torch::optim::AdamWParamState&>(s).step()
                                 : static_cast<torch::optim::AdamParamState&>(s).step()) == 3);
      }
      if (plain) {  // LibTorch's loop knows no grad scaling: feed it what the scaler would (unscaled, skip on inf)
        for (size_t t = 4; t < c.steps(); ++t) {
          if (c.found_inf[t] == 1) continue;
          for (size_t i = 0; i < pc.size(); ++i) pc[i].mutable_grad() = in.grads[t][i] / c.grad_scale[t];
          oc->step();
        }
      } else {
        run(c, in, *oc, pc, 4, c.steps());
      }
      return pc;
    };
    auto pc = resume(false);
    for (size_t i = 0; i < pa.size(); ++i) CHECK(torch::equal(pa[i], pc[i]));
    auto pd = resume(true);  // the same state in torch::optim's own class: the same numbers up to rounding
    for (size_t i = 0; i < pa.size(); ++i)
      CHECK(((pd[i] - pa[i]).abs().max() / pa[i].abs().max()).item<double>() < 1e-5);
  }
}

// The CPU fused kernels walk each tensor of a parameter's list as flat memory, so a gradient or a state whose
// strides differ from the parameter's (a channels-last conv weight with a contiguous gradient, as ZeRO-2 hands back;
// moments created before PerfKnobs converted the weight) paired the wrong elements: 0.26-0.29 off. The oracle is
// LibTorch's own element-wise class over contiguous tensors, which layout cannot mislead.
TEST_CASE("fused optimizers with gradients or state in another memory layout than the parameter equal torch::optim") {
  enum class Mix { ParamChannelsLast, GradChannelsLast, StateBeforeSwitch };
  const auto cl = at::MemoryFormat::ChannelsLast;
  for (auto c : {scaled(adam_case("adamw", true, 0.05)), adam_case("adamw", false, 0.05), scaled(adam_case("adam", false, 0.01)),
                 scaled(sgd_case(0.937, 0, true, 5e-4)), sgd_case(0.9, 0.1, false, 1e-2)}) {
    for (auto mix : {Mix::ParamChannelsLast, Mix::GradChannelsLast, Mix::StateBeforeSwitch}) {
      CAPTURE(c.kind);
      CAPTURE(static_cast<int>(mix));
      c.group_of = {0, 1, 0};
      torch::manual_seed(7);
      const std::vector<Tensor> init{torch::randn({6, 3, 3, 3}), torch::randn({4, 2, 5, 5}), torch::randn({5})};
      std::vector<std::vector<Tensor>> grads;  // contiguous, already scaled by the step's grad_scale
      for (size_t t = 0; t < c.steps(); ++t) {
        std::vector<Tensor> g;
        for (auto& p : init) g.push_back(torch::randn_like(p) * (c.grad_scale[t] > 0 ? c.grad_scale[t] : 1.0));
        if (c.found_inf[t] == 1) g[1].view(-1)[3] = std::numeric_limits<float>::infinity();
        grads.push_back(std::move(g));
      }
      auto fused_params = clone_all(init), plain_params = clone_all(init);
      auto layout = [&](const Tensor& t) { return t.dim() == 4 ? t.contiguous(cl) : t; };
      if (mix == Mix::ParamChannelsLast)
        for (auto& p : fused_params) p.set_data(layout(p.data()));
      auto fused = make(c, fused_params), plain = make(c, plain_params, /*plain=*/true);
      auto* scaling = dynamic_cast<pt::optim::FusedGradScaling*>(fused.get());
      REQUIRE(scaling != nullptr);
      bool any_mismatch = false;
      for (size_t t = 0; t < c.steps(); ++t) {
        CAPTURE(t);
        if (mix == Mix::StateBeforeSwitch && t == 3) {  // as PerfKnobs converts: the same TensorImpl, new strides
          torch::NoGradGuard ng;
          for (auto& p : fused_params) p.set_data(layout(p.data()));
        }
        for (size_t i = 0; i < init.size(); ++i) {
          fused_params[i].mutable_grad() = mix == Mix::GradChannelsLast ? layout(grads[t][i]).clone() : grads[t][i].clone();
          any_mismatch = any_mismatch || !fused_params[i].grad().is_contiguous() || !fused_params[i].is_contiguous();
        }
        const auto f = torch::TensorOptions().dtype(torch::kFloat);
        scaling->set_grad_scaling(c.grad_scale[t] > 0 ? torch::full({}, c.grad_scale[t], f) : Tensor{},
                                  c.found_inf[t] >= 0 ? torch::full({}, c.found_inf[t], f) : Tensor{});
        fused->step();
        // LibTorch's loop knows no grad scaling: feed it what the scaler would (unscaled, skip on inf).
        if (c.found_inf[t] != 1) {
          for (size_t i = 0; i < init.size(); ++i)
            plain_params[i].mutable_grad() = grads[t][i] / (c.grad_scale[t] > 0 ? c.grad_scale[t] : 1.0);
          plain->step();
        }
        for (size_t i = 0; i < init.size(); ++i) {
          CAPTURE(i);
          CHECK((fused_params[i] - plain_params[i]).abs().max().item<double>() < 1e-6);
          // The gradient the caller holds was unscaled in place, in its own layout, as with matching layouts.
          if (c.grad_scale[t] > 0 && c.found_inf[t] != 1)
            CHECK((fused_params[i].grad() - grads[t][i] / c.grad_scale[t]).abs().max().item<double>() < 1e-6);
        }
      }
      CHECK(any_mismatch);  // the case did mix layouts
      for (size_t i = 0; i < init.size(); ++i) CHECK_FALSE(torch::equal(fused_params[i], init[i]));  // it trained
    }
  }
}
