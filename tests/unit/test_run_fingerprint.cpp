// The run fingerprint (issues 13, 29): a checkpoint records the model's architecture digest, the optimizer's family
// and hyper-parameters, the world size, the batch size and the data size; resume refuses another run's file and says what differs,
// auto-resume never picks another run's file, and weights-only resume takes the weights of any compatible model.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>

#include <policytrain/checkpoint/disk.hpp>

#include "unit/fixtures.hpp"
#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace ck = policytrain::checkpoint;
namespace fs = std::filesystem;

namespace {

using testing::read_all;

struct Run {
  testing::MlpTask task;
  torch::optim::SGD opt;
  pt::Trainer<testing::MlpTask, ck::Disk> trainer;
  int64_t n;
  Run(const fs::path& dir, ck::RunInfo info, int64_t n_samples, std::string resume = "", bool weights_only = false,
      std::FILE* log = nullptr, uint64_t seed = 1, int64_t hidden = 16)
      : task(seed, 8, hidden, 3),
        opt(task.module().parameters(), torch::optim::SGDOptions(0.05).momentum(0.9)),
        trainer(task, opt, ck::Disk({.directory = dir, .every_steps = 2, .resume = std::move(resume), .run = info,
                                     .weights_only = weights_only, .export_final = false, .log = log})),
        n(n_samples) {}
  void fit(int64_t epochs = 1) {
    auto [x, y] = testing::toy_data(n);
    pt::data::TensorLoader loader(x, y, {.batch_size = 16});
    trainer.fit(loader, {.epochs = epochs});
  }
};

}  // namespace

TEST_CASE("every checkpoint records the run fingerprint") {
  const auto dir = testing::temp_dir("fp-record");
  Run r(dir, {.batch_size = 16, .data_size = 48}, 48);
  r.fit();
  const auto f = ck::read_meta(dir / "last.ckpt")["fingerprint"];
  CHECK(f["optimizer"]["family"] == "sgd");
  CHECK(f["world_size"] == 1);  // no parallel policy
  CHECK(f["batch_size"] == 16);
  CHECK(f["data_size"] == 48);
  CHECK(f["model_tensors"] == 4);                          // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  CHECK(f["model_elements"] == 8 * 16 + 16 + 16 * 3 + 3);  // hand-counted
  CHECK(f["model"].get<std::string>().size() == 64);       // hex SHA-256
  // The digest depends on the architecture, not on the values.
  testing::MlpTask other_seed(9), wider(1, 8, 32, 3);
  CHECK(ck::detail::architecture_digest(other_seed.module()) == f["model"].get<std::string>());
  CHECK(ck::detail::architecture_digest(wider.module()) != f["model"].get<std::string>());
  fs::remove_all(dir);
}

TEST_CASE("resume refuses a checkpoint of a run with another batch size, saying what differs") {
  const auto dir = testing::temp_dir("fp-batch");
  Run(dir, {.batch_size = 16, .data_size = 48}, 48).fit();
  std::FILE* log = std::tmpfile();
  Run again(dir, {.batch_size = 8, .data_size = 48}, 48, "auto", false, log);
  try {
    again.fit();
    FAIL("resumed another run's checkpoint");
  } catch (const ck::CheckpointError& e) {
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find("batch size: 16 in the checkpoint, 8 in this run") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("weights only") != std::string::npos, msg);
  }
  CHECK(again.trainer.state().global_step == 0);
  std::fclose(log);
  // A named file: the same refusal, with the world size.
  Run ranks(dir, {.world_size = 2, .batch_size = 16, .data_size = 48}, 48, (dir / "last.ckpt").string());
  CHECK_THROWS_WITH_AS(ranks.fit(), doctest::Contains("world size: 1 in the checkpoint, 2 in this run"), ck::CheckpointError);
  fs::remove_all(dir);
}

