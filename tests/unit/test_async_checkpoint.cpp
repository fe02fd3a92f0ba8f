// Asynchronous checkpoints (issue 13): the state is serialized at the step and written by a background thread
// with the same atomic protocol. Killed with SIGKILL at random moments while writing, a run resumes from a valid
// file and ends bit-identical to an uninterrupted run; a file size limit hit by a background write is a clear
// error and leaves the previous checkpoint valid.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include <policytrain/checkpoint/disk.hpp>

#include "unit/helpers.hpp"

namespace pt = policytrain;
namespace ck = policytrain::checkpoint;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// A run of 4 epochs of 6 steps on the toy data (shuffled), checkpointing every step and at every epoch end.
/// Returns the final parameters' SHA-256.
std::string train(const fs::path& dir, bool async, std::string resume = "", int64_t* files = nullptr) {
  auto [x, y] = testing::toy_data(96);
  pt::data::TensorLoader loader(x, y, {.batch_size = 16, .shuffle = true, .seed = 3});
  testing::MlpTask task(1, 8, 64, 3);
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
  pt::Trainer<testing::MlpTask, ck::Disk> t(
      task, opt, ck::Disk({.directory = dir, .every_steps = 1, .keep = 3, .resume = std::move(resume), .async = async,
                           .export_final = false, .log = nullptr}));
  t.fit(loader, {.epochs = 4});
  if (files) *files = t.get<ck::Disk>().files_written();
  return pt::io::params_sha256(task.module());
}

}  // namespace

TEST_CASE("asynchronous checkpoints hold exactly what synchronous ones hold") {
  const auto sync_dir = testing::temp_dir("async-eq-sync"), async_dir = testing::temp_dir("async-eq-async");
  int64_t n_sync = 0, n_async = 0;
  const std::string a = train(sync_dir, false, "", &n_sync);
  const std::string b = train(async_dir, true, "", &n_async);
  CHECK(a == b);  // checkpointing does not change training
  CHECK(n_sync == n_async);
  CHECK(n_async == 24 + 4);  // a step file per step, last.ckpt per epoch
  // The same content (not the same bytes: LibTorch's zip writer stamps each archive with a serialization id).
  for (const auto* name : {"last.ckpt", "step-00000024.ckpt", "step-00000022.ckpt"}) {
    CAPTURE(name);
    const auto fa = ck::read_file(sync_dir / name), fb = ck::read_file(async_dir / name);
    CHECK(fa.meta["global_step"] == fb.meta["global_step"]);
    CHECK(fa.meta["batch_in_epoch"] == fb.meta["batch_in_epoch"]);
    testing::MlpTask ma(7, 8, 64, 3), mb(8, 8, 64, 3);
    ck::load_weights(ma.module(), sync_dir / name);
    ck::load_weights(mb.module(), async_dir / name);
    CHECK(pt::io::params_sha256(ma.module()) == pt::io::params_sha256(mb.module()));
  }
  CHECK(!fs::exists(async_dir / "step-00000021.ckpt"));  // keep = 3: rotation ran after the writes
  fs::remove_all(sync_dir);
  fs::remove_all(async_dir);
}

TEST_CASE("killed with SIGKILL at random moments during asynchronous writes, 20 times: resume ends bit-identical") {
  const auto ref_dir = testing::temp_dir("async-kill-ref"), dir = testing::temp_dir("async-kill");
  const std::string reference = train(ref_dir, true);
  // How long an uninterrupted run takes here, to spread the kills over it.
  const auto timing_dir = testing::temp_dir("async-kill-timing");
  const auto t0 = std::chrono::steady_clock::now();
  train(timing_dir, true);
  const double run_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937 rng(12345);
  int killed_mid_run = 0;
  for (int i = 0; i < 20; ++i) {
    CAPTURE(i);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        train(dir, true, "auto");
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    // Each run resumes from the last one's files: kill it somewhere in the first 60% of a whole run's time.
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(std::uniform_real_distribution<>(0.05, 0.6)(rng) * run_us)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
      ++killed_mid_run;
    } else {  // it finished before the kill: start over, so that the next kills land in the middle of a run
      REQUIRE(WEXITSTATUS(status) == 0);
      fs::remove_all(dir);
      fs::create_directories(dir);
    }
    // Every checkpoint file left is complete and valid (only temporary files may be partial; run.lock is the
    // killed job's lock on the directory, which the next one takes over).
    for (const auto& e : fs::directory_iterator(dir)) {
      const auto name = e.path().filename().string();
      if (name.starts_with(".") || name == "run.lock") continue;
      CHECK_NOTHROW(ck::read_file(e.path()));
    }
  }
  CHECK(killed_mid_run >= 10);  // most runs were really interrupted
  // The last resume runs to the end.
  const std::string resumed = train(dir, true, "auto");
  CHECK(resumed == reference);
  fs::remove_all(ref_dir);
  fs::remove_all(timing_dir);
  fs::remove_all(dir);
}

TEST_CASE("a file size limit hit by a background write: a clear error at the next save, the previous file intact") {
  const auto dir = testing::temp_dir("async-fsize");
  train(dir, false);
  const std::string previous = slurp(dir / "last.ckpt");
  REQUIRE(previous.size() > 2000);
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // else the kernel kills the writer instead of failing the write
    const rlimit lim{1000, 1000};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    int code = 3;
    try {
      auto [x, y] = testing::toy_data(96);
      pt::data::TensorLoader loader(x, y, {.batch_size = 16, .shuffle = true, .seed = 3});
      testing::MlpTask task(1, 8, 64, 3);
      torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(0.01));
      pt::Trainer<testing::MlpTask, ck::Disk> t(
          task, opt, ck::Disk({.directory = dir, .resume = "auto", .async = true, .export_final = false, .log = nullptr}));
      // Continues the run (a fresh run would first move its files to previous-<run id>/), and writes last.ckpt at
      // the end of epoch 5: fails.
      t.fit(loader, {.epochs = 6});
      code = 1;
    } catch (const ck::CheckpointError& e) {
      const std::string msg = e.what();
      code = msg.find("last.ckpt") != std::string::npos && msg.find("File too large") != std::string::npos ? 0 : 2;
      if (code) std::fprintf(stderr, "%s\n", msg.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      code = 4;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(slurp(dir / "last.ckpt") == previous);
  CHECK_NOTHROW(ck::read_file(dir / "last.ckpt"));
  for (const auto& e : fs::directory_iterator(dir))
    CHECK_MESSAGE(e.path().filename().string().find(".tmp-") == std::string::npos, e.path());
  fs::remove_all(dir);
}
