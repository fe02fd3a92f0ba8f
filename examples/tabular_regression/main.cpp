// Regression on one's own CSV table: read_csv, a seeded random_split, LibTorch's DataLoader with worker threads and
// a DistributedRandomSampler (data::from_torch), data parallelism (--nproc) and exact resume (--resume).
// docs/your-data.md quotes the marked regions of this file.
//   tabular_regression --run-dir DIR [--csv FILE] [--rows N] [--epochs N] [--workers N] [--nproc N] [--resume]
// Without --csv it writes DIR/data.csv first: N rows of 8 features and a target, a fixed function of them plus noise.
// Writes DIR/summary.json (rank 0): the steps, the validation loss, and the SHA-256 of the final weights.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

// [snippet:include]
#include <torch/torch.h>
#include <policytrain/checkpoint.hpp>        // checkpoint::Disk
#include <policytrain/data/csv.hpp>          // data::read_csv
#include <policytrain/data/from_torch.hpp>   // data::from_torch
#include <policytrain/data/split.hpp>        // data::random_split
#include <policytrain/io/digest.hpp>
#include <policytrain/parallel/data_parallel.hpp>
#include <policytrain/parallel/launch.hpp>
#include <policytrain/policytrain.hpp>
namespace pt = policytrain;
// [/snippet:include]

// [snippet:dataset]
// LibTorch's data API: a map-style dataset of rows; the DataLoader's workers call get(i).
struct Rows : torch::data::datasets::Dataset<Rows> {
  torch::Tensor x, y;
  Rows(torch::Tensor x_, torch::Tensor y_) : x(std::move(x_)), y(std::move(y_)) {}
  torch::data::Example<> get(size_t i) override {
    return {x[static_cast<int64_t>(i)], y[static_cast<int64_t>(i)]};
  }
  std::optional<size_t> size() const override { return static_cast<size_t>(x.size(0)); }
};
// [/snippet:dataset]

struct Regressor {
  torch::nn::Sequential net;
  explicit Regressor(int64_t in)
      : net(torch::nn::Linear(in, 32), torch::nn::Tanh(), torch::nn::Linear(32, 1)) {}
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::mse_loss(net->forward(b.x), b.y); }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = net->forward(b.x);
    return {torch::mse_loss(out, b.y), out};
  }
  std::vector<std::string> metric_names() { return {"loss"}; }
};

/// A table of `rows` rows: 8 features, and a target that is a fixed function of them plus noise.
void write_table(const std::filesystem::path& file, int64_t rows) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(7);
  auto x = torch::randn({rows, 8}, gen, torch::kFloat64);
  auto w = torch::linspace(-1, 1, 8, torch::kFloat64);
  auto y = (x.matmul(w) + 0.5 * torch::sin(x.select(1, 0) * 2) + 0.05 * torch::randn({rows}, gen, torch::kFloat64));
  std::filesystem::create_directories(file.parent_path());
  std::ofstream f(file.string() + ".tmp");
  f << "f0,f1,f2,f3,f4,f5,f6,f7,target\n";
  auto xa = x.accessor<double, 2>();
  auto ya = y.accessor<double, 1>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < 8; ++c) f << fmt::format("{:.6f},", xa[r][c]);
    f << fmt::format("{:.6f}\n", ya[r]);
  }
  f.close();
  std::filesystem::rename(file.string() + ".tmp", file);
}

