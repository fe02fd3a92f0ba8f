// The main job: trains a CNN on Fashion-MNIST with the policies chosen on the command line, then prints
// a classification report and writes RUN_DIR/summary.json.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <type_traits>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/detail/torch_compat.hpp>
#include <policytrain/all.hpp>

#include "flags_precision.hpp"
#include "flags_fastpath.hpp"
#include "flags_accumulation.hpp"
#include "flags_schedule.hpp"
#include "flags_checkpoint.hpp"
#include "flags_parallel.hpp"
#include "model.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

struct Config {
  fs::path data = pt::data::default_fashion_mnist_dir();
  fs::path run_dir = "runs/fashion_mnist";
  int64_t epochs = 5;
  int64_t batch_size = 64;
  double lr = 3e-3;
  std::string optimizer = "adamw";
  double weight_decay = 5e-4;
  double momentum = 0.9;
  uint64_t seed = 0;
  int threads = 0;
  int step_delay_ms = 0;
  int64_t limit_train_batches = -1;
  int64_t limit_val_batches = -1;
  int64_t eval_batch_size = 1000;
  int64_t val_size = 5000;
  int64_t train_eval_size = 5000;
  int64_t train_size = 0;
  int64_t width = 32;
  std::string block = "conv-bn-relu-pool";
  int64_t conv3 = 0;
  double label_smoothing = 0;
  double bn_momentum = 0.1;  // LibTorch's defaults: the main job is unchanged unless told
  double bn_eps = 1e-5;
  bool whiten = false;
  double whiten_eps = 5e-4;
  bool whiten_frozen = false;
  int64_t whiten_images = 5000;
  int progress_tty = -1;
  std::string device = "cpu";
  bool recompute = false;
  bool cuda_graph = false;
};

void add_core_flags(CLI::App& app, Config& c) {
  app.add_option("--data", c.data, "Directory with the Fashion-MNIST IDX files (gzipped or raw)")->check(CLI::ExistingDirectory);
  app.add_option("--run-dir", c.run_dir, "Directory for summary.json and checkpoints");
  app.add_option("--epochs", c.epochs, "Epochs to train")->check(CLI::PositiveNumber);
  app.add_option("--lr", c.lr, "Peak learning rate")->check(CLI::PositiveNumber);
  app.add_option("--optimizer", c.optimizer,
                 "Optimizer (adamw, adam, sgd: policytrain's fused ones; adamw-loop, adam-loop, sgd-loop: LibTorch's)")
      ->check(CLI::IsMember({"adamw", "adam", "sgd", "adamw-loop", "adam-loop", "sgd-loop"}));
  app.add_option("--weight-decay", c.weight_decay, "Weight decay")->check(CLI::NonNegativeNumber);
  app.add_option("--momentum", c.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", c.seed, "Seed of the weights' initialisation and the data order");
  app.add_option("--threads", c.threads, "Intra-op threads (0: LibTorch's default)")->check(CLI::NonNegativeNumber);
  app.add_option("--limit-train-batches", c.limit_train_batches, "Micro-batches per epoch at most (-1: all)");
  app.add_option("--step-delay-ms", c.step_delay_ms,
                 "Sleep this long in every training step (0: off; the weights are the same): a run that lasts a given "
                 "time on any machine at no CPU cost, as the scheduler's time-limit test needs")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--limit-val-batches", c.limit_val_batches, "Validation and test batches evaluated at most (-1: all)");
  app.add_option("--eval-batch-size", c.eval_batch_size,
                 "Images per validation, test and training-accuracy batch (with --limit-val-batches, fewer images "
                 "are evaluated: the tests' short runs)")
      ->check(CLI::PositiveNumber);
  app.add_option("--val-size", c.val_size,
                 "Training images held out for validation (stratified by class, fixed by --seed); validation drives "
                 "early stopping, plateau schedules and best checkpoints, the test set is evaluated once, at the end")
      ->check(CLI::PositiveNumber);
  app.add_option("--train-size", c.train_size,
                 "Train on the first N images of the training split only (0: all of it); e.g. to make overfitting "
                 "show within a short run")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--train-eval-size", c.train_eval_size,
                 "Training images (the first of the training split) evaluated once after training, for the "
                 "train-vs-validation comparison in summary.json (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--width", c.width, "Channels of the first convolution")->check(CLI::PositiveNumber);
  app.add_option("--block", c.block,
                 "Order of each convolution block: conv-bn-relu-pool (the textbook one), or conv-pool-bn-relu (batch "
                 "norm and ReLU after the pooling, on a quarter of the values: faster on a CPU)")
      ->check(CLI::IsMember({"conv-bn-relu-pool", "conv-pool-bn-relu"}));
  app.add_option("--conv3", c.conv3,
                 "Channels of a third convolution (conv, batch norm, ReLU) at 7x7, before the fully connected layers "
                 "(0: none, the two-block CNN)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--label-smoothing", c.label_smoothing, "Label smoothing of the training loss (0: off)")
      ->check(CLI::Range(0.0, 0.5));
  app.add_option("--bn-momentum", c.bn_momentum,
                 "Batch norms' momentum of the running statistics (LibTorch's 0.1; larger forgets the untrained first "
                 "steps faster in a short run)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--bn-eps", c.bn_eps, "Batch norms' epsilon (LibTorch's 1e-5)")->check(CLI::PositiveNumber);
  app.add_flag("--whiten", c.whiten,
               "Initialise the first convolution's first 2 k^2 filters by patch whitening (airbench): the "
               "eigenvectors of the training images' k x k patch covariance, scaled by 1/sqrt(eigenvalue + eps), and "
               "their negatives");
  app.add_option("--whiten-eps", c.whiten_eps, "With --whiten: the epsilon added to the eigenvalues")
      ->check(CLI::PositiveNumber);
  app.add_flag("--whiten-frozen", c.whiten_frozen, "With --whiten: the first convolution's weight is not trained");
  app.add_option("--whiten-images", c.whiten_images,
                 "With --whiten: the first N training images give the patch covariance")
      ->check(CLI::PositiveNumber);
  app.add_option("--progress-tty", c.progress_tty, "Progress display: -1 detect, 0 plain lines, 1 terminal");
  app.add_option("--device", c.device, "cpu, or cuda (each rank takes the GPU of its local rank)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--recompute", c.recompute,
               "Activation checkpointing: keep only each CNN block's input, recompute the block in backward");
  app.add_flag("--cuda-graph", c.cuda_graph,
               "The whole step (forward, backward, clipping, the fused optimizer) captured into one CUDA graph and "
               "replayed (step::CudaGraph). Needs --device cuda, a fused optimizer (adamw, adam, sgd), one "
               "micro-batch per step and one process; no --profile or --tensorboard; no metrics log is written");
}

