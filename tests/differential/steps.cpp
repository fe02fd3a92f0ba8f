// The policytrain side of the differential tests of training by steps, one subcommand each:
//   val-check-interval DIR (tests/differential/val_check_interval.py): a run by steps of a linear classifier (SGD) on
//     the data and initial weights the driver wrote in DIR, validated every N steps, with checkpoint::Disk's best.ckpt
//     and, when asked, EarlyStopping; prints what it did as JSON (the steps validated, their losses, the steps
//     trained, the step of best.ckpt), for the driver to compare with Lightning's Trainer(val_check_interval=N,
//     check_val_every_n_epoch=None).
//   token-stream FILE TYPE SEED BLOCK BATCH WORLD EPOCHS BATCHES (tests/differential/token_stream.py): the batches
//     data::TokenStream draws from a token file, for every epoch, batch index and rank, as JSON rows
//     [epoch, index, rank, x, y].
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/all.hpp>
#include <policytrain/data/token_stream.hpp>

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

torch::Tensor read_bin(const fs::path& file, torch::ScalarType type, std::vector<int64_t> shape) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto t = torch::empty(shape, type);
  if (static_cast<size_t>(t.nbytes()) != bytes.size()) throw std::runtime_error("size mismatch in " + file.string());
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

struct Linear {
  torch::nn::Linear lin{nullptr};
  torch::nn::Module& module() { return *lin; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(lin->forward(b.x), b.y); }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = lin->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
  std::vector<std::string> metric_names() const { return {}; }
};

int token_stream(char** a) {
  const fs::path file = a[0];
  const auto type = std::string(a[1]) == "uint16" ? pt::data::TokenType::uint16 : pt::data::TokenType::uint32;
  const uint64_t seed = std::stoull(a[2]);
  const int64_t block = std::stoll(a[3]), batch = std::stoll(a[4]), world = std::stoll(a[5]), epochs = std::stoll(a[6]),
                batches = std::stoll(a[7]);
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t rank = 0; rank < world; ++rank) {
    pt::data::TokenStream s(file, type, {.block_size = block, .batch_size = batch, .seed = seed, .rank = rank,
                                         .world_size = world, .batches_per_epoch = batches});
    for (int64_t e = 0; e < epochs; ++e) {
      s.set_epoch(e);
      int64_t i = 0;
      for (auto&& b : s) {
        auto x = b.x.contiguous(), y = b.y.contiguous();
        rows.push_back({e, i++, rank, std::vector<int64_t>(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel()),
                        std::vector<int64_t>(y.data_ptr<int64_t>(), y.data_ptr<int64_t>() + y.numel())});
      }
    }
  }
  std::printf("%s\n", rows.dump().c_str());
  return 0;
}

int val_check_interval(const fs::path& dir) {
  const auto c = nlohmann::json::parse(std::ifstream(dir / "case.json"));
  const int64_t in = c["inputs"], classes = c["classes"], n = c["train_samples"], nv = c["val_samples"];
  Linear task;
  task.lin = torch::nn::Linear(in, classes);
  {
    torch::NoGradGuard g;
    task.lin->weight.copy_(read_bin(dir / "weight.bin", torch::kFloat, {classes, in}));
    task.lin->bias.copy_(read_bin(dir / "bias.bin", torch::kFloat, {classes}));
  }
  pt::data::TensorLoader train(read_bin(dir / "x.bin", torch::kFloat, {n, in}), read_bin(dir / "y.bin", torch::kLong, {n}),
                               {.batch_size = c["batch_size"], .shuffle = false});
  pt::data::TensorLoader val(read_bin(dir / "vx.bin", torch::kFloat, {nv, in}), read_bin(dir / "vy.bin", torch::kLong, {nv}),
                             {.batch_size = c["batch_size"], .shuffle = false});
  torch::optim::SGD opt(task.module().parameters(), torch::optim::SGDOptions(c["lr"].get<double>()));
  const int64_t patience = c["patience"];
  const fs::path ckpt = dir / "ckpt";
  fs::remove_all(ckpt);
  pt::Trainer<Linear, pt::checkpoint::Disk, pt::callbacks::EarlyStopping> t(
      task, opt,
      pt::checkpoint::Disk({.directory = ckpt, .best = true, .export_final = false, .export_best = false, .log = nullptr}),
      pt::callbacks::EarlyStopping({.enabled = patience > 0, .monitor = {.metric = "loss"},
                                    .patience = std::max<int64_t>(patience, 1), .log = nullptr}));
  const auto r = t.fit(train, val,
                       {.max_steps = c["max_steps"], .limit_val_batches = c["limit_val_batches"],
                        .val_every_steps = c["val_every_steps"]});
  const int64_t stop = t.get<pt::callbacks::EarlyStopping>().stopped_step();
  nlohmann::json out{{"validation_steps", r.validation_steps}, {"global_steps", r.global_steps},
                     {"stop_step", stop >= 0 ? nlohmann::json(stop) : nlohmann::json(nullptr)}};
  std::vector<double> losses;
  for (const auto& m : r.validation) losses.push_back(m.loss);
  out["val_losses"] = losses;
  out["best_step"] = nullptr;
  if (fs::exists(ckpt / "best.ckpt")) {
    Linear other;
    other.lin = torch::nn::Linear(in, classes);
    torch::optim::SGD o2(other.module().parameters(), torch::optim::SGDOptions(0.1));
    pt::Trainer<Linear, pt::checkpoint::Disk, pt::callbacks::EarlyStopping> reader(other, o2);
    pt::checkpoint::load(reader.context(), ckpt / "best.ckpt");
    out["best_step"] = reader.state().global_step;
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  torch::set_num_threads(1);
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "val-check-interval" && argc == 3) return val_check_interval(argv[2]);
  if (cmd == "token-stream" && argc == 10) return token_stream(argv + 2);
  std::fprintf(stderr, "usage: differential_steps val-check-interval DIR | token-stream FILE TYPE SEED BLOCK BATCH WORLD "
                       "EPOCHS BATCHES\n");
  return 2;
}