TEST_CASE("auto-resume never picks another run's newer file from the same directory") {
  const auto dir = testing::temp_dir("fp-other");
  Run own(dir, {.batch_size = 16, .data_size = 48}, 48);
  own.fit();  // 3 steps: step-00000002.ckpt, last.ckpt at step 3
  const std::string own_sha = pt::io::params_sha256(own.task.module());
  // Another run (twice the data, same model and optimizer) whose newer file lands in the same directory.
  Run other(dir / "other", {.batch_size = 16, .data_size = 96}, 96, "", false, nullptr, /*seed=*/5);
  other.fit();  // 6 steps
  fs::copy_file(dir / "other" / "step-00000006.ckpt", dir / "step-00000006.ckpt");
  fs::remove_all(dir / "other");
  std::FILE* log = std::tmpfile();
  Run resumed(dir, {.batch_size = 16, .data_size = 48}, 48, "auto", false, log, /*seed=*/3);
  resumed.fit();  // at the end of epoch 1 already: nothing left to train
  const std::string text = read_all(log);
  std::fclose(log);
  CHECK(resumed.trainer.get<ck::Disk>().resumed_from() == dir / "last.ckpt");
  CHECK(resumed.trainer.state().global_step == 3);
  CHECK(pt::io::params_sha256(resumed.task.module()) == own_sha);
  CHECK_MESSAGE(text.find("step-00000006.ckpt: belongs to another run: data size: 96 in the checkpoint, 48 in this run") !=
                    std::string::npos, text);
  fs::remove_all(dir);
}

TEST_CASE("weights-only resume takes another run's weights and starts a new run at step 0") {
  const auto dir = testing::temp_dir("fp-weights");
  Run src(dir, {.batch_size = 16, .data_size = 96}, 96);
  src.fit();
  const std::string src_sha = pt::io::params_sha256(src.task.module());
  std::FILE* log = std::tmpfile();
  Run dst(dir, {.batch_size = 16, .data_size = 48}, 48, (dir / "last.ckpt").string(), /*weights_only=*/true, log, 7);
  // Checked before training: the weights are loaded at fit begin; limit the fit to no batch.
  auto [x, y] = testing::toy_data(48);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16});
  dst.trainer.fit(loader, {.epochs = 1, .limit_train_batches = 0});
  CHECK(pt::io::params_sha256(dst.task.module()) == src_sha);
  CHECK(dst.trainer.state().global_step == 0);
  CHECK(dst.opt.state().empty());  // the optimizer starts fresh: no momentum buffers were loaded
  const std::string text = read_all(log);
  std::fclose(log);
  CHECK_MESSAGE(text.find("loaded the weights of") != std::string::npos, text);
  // Weights only still needs the same architecture.
  Run wider(dir, {}, 48, (dir / "last.ckpt").string(), true, nullptr, 1, /*hidden=*/32);
  CHECK_THROWS_WITH_AS(wider.fit(), doctest::Contains("another model"), ck::CheckpointError);
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint without a fingerprint (an older file) still resumes, and the log says it was not compared") {
  const auto dir = testing::temp_dir("fp-old");
  Run(dir, {.batch_size = 16, .data_size = 48}, 48).fit();
  auto raw = ck::read_file(dir / "last.ckpt");
  raw.meta.erase("fingerprint");
  ck::write_file(dir / "last.ckpt", raw.meta, raw.payload());
  std::FILE* log = std::tmpfile();
  Run again(dir, {.batch_size = 8, .data_size = 48}, 48, "auto", false, log);
  CHECK_NOTHROW(again.fit());
  CHECK(again.trainer.state().global_step == 3);
  const std::string text = read_all(log);
  std::fclose(log);
  CHECK_MESSAGE(text.find("records no run fingerprint") != std::string::npos, text);
  fs::remove_all(dir);
}