/// Why --cuda-graph cannot apply to this command line (empty: it can). step::CudaGraph's own checks at fit begin
/// cover the rest (a fused optimizer, a device-side skip).
std::string cuda_graph_refusal(const Config& c, const fmnist::AccumulationFlags& acc, const fmnist::FastpathFlags& fp,
                               bool data_parallel) {
  if (c.device != "cuda") return "a CUDA graph captures CUDA work: add --device cuda";
  if (data_parallel) return "data parallelism's gradient hooks run on the host: train with one process (no --nproc)";
  if (acc.auto_batch || acc.accumulate != 1 || acc.nominal != 0)
    return "a captured step takes one micro-batch: drop --accumulate, --nominal-batch and --batch-size auto";
  if (fp.profile || !fp.profile_dir.empty() || fp.tensorboard || !fp.tensorboard_dir.empty())
    return "the profiler and TensorBoard time the step on the host: drop --profile and --tensorboard";
  if (c.optimizer.ends_with("-loop"))
    return "LibTorch's optimizers step on the host: use --optimizer adamw, adam or sgd (the fused ones)";
  return {};
}

/// The device this rank trains on: --device cuda takes the GPU of the local rank (one process per GPU).
torch::Device resolve_device(const Config& c, int local_rank) {
  if (c.device == "cpu") return torch::kCPU;
  if (!torch::cuda::is_available())
    throw std::runtime_error(std::string("--device cuda: no CUDA device is visible (this build's LibTorch ") +
                             (policytrain::detail::built_with_cuda() ? "has CUDA" : "is a CPU build") +
                             "); train with --device cpu");
  const auto n = static_cast<int>(torch::cuda::device_count());
  if (local_rank >= n)
    throw std::runtime_error("--device cuda: local rank " + std::to_string(local_rank) + " needs GPU " +
                             std::to_string(local_rank) + " but " + std::to_string(n) +
                             " are visible; start at most one rank per GPU");
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank)};
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const Config& c, torch::nn::Module& m) {
  // sgd: Nesterov momentum (the Ultralytics default form); the fused optimizers are drop-in replacements of
  // LibTorch's classes (same options and state, so checkpoints move between them).
  if (c.optimizer == "sgd" || c.optimizer == "sgd-loop") {
    const auto opts = torch::optim::SGDOptions(c.lr).momentum(c.momentum).nesterov(true).weight_decay(c.weight_decay);
    if (c.optimizer == "sgd-loop") return std::make_unique<torch::optim::SGD>(m.parameters(), opts);
    return std::make_unique<pt::optim::FusedSgd>(m.parameters(), opts);
  }
  if (c.optimizer == "adam" || c.optimizer == "adam-loop") {
    const auto opts = torch::optim::AdamOptions(c.lr).weight_decay(c.weight_decay);
    if (c.optimizer == "adam-loop") return std::make_unique<torch::optim::Adam>(m.parameters(), opts);
    return std::make_unique<pt::optim::FusedAdam>(m.parameters(), opts);
  }
  const auto opts = torch::optim::AdamWOptions(c.lr).weight_decay(c.weight_decay);
  if (c.optimizer == "adamw-loop") return std::make_unique<torch::optim::AdamW>(m.parameters(), opts);
  return std::make_unique<pt::optim::FusedAdamW>(m.parameters(), opts);
}

}  // namespace

