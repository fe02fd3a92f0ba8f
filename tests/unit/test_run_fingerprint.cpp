// The run fingerprint (issue 13): a checkpoint records the model's architecture digest, the optimizer's kind,
// the world size, the batch size and the data size; resume refuses another run's file and says what differs,
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
  CHECK(f["optimizer"] == "torch::optim::SGD");
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