// --- The fused optimizers are drop-in, checkpoints included: a run resumes with its optimizer's fused twin (or
// back), and continues exactly; another family or other hyper-parameters is another run. ---
namespace {

/// Every parameter, then every state tensor of every parameter (moments, momentum buffers, step counts), in the
/// optimizer's parameter order, flattened into one double tensor.
torch::Tensor params_and_state(torch::nn::Module& m, torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.detach().flatten().to(torch::kDouble));
  for (auto& g : opt.param_groups())
    for (auto& p : g.params()) {
      auto it = opt.state().find(p.unsafeGetTensorImpl());
      REQUIRE(it != opt.state().end());
      const auto& s = *it->second;
      auto add = [&](const torch::Tensor& t) { out.push_back(t.defined() ? t.flatten().to(torch::kDouble) : torch::zeros({1}, torch::kDouble)); };
      auto step = [&](int64_t n) { out.push_back(torch::full({1}, static_cast<double>(n), torch::kDouble)); };
      if (auto* a = dynamic_cast<const torch::optim::AdamWParamState*>(&s)) {
        add(a->exp_avg()), add(a->exp_avg_sq()), add(a->max_exp_avg_sq()), step(a->step());
      } else if (auto* b = dynamic_cast<const torch::optim::AdamParamState*>(&s)) {
        add(b->exp_avg()), add(b->exp_avg_sq()), add(b->max_exp_avg_sq()), step(b->step());
      } else if (auto* c = dynamic_cast<const torch::optim::SGDParamState*>(&s)) {
        add(c->momentum_buffer());
      } else {
        FAIL("an optimizer state of an unexpected type");
      }
    }
  return torch::cat(out);
}

/// Trains `steps` steps of 10 batches of 8 (one epoch) with optimizer `Opt` built from `options`, from a fresh
/// model (seed 1): from scratch, or resumed from the newest file of `dir`; checkpoint::Disk writes a file every 5
/// steps into `dir` (when not empty). Returns the parameters and the optimizer state.
template <class Opt, class Options>
torch::Tensor train_swap(const Options& options, int64_t steps, const fs::path& dir, bool resume) {
  testing::MlpTask task(1);
  Opt opt(task.module().parameters(), options);
  pt::Trainer<testing::MlpTask, ck::Disk> t(
      task, opt, ck::Disk({.directory = dir, .last = false, .every_steps = 5, .resume = resume ? "auto" : "",
                           .export_final = false, .log = nullptr}));
  auto [x, y] = testing::toy_data(80);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  t.fit(loader, {.epochs = 1, .max_steps = steps});
  if (resume) CHECK(t.get<ck::Disk>().resumed_from() == dir / "step-00000005.ckpt");
  CHECK(t.state().global_step == steps);
  return params_and_state(task.module(), opt);
}

/// 5 steps with `A`, a checkpoint, 5 more with `B` resumed from it: the same parameters and optimizer state as 10
/// steps with `A`, within 1e-7.
template <class A, class B, class Options>
void check_swap(const Options& options, const char* what) {
  INFO(std::string(what));
  const auto dir = testing::temp_dir("fp-swap");
  const torch::Tensor ten = train_swap<A>(options, 10, "", false);
  (void)train_swap<A>(options, 5, dir, false);
  REQUIRE(fs::exists(dir / "step-00000005.ckpt"));
  const torch::Tensor swapped = train_swap<B>(options, 10, dir, true);
  REQUIRE(swapped.sizes() == ten.sizes());
  const double diff = (swapped - ten).abs().max().item<double>();
  INFO("max |10 steps - (5 + 5 swapped)| = " << diff);
  CHECK(diff <= 1e-7);
  fs::remove_all(dir);
}

}  // namespace

TEST_CASE("a run resumes with its optimizer's fused twin and back (AdamW, Adam, SGD with momentum): 5 + 5 steps "
          "equal 10 steps with the first within 1e-7, parameters and optimizer state") {
  namespace opt = torch::optim;
  const auto adamw = opt::AdamWOptions(0.01).weight_decay(0.05);
  const auto adam = opt::AdamOptions(0.01).weight_decay(0.01);
  const auto sgd = opt::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(1e-3);
  check_swap<opt::AdamW, pt::optim::FusedAdamW>(adamw, "AdamW -> FusedAdamW");
  check_swap<pt::optim::FusedAdamW, opt::AdamW>(adamw, "FusedAdamW -> AdamW");
  check_swap<opt::Adam, pt::optim::FusedAdam>(adam, "Adam -> FusedAdam");
  check_swap<pt::optim::FusedAdam, opt::Adam>(adam, "FusedAdam -> Adam");
  check_swap<opt::SGD, pt::optim::FusedSgd>(sgd, "SGD -> FusedSgd");
  check_swap<pt::optim::FusedSgd, opt::SGD>(sgd, "FusedSgd -> SGD");
}