int main(int argc, char** argv) {
  // SIGTERM and SIGUSR1 from here on only set a flag, acted on at the first step's end (callbacks::Preemption):
  // a signal during parsing, data loading or process-group setup is not lost (nor does it end the job unsaved).
  // [snippet:catch-early]
  pt::callbacks::Preemption::catch_early();
  // [/snippet:catch-early]
  CLI::App app{"Trains a CNN on Fashion-MNIST with policytrain"};
  // A later value of an option replaces an earlier one: scripts/demo passes its recipe first, a user's flags after it.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // --help lists every option's default (the value it has before parsing) and groups the options by policy; each
  // group takes the options added after its option_defaults()->group(...) (tests/integration/help_output.py).
  app.option_defaults()->always_capture_default();
  Config cfg;
  app.option_defaults()->group("Training, model and data");
  add_core_flags(app, cfg);
  fmnist::PrecisionFlags precision_flags;
  app.option_defaults()->group("Precision (precision::Autocast)");
  precision_flags.add(app);
  fmnist::FastpathFlags fastpath;
  app.option_defaults()->group("Loader, clipping, speed and observation");
  fastpath.add(app);
  fmnist::AccumulationFlags accumulation;
  app.option_defaults()->group("Batch size and accumulation");
  accumulation.add(app, cfg.batch_size);
  fmnist::ScheduleFlags schedule;
  app.option_defaults()->group("Learning-rate schedule (schedule::Lr)");
  schedule.add(app);
  fmnist::CheckpointFlags ckpt_flags;
  app.option_defaults()->group("Checkpoints, EMA, early stopping and rollback");
  ckpt_flags.add(app);
  ParallelFlags par;
  app.option_defaults()->group("Data parallelism");
  par.add(app);
  CLI11_PARSE(app, argc, argv);
  // [snippet:launch]
  if (auto code = pt::parallel::launch_ranks(par.nproc, argc, argv, par.max_restarts)) return *code;
  // [/snippet:launch]

  try {
    const auto wall0 = std::chrono::steady_clock::now();
    if (cfg.threads > 0) torch::set_num_threads(cfg.threads);
    pt::seed_everything(cfg.seed);
    auto dp = par.make();
    const int64_t rank = dp.rank(), world_size = dp.world_size();  // dp moves into the Trainer below
    if (cfg.cuda_graph)
      if (auto why = cuda_graph_refusal(cfg, accumulation, fastpath, dp.active()); !why.empty())
        throw std::invalid_argument("--cuda-graph: " + why);
    if (cfg.cuda_graph && par.zero > 0)
      throw std::invalid_argument("--cuda-graph cannot compose with --zero: the sharded step broadcasts parameters "
                                  "from the host after the optimizer step; leave one out");
    const torch::Device device = resolve_device(cfg, dp.local_rank());
    if (dp.is_main()) fs::create_directories(cfg.run_dir);

    auto full_train = pt::data::load_fashion_mnist(cfg.data, /*train=*/true);
    auto test = pt::data::load_fashion_mnist(cfg.data, /*train=*/false);
    // [snippet:split]
    // Model selection (early stopping, plateau schedules, best checkpoints) sees the validation split only;
    // the test set is evaluated once, after training.
    const auto split = pt::data::stratified_split(full_train.x, full_train.y, cfg.val_size, cfg.seed);
    const int64_t train_n = cfg.train_size > 0 ? std::min(cfg.train_size, split.train_x.size(0)) : split.train_x.size(0);
    const pt::data::TensorPair train{split.train_x.slice(0, 0, train_n), split.train_y.slice(0, 0, train_n)};
    pt::data::TensorLoader val_loader(split.val_x, split.val_y, {.batch_size = cfg.eval_batch_size,
                                                                 .shuffle = false, .rank = rank,
                                                                 .world_size = world_size});
    // [/snippet:split]
    pt::data::TensorLoader test_loader(test.x, test.y, {.batch_size = cfg.eval_batch_size, .shuffle = false,
                                                        .rank = rank, .world_size = world_size});
    if (dp.is_main()) std::printf("Fashion-MNIST: %lld train, %lld validation, %lld test images from %s; %d threads\n",
                static_cast<long long>(train.x.size(0)), static_cast<long long>(split.val_x.size(0)),
                static_cast<long long>(test.x.size(0)),
                cfg.data.string().c_str(), torch::get_num_threads());

    fmnist::Classifier task(cfg.width, cfg.recompute, cfg.label_smoothing,
                            cfg.block == "conv-pool-bn-relu" ? fmnist::BlockOrder::conv_pool_bn_relu
                                                             : fmnist::BlockOrder::conv_bn_relu_pool,
                            cfg.conv3, /*units=*/par.zero == 3);
    task.tta_flip = fastpath.tta;
    task.step_delay = std::chrono::milliseconds(cfg.step_delay_ms);
    task.net->set_batch_norm(cfg.bn_momentum, cfg.bn_eps);
    if (cfg.whiten_frozen && !cfg.whiten) throw std::invalid_argument("--whiten-frozen: needs --whiten");
    // Before the move and the optimizer: the covariance of CPU images, and a frozen weight is no optimizer's.
    if (cfg.whiten) task.net->whiten_first_conv(train.x.slice(0, 0, cfg.whiten_images), cfg.whiten_eps, cfg.whiten_frozen);
    task.module().to(device);  // before the optimizer takes the parameters; the Trainer moves batches here
    auto optimizer = make_optimizer(cfg, task.module());
    if (par.elastic && (accumulation.auto_batch || accumulation.nominal > 0))
      throw std::invalid_argument("--elastic cannot compose with --batch-size auto or --nominal-batch: the accumulation "
                                  "they derive depends on the per-rank batch, so the global batch would change with "
                                  "the world size; give --batch-size a number (and --accumulate)");
    // --elastic: --batch-size is the global micro-batch, each rank takes its share (docs/parallel.md).
    const int64_t micro_batch = accumulation.resolve(task, train.x, train.y, par.rank_batch(cfg.batch_size, world_size));
    // [snippet:loader]
    // --data-on-device: the same split's images as uint8, standardised on the device by the loader.
    const auto train_u8 = fastpath.data_on_device
        ? pt::data::read_idx_pair(cfg.data, "train", 10).images.unsqueeze(1).index_select(0, split.train_index).slice(0, 0, train_n)
        : torch::Tensor();
    auto make_train_loader = [&](int64_t batch) {
      return fastpath.make_train_loader(train.x, train_u8, train.y,
                                        {.batch_size = batch, .shuffle = true, .seed = cfg.seed, .rank = rank,
                                         .world_size = world_size},
                                        device, /*in_step=*/cfg.cuda_graph);
    };
    auto train_loader_ptr = make_train_loader(micro_batch);
    auto& train_loader = *train_loader_ptr;
    // [/snippet:loader]

    pt::callbacks::ProgressBar progress({.force_tty = cfg.progress_tty});
    const std::string settings = nlohmann::json{{"argv", std::vector<std::string>(argv, argv + argc)}}.dump();
    const nlohmann::json hparams{{"lr", cfg.lr}, {"batch_size", cfg.batch_size}, {"epochs", cfg.epochs},
                                 {"optimizer", cfg.optimizer}, {"weight_decay", cfg.weight_decay}, {"width", cfg.width},
                                 {"precision", precision_flags.describe().at("dtype")}};
    // The run fingerprint's sizes. --elastic: no world size, and the batch the global one (what a resume on
    // another world size keeps; docs/parallel.md, "Elastic restarts").
    ckpt_flags.run = {.world_size = par.elastic ? -1 : 0,
                      .batch_size = par.elastic ? micro_batch * world_size : micro_batch,
                      .data_size = train.x.size(0)};
    const pt::FitOptions fit{.epochs = cfg.epochs,
                             .limit_train_batches = cfg.limit_train_batches,
                             .limit_val_batches = cfg.limit_val_batches};
    // summary.json of an earlier attempt of this run (a stop, a requeue, a resubmission): its history goes on.
    const auto summary_path = cfg.run_dir / "summary.json";
    nlohmann::json earlier = nlohmann::json::object();
    if (dp.is_main() && !ckpt_flags.resume.empty() && fs::exists(summary_path)) {
      try {
        earlier = nlohmann::json::parse(std::ifstream(summary_path));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "fashion_mnist: %s is not JSON (%s); its history is not carried on\n",
                     summary_path.string().c_str(), e.what());
      }
    }
    const auto environment = pt::parallel::Environment::from_env();
    // This attempt, for summary.json's "attempts": who launched it, which scheduler job, where it ended.
    auto attempt_record = [&](const pt::FitResult& r, int stopped_by, const std::string& resumed_from) {
      const char* job = std::getenv("SLURM_JOB_ID");
      const char* restarts = std::getenv("SLURM_RESTART_COUNT");
      nlohmann::json validation = nlohmann::json::array();
      for (const auto& m : r.validation) validation.push_back({{"loss", m.loss}, {"accuracy", m.accuracy}});
      return nlohmann::json{
          {"launcher", par.nproc > 1 ? std::string("--nproc") : environment.source},
          {"world_size", world_size},
          {"slurm_job_id", job ? nlohmann::json(job) : nlohmann::json()},
          // Slurm sets SLURM_RESTART_COUNT from the first requeue on: the first attempt is 0.
          {"slurm_restart_count", job ? nlohmann::json(restarts ? std::atoi(restarts) : 0) : nlohmann::json()},
          {"resumed_from", resumed_from},
          {"global_steps", r.global_steps},
          {"epochs_validated", r.validation.size()},
          {"stopped_by", stopped_by ? nlohmann::json(pt::callbacks::Preemption::signal_name(stopped_by)) : nlohmann::json()},
          {"validation", validation}};
    };
    // The attempts so far and the validation of every epoch so far (each attempt validates its own epochs).
    auto carried = [&](const char* key) {
      return earlier.contains(key) && earlier[key].is_array() ? earlier[key] : nlohmann::json::array();
    };
    // Trains with `trainer`, evaluates the test set once, prints the report and writes summary.json.
    auto finish = [&]<bool Graph>(auto& trainer, std::bool_constant<Graph>) -> int {
      pt::FitResult result;
      if constexpr (Graph) result = trainer.fit(train_loader, val_loader, fit);
      else result = accumulation.fit(trainer, train_loader, make_train_loader, val_loader, fit);
      const std::string resumed_from = trainer.template get<pt::checkpoint::Disk>().resumed_from().string();
      // A finished run resumed again: nothing was trained; its summary stays as it is. Rank 0 read the summary:
      // the ranks agree (every rank skips the test evaluation's collectives, or none).
      const bool finished_before = !result.stopped_at_step && result.epochs_run == 0 && result.validation.empty() &&
                                   earlier.value("finished", false) &&
                                   earlier.value("global_steps", int64_t{-1}) == result.global_steps;
      if (trainer.agree_min(finished_before ? 0 : 1) == 0) {
        if (trainer.is_main())
          std::printf("nothing left to train: %s finished at optimizer step %lld; %s kept as it is\n",
                      cfg.run_dir.string().c_str(), static_cast<long long>(result.global_steps),
                      summary_path.string().c_str());
        return 0;
      }
      // Stopped by SIGTERM / SIGUSR1 (callbacks::Preemption): the checkpoint is written; no test evaluation, no
      // summary of a finished run: exit with the documented code, after requeueing the Slurm job if asked.
      // [snippet:stopped]
      if (result.stopped_at_step) {
        const auto& preemption = trainer.template get<pt::callbacks::Preemption>();
        const bool requeue = ckpt_flags.requeue && preemption.requeue_asked();
        // [/snippet:stopped]
        if (trainer.is_main()) {
          std::printf("preempted at optimizer step %lld by %s: saved to %s; resume with --resume (exit code %d%s)\n",
                      static_cast<long long>(result.global_steps),
                      pt::callbacks::Preemption::signal_name(preemption.stopped_by()).c_str(),
                      trainer.template get<pt::checkpoint::Disk>().options().directory.string().c_str(),
                      pt::callbacks::Preemption::exit_code,
                      requeue ? ", requeueing the Slurm job" : ckpt_flags.requeue ? ", not requeued: not the requeue signal" : "");
          std::ofstream(cfg.run_dir / "preempted.json")
              << nlohmann::json{{"global_steps", result.global_steps},
                                {"signal", preemption.stopped_by()},
                                {"signals_received", preemption.signals_received()},
                                {"requeue", requeue}}
                     .dump(2)
              << "\n";
          // The run is not finished: summary.json holds its history so far, for the attempt that ends it.
          nlohmann::json partial{{"finished", false}, {"global_steps", result.global_steps}};
          partial["attempts"] = carried("attempts");
          partial["attempts"].push_back(attempt_record(result, preemption.stopped_by(), resumed_from));
          partial["validation_history"] = carried("validation_history");
          for (const auto& m : result.validation)
            partial["validation_history"].push_back({{"loss", m.loss}, {"accuracy", m.accuracy}});
          std::ofstream(summary_path) << partial.dump(2) << "\n";
          std::fflush(stdout);
        }
        // Every rank has saved and rank 0 has said so before the job is requeued: the requeue ends the job's
        // processes, and srun --kill-on-bad-exit ends the others as soon as one rank exits 75.
        trainer.agree_min(0);
        if (requeue && trainer.is_main()) {
          // Said before: the requeue ends this process (SIGTERM from Slurm) as soon as scontrol returns, often
          // before another line.
          const char* job = std::getenv("SLURM_JOB_ID");
          std::printf("requeueing: scontrol requeue %s\n", job ? job : "(no SLURM_JOB_ID)");
          std::fflush(stdout);
          try {
            if (const int rc = pt::callbacks::Preemption::requeue_slurm_job(); rc != 0)
              std::printf("fashion_mnist: not requeued: scontrol requeue %s ended with %d (was the job submitted "
                          "with sbatch --requeue?)\n", job, rc);
          } catch (const std::exception& e) {
            std::printf("fashion_mnist: not requeued: %s\n", e.what());
          }
          std::fflush(stdout);
        }
        trainer.agree_min(0);  // no rank exits (and has srun end the others) before the requeue was asked
        return pt::callbacks::Preemption::exit_code;
      }
      // After training: the parallel policy's counters (buckets, all-reduce calls) are the run's.
      nlohmann::json parallel_description{{"name", "parallel::Single"}};
      nlohmann::json state_bytes = ParallelFlags::state_bytes(pt::parallel::DataParallel({.enabled = false}), *optimizer);
      if constexpr (!Graph) {
        parallel_description = par.describe(trainer.template policy<pt::Category::parallel>());
        state_bytes = ParallelFlags::state_bytes(trainer.template policy<pt::Category::parallel>(), *optimizer);
      }
      // The one evaluation of the test set (every rank takes part: the metrics are reduced across ranks).
      int test_evaluations = 0;
      auto evaluate_test = [&] {
        ++test_evaluations;
        return trainer.evaluate(test_loader, cfg.limit_val_batches);
      };
      const auto metrics = evaluate_test();
      // With --tta, the same weights on the test set without it: what the test-time augmentation adds.
      std::optional<pt::Metrics> metrics_without_tta;
      if (task.tta_flip) {
        task.tta_flip = false;
        metrics_without_tta = evaluate_test();
        task.tta_flip = true;
      }
      // Accuracy on (a fixed part of) the training images, with the weights the test set saw: the gap to the
      // validation accuracy is the overfitting that early stopping and EMA act on.
      std::optional<pt::Metrics> train_metrics;
      if (cfg.train_eval_size > 0) {
        const int64_t n = std::min(cfg.train_eval_size, train.x.size(0));
        pt::data::TensorLoader train_eval_loader(train.x.slice(0, 0, n), train.y.slice(0, 0, n),
                                                 {.batch_size = cfg.eval_batch_size, .shuffle = false, .rank = rank,
                                                  .world_size = world_size});
        train_metrics = trainer.evaluate(train_eval_loader, cfg.limit_val_batches);
      }
      // Every epoch's validation, the earlier attempts' included: the last is the run's.
      nlohmann::json history = carried("validation_history");
      for (const auto& m : result.validation) history.push_back({{"loss", m.loss}, {"accuracy", m.accuracy}});
      const double nan = std::numeric_limits<double>::quiet_NaN();
      const double val_accuracy = history.empty() ? nan : history.back().at("accuracy").get<double>();
      const double val_loss = history.empty() ? nan : history.back().at("loss").get<double>();
      // [snippet:rank0]
      if (!trainer.is_main()) return 0;
      // [/snippet:rank0]
      const auto report = metrics.report(pt::data::fashion_mnist_labels());
      std::printf("\nClassification report (test set)\n%s\n", report.to_string().c_str());

      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
      nlohmann::json summary{
          {"test_accuracy", metrics.accuracy},
          {"test_loss", metrics.loss},
          {"test_evaluations", test_evaluations},
          {"test_accuracy_without_tta",
           metrics_without_tta ? nlohmann::json(metrics_without_tta->accuracy) : nlohmann::json()},
          {"val_accuracy", val_accuracy},
          {"train_accuracy", train_metrics ? nlohmann::json(train_metrics->accuracy) : nlohmann::json()},
          {"train_eval_loss", train_metrics ? nlohmann::json(train_metrics->loss) : nlohmann::json()},
          {"train_eval_samples", train_metrics ? train_metrics->samples : int64_t{0}},
          {"val_loss", val_loss},
          {"split", {{"train", train.x.size(0)}, {"val", split.val_x.size(0)}, {"test", test.x.size(0)}}},
          {"epochs_run", result.epochs_run},
          {"global_steps", result.global_steps},
          {"skipped_steps", result.skipped_steps},
          {"train_samples_per_second", result.samples_per_second()},
          {"train_seconds", result.train_seconds},
          {"wall_seconds", wall},
          {"stopped_early", result.stopped_early},
          {"best_epoch", trainer.state().best_epoch},
          {"best_metric", trainer.state().best_metric},
          {"resumed_from", resumed_from},
          {"params_sha256", pt::io::params_sha256(task.module())},
          {"torch_version", pt::detail::torch_version()},
          {"threads", torch::get_num_threads()},
          {"device", device.str()},
          {"classification_report", report.to_json()},
          {"policies",
           {{"precision", precision_flags.describe()},
            {"optimizer", {{"name", cfg.optimizer}, {"lr", cfg.lr}, {"weight_decay", cfg.weight_decay}}},
            {"parallel", parallel_description},
            {"batch_size", cfg.batch_size},
            {"recompute", cfg.recompute},
            {"label_smoothing", cfg.label_smoothing},
            {"batch_norm", {{"momentum", cfg.bn_momentum}, {"eps", cfg.bn_eps}}},
            {"whiten", {{"enabled", cfg.whiten}, {"eps", cfg.whiten_eps}, {"frozen", cfg.whiten_frozen},
                        {"images", cfg.whiten_images}}},
            {"width", cfg.width},
            {"block", cfg.block},
            {"conv3", cfg.conv3},
            {"accumulation", accumulation.describe()},
            {"schedule", schedule.describe()},
            {"seed", cfg.seed}}},
      };
      summary.update(state_bytes);
      summary["policies"].update(ckpt_flags.describe());
      summary["validation_history"] = history;
      summary["finished"] = true;
      // torch.cuda.max_memory_allocated's figure (the CUDA caching allocator's peak since the process began; null on
      // the CPU): the memory row of --zero 1/2/3 on a GPU.
      const auto cuda_peak = pt::memory::cuda_peak_allocated_bytes();
      summary["cuda_max_memory_allocated"] = cuda_peak ? nlohmann::json(*cuda_peak) : nlohmann::json();
      summary["attempts"] = carried("attempts");
      summary["attempts"].push_back(attempt_record(result, 0, resumed_from));
      summary["policies"].update(fastpath.describe());
      if constexpr (Graph) {
        const auto& g = trainer.template get<pt::step::CudaGraph>();
        summary["policies"]["step"] = {{"name", "step::CudaGraph"}, {"warmup_steps", g.options().warmup_steps},
                                       {"captures", g.captures()}, {"replays", g.replays()},
                                       {"eager_steps", g.eager_steps()}, {"fallbacks", g.fallbacks()}};
      } else {
        summary["policies"]["step"] = {{"name", "eager"}};
        summary.update(trainer.template get<pt::callbacks::MetricsLog>().summary());
      }
      const auto& path = summary_path;
      std::ofstream(path) << summary.dump(2) << "\n";
      std::printf("validation accuracy %.4f; test accuracy %.4f, loss %.4f, %.0f train samples/s, %.1f s; summary: %s\n",
                  val_accuracy, metrics.accuracy, metrics.loss, result.samples_per_second(), wall, path.string().c_str());
      // A stop signal after the last step (Slurm's time-limit warning during the test evaluation): the run is
      // finished and saved; catch_early()'s handler kept the signal instead of letting it end the job (FAILED 138).
      if (const int late = pt::callbacks::Preemption::pending())
        std::printf("%s came after the run finished: nothing left to stop or save; exit code 0\n",
                    pt::callbacks::Preemption::signal_name(late).c_str());
      return 0;
    };
    if (cfg.cuda_graph) {
      // The graph-safe policies of the composition below (no accumulation, data parallelism or host timers).
      // With --data-on-device the loader yields tickets, made into batches inside the captured step.
      pt::data::DeviceBatchTask graph_task(task, train_loader.device_loader());
      pt::Trainer trainer(graph_task, *optimizer, precision_flags.make(ckpt_flags.rollback), schedule.make(),
                          ckpt_flags.make_checkpoint(cfg.run_dir, settings), ckpt_flags.make_rollback(),
                          ckpt_flags.make_ema(), ckpt_flags.make_early_stopping(), ckpt_flags.make_preemption(), std::move(progress),
                          fastpath.make_knobs(cfg.seed, cfg.threads), fastpath.make_clip(), pt::step::CudaGraph{});
      return finish(trainer, std::true_type{});
    }
    if (par.zero > 0) {
      // [snippet:zero]
      // The same composition with the optimizer state (--zero 1), the gradients too (--zero 2), and the parameters
      // too (--zero 3: each layer a parallel::FullyShard unit), sharded across the ranks: the last policy is a
      // parallel::ShardedDataParallel(DataParallelOptions, ShardingOptions{.stage}).
      pt::Trainer trainer(task, *optimizer, precision_flags.make(ckpt_flags.rollback), accumulation.make(),
                          schedule.make(), ckpt_flags.make_checkpoint(cfg.run_dir, settings), ckpt_flags.make_rollback(),
                          ckpt_flags.make_ema(), ckpt_flags.make_early_stopping(), ckpt_flags.make_preemption(), std::move(progress),
                          fastpath.make_knobs(cfg.seed, cfg.threads), fastpath.make_clip(), fastpath.make_log(cfg.run_dir),
                          fastpath.make_profiler(cfg.run_dir), fastpath.make_tensorboard(cfg.run_dir, settings, hparams),
                          par.make_sharded());
      // [/snippet:zero]
      return finish(trainer, std::false_type{});
    }
    // [snippet:trainer]
    // One fully composed Trainer: each policy's type is fixed here, its settings (and whether it acts) come from
    // the command line. Class template argument deduction names the policies from the arguments.
    pt::Trainer trainer(task, *optimizer, precision_flags.make(ckpt_flags.rollback), accumulation.make(), schedule.make(),
                        ckpt_flags.make_checkpoint(cfg.run_dir, settings), ckpt_flags.make_rollback(),
                        ckpt_flags.make_ema(), ckpt_flags.make_early_stopping(), ckpt_flags.make_preemption(), std::move(progress),
                        fastpath.make_knobs(cfg.seed, cfg.threads), fastpath.make_clip(), fastpath.make_log(cfg.run_dir),
                        fastpath.make_profiler(cfg.run_dir), fastpath.make_tensorboard(cfg.run_dir, settings, hparams),
                        std::move(dp));
    // [/snippet:trainer]

    return finish(trainer, std::false_type{});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: error: %s\n", e.what());
    return 1;
  }
}
