// Step time of stage 3 (fully sharded parameters, issue 53) against DataParallel and against PyTorch's fully_shard
// (bench/python/fsdp_step_time.py) on the same model, ranks and inputs, with ShardingOptions::prefetch on and off.
// The model is bench/python/fsdp_step_time.py's: the main job's CNN (examples/fashion_mnist/model.hpp, width 32)
// with every layer that has parameters a parallel::FullyShard unit (conv1, bn1, conv2, bn2, fc1, fc2; the root holds
// nothing), AdamW(1e-3), cross entropy, each rank's fixed batch drawn from a generator seeded by its rank (Python's
// torch.Generator().manual_seed(rank): the same tensors), the same batch every step, 1 intra-op thread per rank,
// Gloo on loopback. DataParallel runs the same module (a unit without stage 3 calls its layer). No variant
// broadcasts buffers (FSDP2 does not).
// A step's time on a rank is the time between the ends of two consecutive optimizer steps (forward, backward with
// its collectives, step: the collectives keep the ranks in step); a step's time for the job is the slower rank's;
// a run's figure is the median over its timed steps. The variants run one after the other in each round, R rounds
// (interleaved, so that a change of the machine's load falls on all of them); the table gives the median over the
// rounds of the runs' medians, with the rounds' min-max.
//   ./build-bench/bench/fsdp_step_time [--rounds 5] [--steps 30] [--warmup 5] [--ranks 2] [--batch 64]
//                                      [--python bench/python/fsdp_step_time.py] [--out FILE.md]
// Not a timed test: one run, read beside the machine's load (bench/RESULTS.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/parallel.hpp>
#include <policytrain/policytrain.hpp>

#include "fashion_mnist/model.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

/// The time of every optimizer step, from the end of the one before (the first step is timed from fit begin).
struct StepClock {
  std::vector<double> ms;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  template <class Ctx>
  void on_step_end(Ctx&) {
    const auto now = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  }
};

int worker(const std::string& variant, int64_t steps, int64_t batch, const fs::path& out) {
  torch::set_num_threads(1);
  const int64_t rank = std::getenv("RANK") ? std::stoll(std::getenv("RANK")) : 0;
  torch::manual_seed(0);
  fmnist::Classifier task(32, false, 0, fmnist::BlockOrder::conv_bn_relu_pool, 0, /*units=*/true);
  auto g = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(rank));
  const auto x = torch::randn({batch, 1, 28, 28}, g);
  const auto y = torch::randint(0, 10, {batch}, g);
  // The same batch every step, as the Python side.
  pt::data::TensorLoader loader(x.repeat({steps, 1, 1, 1}), y.repeat({steps}), {.batch_size = batch, .shuffle = false});
  torch::optim::AdamW opt(task.module().parameters(), torch::optim::AdamWOptions(1e-3));
  const pt::parallel::DataParallelOptions dpo{.timeout = std::chrono::seconds(300), .broadcast_buffers = false};
  std::vector<double> ms;
  auto run = [&](auto parallel) {
    pt::Trainer trainer(task, opt, std::move(parallel), StepClock{});
    trainer.fit(loader, {.epochs = 1});
    ms = trainer.template get<StepClock>().ms;
  };
  if (variant == "dp") run(pt::parallel::DataParallel(dpo));
  else run(pt::parallel::ShardedDataParallel(dpo, {.stage = 3, .prefetch = variant == "z3-prefetch"}));
  std::ofstream(out / fmt::format("rank{}.json", rank)) << nlohmann::json(ms).dump();
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  return fallback;
}