TEST_CASE("the optimizer in the run fingerprint is its family and its groups' hyper-parameters: another family, "
          "other hyper-parameters or other groups are another run's, and the lr is not compared") {
  namespace opt = torch::optim;
  const auto dir = testing::temp_dir("fp-hyper");
  (void)train_swap<opt::AdamW>(opt::AdamWOptions(0.01).weight_decay(0.05), 5, dir, false);
  const auto f = ck::read_meta(dir / "step-00000005.ckpt")["fingerprint"]["optimizer"];
  CHECK(f["family"] == "adamw");
  REQUIRE(f["param_groups"].size() == 1);
  CHECK(f["param_groups"][0]["params"] == 4);
  CHECK(f["param_groups"][0]["weight_decay"] == 0.05);
  CHECK(!f["param_groups"][0].contains("lr"));
  const auto refused = [&](auto make_and_fit, const std::string& expected) {
    const std::string msg = [&] {
      try {
        make_and_fit();
      } catch (const ck::CheckpointError& e) {
        return std::string(e.what());
      }
      return std::string("(resumed)");
    }();
    CHECK_MESSAGE(msg.find(expected) != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("belongs to another run") != std::string::npos, msg);
  };
  const auto resume_with = [&](auto* tag, const auto& options) {
    return [&dir, options, tag] {
      using Opt = std::remove_pointer_t<decltype(tag)>;
      testing::MlpTask task(1);
      Opt o(task.module().parameters(), options);
      pt::Trainer<testing::MlpTask, ck::Disk> t(
          task, o, ck::Disk({.directory = dir, .resume = (dir / "step-00000005.ckpt").string(), .export_final = false,
                             .log = nullptr}));
      auto [x, y] = testing::toy_data(80);
      pt::data::TensorLoader loader(x, y, {.batch_size = 8});
      t.fit(loader, {.epochs = 1, .limit_train_batches = 0});
    };
  };
  refused(resume_with((pt::optim::FusedAdamW*)nullptr, opt::AdamWOptions(0.01).weight_decay(0.1)),
          "optimizer parameter group 0 weight_decay: 0.05 in the checkpoint, 0.1 in this run");
  refused(resume_with((opt::AdamW*)nullptr, opt::AdamWOptions(0.01).weight_decay(0.05).betas({0.8, 0.999})),
          "optimizer parameter group 0 betas: [0.9,0.999] in the checkpoint, [0.8,0.999] in this run");
  refused(resume_with((pt::optim::FusedAdam*)nullptr, opt::AdamOptions(0.01).weight_decay(0.05)),
          "optimizer: adamw in the checkpoint, adam in this run");
  // The lr is the schedule's (restored from the checkpoint with the optimizer's groups): another initial lr resumes.
  CHECK_NOTHROW(resume_with((pt::optim::FusedAdamW*)nullptr, opt::AdamWOptions(0.02).weight_decay(0.05))());
  // SGD with momentum vs without.
  (void)train_swap<opt::SGD>(opt::SGDOptions(0.05).momentum(0.9), 5, dir / "sgd", false);
  testing::MlpTask task(1);
  pt::optim::FusedSgd plain(task.module().parameters(), opt::SGDOptions(0.05));
  pt::Trainer<testing::MlpTask, ck::Disk> t(task, plain, ck::Disk({.directory = dir / "sgd", .resume = "auto",
                                                                    .export_final = false, .log = nullptr}));
  auto [x, y] = testing::toy_data(80);
  pt::data::TensorLoader loader(x, y, {.batch_size = 8});
  CHECK_THROWS_WITH_AS(t.fit(loader, {.epochs = 1, .limit_train_batches = 0}),
                       doctest::Contains("optimizer parameter group 0 momentum: 0.9 in the checkpoint, 0.0 in this run"),
                       ck::CheckpointError);
  fs::remove_all(dir);
}