int main(int argc, char** argv) {
  std::filesystem::path run_dir, csv;
  int64_t rows = 4000, epochs = 3, batch = 32, workers = 2, every_steps = 20, max_steps = -1;
  int nproc = 1;
  bool resume = false;
  CLI::App app{"Regression on a CSV table with LibTorch's DataLoader, data parallelism and resume"};
  app.add_option("--run-dir", run_dir, "Where checkpoints and summary.json go")->required();
  app.add_option("--csv", csv, "The table (header; a column 'target'); default: RUN_DIR/data.csv, generated");
  app.add_option("--rows", rows, "Rows of the generated table")->check(CLI::PositiveNumber);
  app.add_option("--epochs", epochs, "Epochs")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", batch, "Samples per batch per rank")->check(CLI::PositiveNumber);
  app.add_option("--workers", workers, "DataLoader worker threads (0: the main thread loads)")->check(CLI::NonNegativeNumber);
  app.add_option("--every-steps", every_steps, "A step checkpoint every N steps")->check(CLI::NonNegativeNumber);
  app.add_option("--max-steps", max_steps, "Stop after this many steps (-1: no limit)");
  app.add_option("--nproc", nproc, "Local ranks (data parallel)")->check(CLI::PositiveNumber);
  app.add_flag("--resume", resume, "Continue from the newest good checkpoint in RUN_DIR/checkpoints");
  CLI11_PARSE(app, argc, argv);
  if (nproc > 1 && !std::getenv("RANK")) {  // the launching process: start the ranks, each runs this main
    pt::parallel::LaunchOptions o{.nproc = nproc};
    o.args.assign(argv, argv + argc);
    return pt::parallel::launch_local(o);
  }
  try {
    if (csv.empty()) {
      csv = run_dir / "data.csv";
      if (!std::filesystem::exists(csv) && (!std::getenv("RANK") || std::string(std::getenv("RANK")) == "0"))
        write_table(csv, rows);
      while (!std::filesystem::exists(csv)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pt::parallel::DataParallel dp({.enabled = nproc > 1 || std::getenv("RANK") != nullptr});
    const int rank = dp.rank(), world = dp.world_size();

    // [snippet:data]
    // The table: every column but 'target' is an input. A seeded random split (the same on every rank), then
    // the inputs standardised with the training part's statistics.
    const auto table = pt::data::read_csv(csv.string());
    const auto x = table.columns_except({"target"}), y = table.columns({"target"});
    const auto split = pt::data::random_split(x, y, /*n_val=*/x.size(0) / 5, /*seed=*/0);
    const auto mean = split.train_x.mean(0), std = split.train_x.std(0);
    auto train_x = (split.train_x - mean) / std, val_x = (split.val_x - mean) / std;

    // Training: LibTorch's DataLoader (worker threads, this rank's shard from a DistributedRandomSampler).
    auto train = pt::data::from_torch(
        Rows(train_x, split.train_y).map(torch::data::transforms::Stack<>()),
        torch::data::samplers::DistributedRandomSampler(static_cast<size_t>(train_x.size(0)),
                                                        static_cast<size_t>(world), static_cast<size_t>(rank)),
        torch::data::DataLoaderOptions().batch_size(static_cast<size_t>(batch)).workers(static_cast<size_t>(workers)));
    // Validation: the in-memory TensorLoader, sharded too (its padding is left out of the metrics).
    pt::data::TensorLoader val(val_x, split.val_y, {.batch_size = 256, .shuffle = false, .rank = rank, .world_size = world});
    // [/snippet:data]

    // [snippet:trainer]
    torch::manual_seed(0);
    Regressor task(x.size(1));
    torch::optim::Adam opt(task.module().parameters(), torch::optim::AdamOptions(3e-3));
    pt::Trainer<Regressor, pt::parallel::DataParallel, pt::checkpoint::Disk> trainer(
        task, opt, std::move(dp),
        pt::checkpoint::Disk({.directory = run_dir / "checkpoints", .every_steps = every_steps, .keep = 2,
                              .resume = resume ? "auto" : "", .export_final = false}));
    const auto result = trainer.fit(train, val, {.epochs = epochs, .max_steps = max_steps});
    // [/snippet:trainer]
    const auto m = trainer.evaluate(val);
    if (trainer.is_main()) {
      std::printf("epochs %lld, steps %lld, validation mse %.5f\n", static_cast<long long>(trainer.state().epoch),
                  static_cast<long long>(result.global_steps), m.loss);
      nlohmann::json s{{"global_steps", result.global_steps},
                       {"epoch", trainer.state().epoch},
                       {"batch_in_epoch", trainer.state().batch_in_epoch},
                       {"val_loss", m.loss},
                       {"val_samples", m.samples},
                       {"world_size", world},
                       {"params_sha256", pt::io::params_sha256(task.module())}};
      std::ofstream(run_dir / "summary.json") << s.dump(2) << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tabular_regression: error: %s\n", e.what());
    return 1;
  }
}