/// The Python side's median step time (ms), parsed from its Markdown row; < 0 when it failed.
double run_python(const std::string& script, int ranks, int64_t batch, int64_t steps, int64_t warmup, bool reshard) {
  const std::string cmd = fmt::format("OMP_NUM_THREADS=1 python3 {} --ranks {} --batch {} --steps {} --warmup {} "
                                      "--reshard-after-forward {} 2>&1", script, ranks, batch, steps, warmup, reshard ? 1 : 0);
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string text;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  if (::pclose(p) != 0) {
    std::fprintf(stderr, "fsdp_step_time: %s failed:\n%s\n", cmd.c_str(), text.c_str());
    return -1;
  }
  // "| Python fully_shard (...) | 2 | 64 | 604.98 (222.14-1286.17) | 106 |": the fourth cell's first number (after
  // the fourth bar).
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| Python", 0) != 0) continue;
    size_t pos = 0;
    for (int bar = 1; bar < 4; ++bar) pos = line.find('|', pos + 1);
    return std::stod(line.substr(pos + 1));
  }
  std::fprintf(stderr, "fsdp_step_time: no result row in:\n%s\n", text.c_str());
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t steps = std::stoll(arg(argc, argv, "--steps", "30")), warmup = std::stoll(arg(argc, argv, "--warmup", "5"));
  const int64_t batch = std::stoll(arg(argc, argv, "--batch", "64"));
  if (const char* w = std::getenv("FSDP_STEP_WORKER")) return worker(w, warmup + steps, batch, std::getenv("FSDP_STEP_DIR"));
  const int rounds = std::stoi(arg(argc, argv, "--rounds", "5")), ranks = std::stoi(arg(argc, argv, "--ranks", "2"));
  const std::string python = arg(argc, argv, "--python", "bench/python/fsdp_step_time.py");
  const std::string out_file = arg(argc, argv, "--out", "");
  const fs::path dir = fs::temp_directory_path() / fmt::format("fsdp-step-time-{}", ::getpid());
  const std::vector<std::string> variants = {"dp", "z3-prefetch", "z3-no-prefetch", "python"};
  std::map<std::string, std::vector<double>> medians;
  for (int round = 0; round < rounds; ++round)
    for (const auto& v : variants) {
      if (v == "python") {
        const double ms = run_python(python, ranks, batch, steps, warmup, true);
        if (ms < 0) return 1;
        medians[v].push_back(ms);
        continue;
      }
      const fs::path d = dir / fmt::format("{}-{}", v, round);
      fs::create_directories(d);
      const int rc = pt::parallel::launch_local({.nproc = ranks, .program = "/proc/self/exe",
                                                 .args = {"fsdp_step_time", "--steps", std::to_string(steps), "--warmup", std::to_string(warmup),
                                                          "--batch", std::to_string(batch)},
                                                 .env = {{"FSDP_STEP_WORKER", v}, {"FSDP_STEP_DIR", d.string()}, {"OMP_NUM_THREADS", "1"}},
                                                 .deadline = std::chrono::seconds(600)});
      if (rc != 0) {
        std::fprintf(stderr, "fsdp_step_time: %s on %d ranks failed (exit code %d)\n", v.c_str(), ranks, rc);
        return 1;
      }
      std::vector<double> slower;  // each step's time on the slower rank
      for (int r = 0; r < ranks; ++r) {
        const auto ms = nlohmann::json::parse(std::ifstream(d / fmt::format("rank{}.json", r))).get<std::vector<double>>();
        for (size_t i = static_cast<size_t>(warmup); i < ms.size(); ++i) {
          const size_t k = i - static_cast<size_t>(warmup);
          if (slower.size() <= k) slower.push_back(ms[i]);
          else slower[k] = std::max(slower[k], ms[i]);
        }
      }
      medians[v].push_back(median(slower));
      std::fprintf(stderr, "round %d: %s %.2f ms\n", round, v.c_str(), medians[v].back());
    }
  fs::remove_all(dir);
  const std::map<std::string, std::string> names = {
      {"dp", "DataParallel (policytrain)"},
      {"z3-prefetch", "stage 3, prefetch on (policytrain)"},
      {"z3-no-prefetch", "stage 3, prefetch off (policytrain)"},
      {"python", "Python fully_shard (reshard_after_forward=True)"}};
  const double py = median(medians["python"]);
  std::string table = fmt::format("| what | ranks | batch per rank | step ms, median of {} rounds (min-max) | vs Python fully_shard |\n"
                                  "|---|---|---|---|---|\n", rounds);
  for (const auto& v : variants) {
    const auto& m = medians[v];
    table += fmt::format("| {} | {} | {} | {:.2f} ({:.2f}-{:.2f}) | {:.2f}x |\n", names.at(v), ranks, batch, median(m),
                         *std::min_element(m.begin(), m.end()), *std::max_element(m.begin(), m.end()), median(m) / py);
  }
  std::fputs(table.c_str(), stdout);
  if (!out_file.empty()) std::ofstream(out_file) << table;
  return 0;
}