// Issue 37, point 10: the fingerprint was frozen at the first fit, so a checkpoint written after add_param_group
// recorded one group while its optimizer state held two: a resume with the optimizer built as it was then was refused
// as "another run" (use weights only), and one built with a single group by the payload check ("build the optimizer
// as the run did"). Now the fingerprint's groups are re-read at each fit's begin, and both refusals say the same.
TEST_CASE("a checkpoint written after add_param_group resumes with the optimizer built as it was then") {
  const auto dir = testing::temp_dir("fp-add-group");
  auto [x, y] = testing::toy_data(48);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16});
  auto sgd = [](double lr) { return std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(lr).momentum(0.9)); };
  auto build = [&](testing::MlpTask& t, bool both) {  // fc1 only (the first fit's optimizer), or fc1 and fc2
    auto opt = std::make_unique<torch::optim::SGD>(std::vector<torch::optim::OptimizerParamGroup>{}, torch::optim::SGDOptions(0.05).momentum(0.9));
    opt->add_param_group(torch::optim::OptimizerParamGroup(t.net->fc1->parameters(), sgd(0.05)));
    if (both) opt->add_param_group(torch::optim::OptimizerParamGroup(t.net->fc2->parameters(), sgd(0.02)));
    return opt;
  };
  std::vector<torch::Tensor> written;
  int64_t written_step = 0;
  {
    testing::MlpTask task(1);
    auto opt = build(task, false);
    pt::Trainer<testing::MlpTask, ck::Disk> t(task, *opt, ck::Disk({.directory = dir, .every_steps = 2, .export_final = false, .log = nullptr}));
    t.fit(loader, {.epochs = 1});
    opt->add_param_group(torch::optim::OptimizerParamGroup(task.net->fc2->parameters(), sgd(0.02)));
    t.fit(loader, {.epochs = 2});  // steps 4..6: last.ckpt holds both groups' momentum
    REQUIRE(t.state().global_step == 6);
    REQUIRE(ck::read_meta(dir / "last.ckpt")["global_step"] == 6);
    CHECK(ck::read_meta(dir / "last.ckpt")["fingerprint"]["optimizer"]["param_groups"].size() == 2);
    CHECK(ck::read_meta(dir / "step-00000002.ckpt")["fingerprint"]["optimizer"]["param_groups"].size() == 1);
    for (auto& p : task.module().parameters()) written.push_back(p.detach().clone());
    written_step = t.state().global_step;
  }
  SUBCASE("built with both groups: it resumes, the weights and the step are the file's") {
    testing::MlpTask task(42);  // other weights: everything must come from the file
    auto opt = build(task, true);
    pt::Trainer<testing::MlpTask, ck::Disk> t(task, *opt, ck::Disk({.directory = dir, .resume = "auto", .export_final = false, .log = nullptr}));
    t.fit(loader, {.epochs = 2});  // nothing left to train: the resume alone
    CHECK(t.get<ck::Disk>().resumed_from() == dir / "last.ckpt");
    CHECK(t.state().global_step == written_step);
    auto now = task.module().parameters();
    for (size_t i = 0; i < now.size(); ++i) CHECK(torch::equal(now[i], written[i]));
    CHECK(opt->state().size() == 4);  // both groups' momentum buffers
  }
  SUBCASE("built with the first group only: refused, and the advice is to build it with the file's two groups") {
    testing::MlpTask task(42);
    auto opt = build(task, false);
    pt::Trainer<testing::MlpTask, ck::Disk> t(task, *opt, ck::Disk({.directory = dir, .resume = (dir / "last.ckpt").string(),
                                                                    .export_final = false, .log = nullptr}));
    CHECK_THROWS_WITH_AS(t.fit(loader, {.epochs = 2}),
                         doctest::Contains("to continue that run, build the optimizer with the 2 group(s) it had when it "
                                           "wrote the checkpoint, add_param_group included"),
                         ck::CheckpointError);
  }
  fs::remove_all(dir);
}
