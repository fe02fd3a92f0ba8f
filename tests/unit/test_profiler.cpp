// callbacks::Profiler on PyTorch's Kineto profiler. Oracles: Python's torch.profiler.schedule (the schedule),
// Python's json reading the trace Kineto wrote, and Python's torch.profiler on the same model and steps (the
// top operators of the key-averages table).
#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include <policytrain/callbacks/profiler.hpp>

namespace pt = policytrain;
namespace pd = policytrain::data;
using Prof = pt::callbacks::Profiler;

namespace {

int run_python(const std::string& script, const std::string& args) {
  const std::string cmd = "python3 " POLICYTRAIN_SOURCE_DIR "/tests/integration/" + script + " " + args;
  return std::system(cmd.c_str());
}

// The CNN of tests/integration/check_profiler.py, layer for layer.
struct CnnImpl : torch::nn::Module {
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::Linear fc{nullptr};
  CnnImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
    fc = register_module("fc", torch::nn::Linear(32 * 7 * 7, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    return fc(x.flatten(1));
  }
};
TORCH_MODULE(Cnn);

struct CnnTask {
  Cnn net;
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
};

}  // namespace

TEST_CASE("Profiler's schedule is torch.profiler.schedule's") {
  std::ostringstream cases;
  cases << "[";
  const std::vector<std::array<int64_t, 4>> schedules{{1, 1, 3, 1}, {0, 0, 1, 0}, {2, 0, 2, 2}, {0, 2, 1, 3}, {3, 1, 2, 0}};
  for (auto [w, u, a, r] : schedules) {
    Prof p({.dir = "unused", .wait = w, .warmup = u, .active = a, .repeat = r});
    std::vector<int> acts;
    for (int64_t s = 0; s < 40; ++s) acts.push_back(static_cast<int>(p.action(s)));
    cases << nlohmann::json{{"wait", w}, {"warmup", u}, {"active", a}, {"repeat", r}, {"actions", acts}}.dump() << ",";
  }
  std::string js = cases.str();
  js.back() = ']';
  auto dir = testing::temp_dir("profiler-schedule");
  std::ofstream(dir / "schedule.json") << js;
  CHECK(run_python("check_profiler.py", "schedule " + (dir / "schedule.json").string()) == 0);
}

TEST_CASE("Profiler's Kineto trace holds aten operators with shapes, memory events and our phases") {
  auto dir = testing::temp_dir("profiler-kineto");
  auto [x, y] = testing::toy_data(320);
  pd::TensorLoader loader(x, y, {.batch_size = 16, .seed = 1});
  testing::MlpTask task(1);
  torch::optim::SGD opt(task.module().parameters(), 0.1);
  pt::Trainer<testing::MlpTask, Prof> t(
      task, opt, Prof({.dir = dir, .wait = 2, .warmup = 1, .active = 3, .repeat = 2, .out = nullptr}));
  t.fit(loader, {.epochs = 1});
  // Cycle 0 records steps 4-6, cycle 1 steps 10-12.
  CHECK(run_python("check_profiler.py", "trace " + (dir / "trace.json").string() + " 4 6") == 0);
  CHECK(run_python("check_profiler.py", "trace " + (dir / "trace_cycle1.json").string() + " 10 12") == 0);
  CHECK_FALSE(std::filesystem::exists(dir / "trace_cycle2.json"));
  const auto ka = t.get<Prof>().key_averages();
  REQUIRE(!ka.empty());
  CHECK(t.get<Prof>().key_averages_json().at("recorded_steps") == 6);
  std::ifstream table(dir / "key_averages.txt");
  std::string text((std::istreambuf_iterator<char>(table)), std::istreambuf_iterator<char>());
  CHECK(text.find("aten::addmm") != std::string::npos);
  CHECK(text.find("Recorded steps: data") != std::string::npos);
}

TEST_CASE("Profiler's key averages count the model's operators as Python torch.profiler does on the same model and steps, and hold its heaviest") {
  auto dir = testing::temp_dir("profiler-reference");
  torch::manual_seed(0);
  auto x = torch::randn({8 * 32, 1, 28, 28});
  auto y = torch::randint(0, 10, {8 * 32});
  pd::TensorLoader loader(x, y, {.batch_size = 32, .shuffle = false});
  CnnTask task{Cnn()};
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  pt::Trainer<CnnTask, Prof> t(task, opt, Prof({.dir = dir, .wait = 1, .warmup = 2, .active = 5, .out = nullptr}));
  t.fit(loader, {.epochs = 1});
  CHECK(run_python("check_profiler.py", "reference " + (dir / "key_averages.json").string()) == 0);
}
