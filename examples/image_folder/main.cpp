// A folder of images per class (root/<class>/<file>, PNG and JPEG): data::ImageFolder decoded in LibTorch's
// DataLoader workers (data::from_torch), a user transform (random flips), data parallelism (--nproc) and exact
// resume (--resume). docs/your-data.md describes it; tests/integration/make_images.py writes a folder to try it on.
//   image_folder --data DIR --run-dir DIR [--epochs N] [--workers N] [--nproc N] [--max-steps N] [--resume]
// Writes RUN_DIR/summary.json (rank 0): the classes, the steps, the accuracy and the SHA-256 of the final weights.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <torch/torch.h>
#include <policytrain/checkpoint.hpp>
#include <policytrain/data/from_torch.hpp>
#include <policytrain/data/image_folder.hpp>  // link policytrain::images
#include <policytrain/data/unrepeated_distributed_sampler.hpp>
#include <policytrain/io/digest.hpp>
#include <policytrain/parallel/data_parallel.hpp>
#include <policytrain/parallel/launch.hpp>
#include <policytrain/policytrain.hpp>
namespace pt = policytrain;

struct SmallCnn {
  torch::nn::Sequential net;
  explicit SmallCnn(int64_t classes)
      : net(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)), torch::nn::ReLU(),
            torch::nn::MaxPool2d(2), torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1)),
            torch::nn::ReLU(), torch::nn::AdaptiveAvgPool2d(1), torch::nn::Flatten(), torch::nn::Linear(16, classes)) {}
  torch::nn::Module& module() { return *net; }
  torch::Tensor training_step(const pt::Batch& b) { return torch::nn::functional::cross_entropy(net->forward(b.x), b.y); }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto out = net->forward(b.x);
    return {torch::nn::functional::cross_entropy(out, b.y), out};
  }
};

int main(int argc, char** argv) {
  std::filesystem::path data, run_dir;
  int64_t epochs = 4, batch = 8, workers = 2, size = 32, every_steps = 5, max_steps = -1;
  int nproc = 1;
  bool resume = false;
  CLI::App app{"An image folder through LibTorch's DataLoader, with data parallelism and resume"};
  app.add_option("--data", data, "root/<class>/<image files>")->required()->check(CLI::ExistingDirectory);
  app.add_option("--run-dir", run_dir, "Where checkpoints and summary.json go")->required();
  app.add_option("--epochs", epochs, "Epochs")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", batch, "Images per batch per rank")->check(CLI::PositiveNumber);
  app.add_option("--workers", workers, "DataLoader worker threads, which decode")->check(CLI::NonNegativeNumber);
  app.add_option("--size", size, "Images resized (shorter side) and centre-cropped to SIZE x SIZE")->check(CLI::PositiveNumber);
  app.add_option("--every-steps", every_steps, "A step checkpoint every N steps")->check(CLI::NonNegativeNumber);
  app.add_option("--max-steps", max_steps, "Stop after this many steps (-1: no limit)");
  app.add_option("--nproc", nproc, "Local ranks (data parallel)")->check(CLI::PositiveNumber);
  app.add_flag("--resume", resume, "Continue from the newest good checkpoint in RUN_DIR/checkpoints");
  CLI11_PARSE(app, argc, argv);
  if (nproc > 1 && !std::getenv("RANK")) {
    pt::parallel::LaunchOptions o{.nproc = nproc};
    o.args.assign(argv, argv + argc);
    return pt::parallel::launch_local(o);
  }
  try {
    pt::parallel::DataParallel dp({.enabled = nproc > 1 || std::getenv("RANK") != nullptr});
    const auto rank = static_cast<size_t>(dp.rank()), world = static_cast<size_t>(dp.world_size());
    // [snippet:data]
    // Decoded, resized, cropped and normalised in the loader's workers; then the user's transform: a horizontal
    // flip of every other sample, drawn from the sample's own pixels so that it is the same in a resumed run.
    pt::data::ImageFolderOptions o{.resize = size, .crop = size, .mean = {0.5, 0.5, 0.5}, .std = {0.25, 0.25, 0.25},
                                   .transform = [](torch::data::Example<> e) {
                                     const bool flip = e.data.sum().item<float>() > 0;
                                     return flip ? torch::data::Example<>{e.data.flip({2}), e.target} : e;
                                   }};
    pt::data::ImageFolder folder(data, o);
    const size_t n = *folder.size();
    auto train = pt::data::from_torch(
        folder.map(torch::data::transforms::Stack<>()),
        torch::data::samplers::DistributedRandomSampler(n, world, rank),
        torch::data::DataLoaderOptions().batch_size(static_cast<size_t>(batch)).workers(static_cast<size_t>(workers)));
    // Validation: every image exactly once over the ranks (uneven shards, as Lightning's UnrepeatedDistributedSampler).
    auto val = pt::data::from_torch(
        pt::data::ImageFolder(data, {.resize = size, .crop = size, .mean = o.mean, .std = o.std})
            .map(torch::data::transforms::Stack<>()),
        pt::data::UnrepeatedDistributedSampler(n, world, rank),
        torch::data::DataLoaderOptions().batch_size(32).workers(static_cast<size_t>(workers)));
    // [/snippet:data]
    torch::manual_seed(0);
    SmallCnn task(static_cast<int64_t>(folder.classes().size()));
    torch::optim::Adam opt(task.module().parameters(), torch::optim::AdamOptions(1e-2));
    pt::Trainer<SmallCnn, pt::parallel::DataParallel, pt::checkpoint::Disk> trainer(
        task, opt, std::move(dp),
        pt::checkpoint::Disk({.directory = run_dir / "checkpoints", .every_steps = every_steps, .keep = 2,
                              .resume = resume ? "auto" : "", .export_final = false}));
    const auto result = trainer.fit(train, {.epochs = epochs, .max_steps = max_steps});
    const auto m = trainer.evaluate(val);
    if (trainer.is_main()) {
      std::printf("%zu images, %zu classes; steps %lld, accuracy %.3f\n", n, folder.classes().size(),
                  static_cast<long long>(result.global_steps), m.accuracy);
      nlohmann::json s{{"classes", folder.classes()},
                       {"images", n},
                       {"global_steps", result.global_steps},
                       {"epoch", trainer.state().epoch},
                       {"batch_in_epoch", trainer.state().batch_in_epoch},
                       {"val_samples", m.samples},
                       {"accuracy", m.accuracy},
                       {"world_size", world},
                       {"params_sha256", pt::io::params_sha256(task.module())}};
      std::filesystem::create_directories(run_dir);
      std::ofstream(run_dir / "summary.json") << s.dump(2) << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "image_folder: error: %s\n", e.what());
    return 1;
  }
}
