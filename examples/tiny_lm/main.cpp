// The second main job: trains a byte-level GPT by steps on a text corpus (nanoGPT's recipe: AdamW with decay and
// no-decay groups, warmup then cosine to a minimum lr, clipping, accumulation, bf16, the best checkpoint by validation
// loss), with the policies chosen on the command line; then samples text from the best checkpoint and writes
// --summary FILE. docs/language-model.md walks through it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <policytrain/all.hpp>
#include <policytrain/callbacks/perf_knobs.hpp>
#include <policytrain/data/token_stream.hpp>
#include <policytrain/metric/perplexity.hpp>

#include "../fashion_mnist/flags_parallel.hpp"
#include "../fashion_mnist/flags_precision.hpp"
#include "corpus.hpp"
#include "model.hpp"

namespace pt = policytrain;
namespace fs = std::filesystem;

namespace {

struct Config {
  fs::path corpus = tiny_lm::default_corpus();
  fs::path data = "runs/tiny_lm/data";
  int64_t max_steps = 2000;
  int64_t val_every_steps = 200;
  int64_t val_batches = 20;
  bool eval_on_start = false;
  int64_t batch = 16;
  int64_t accumulate = 1;
  tiny_lm::GptConfig model{};
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 100;
  std::string on_resume = "keep";
  double weight_decay = 0.1;
  double beta2 = 0.95;
  bool fused = false;
  double clip = 1.0;
  bool ema = false;
  double ema_decay = 0.999;
  fs::path checkpoint;
  std::string resume;
  int64_t save_every_steps = 0;
  fs::path init_weights;
  fs::path log_dir;
  bool cuda_graph = false;
  std::string device = "cpu";
  uint64_t seed = 1337;
  int threads = 0;
  bool keep_freed_memory = true;
  fs::path summary;
  int64_t sample_tokens = 200;
  double peak_flops = 0;
  int64_t top_k = 0;
  double temperature = 1.0;
  std::string prompt = "\n";
  int progress_tty = -1;
};

void add_flags(CLI::App& app, Config& c) {
  app.option_defaults()->group("Data");
  app.add_option("--corpus", c.corpus, "Text to train on: a file, or a folder of text files (default: Debian's fortunes)");
  app.add_option("--data", c.data,
                 "Folder of the token files train.bin and val.bin (nanoGPT's layout, uint16), made from --corpus "
                 "when absent");
  app.add_option("--batch", c.batch, "Sequences per micro-batch on each rank")->check(CLI::PositiveNumber);
  app.add_option("--block", c.model.block, "Tokens of context (block_size)")->check(CLI::PositiveNumber);
  app.add_option("--seed", c.seed, "Seed of the initial weights, the training windows and the sampling");
  app.add_option("--threads", c.threads, "Intra-op threads (0: LibTorch's default)")->check(CLI::NonNegativeNumber);
  app.add_option("--keep-freed-memory", c.keep_freed_memory,
                 "glibc's malloc keeps the blocks a step frees for the next one instead of returning them to the "
                 "system (keep_freed_cpu_memory; 0: glibc's default)");
  app.option_defaults()->group("Model");
  app.add_option("--layers", c.model.layers, "Transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--d-model", c.model.d_model, "Width of the residual stream")->check(CLI::PositiveNumber);
  app.add_option("--heads", c.model.heads, "Attention heads (must divide --d-model)")->check(CLI::PositiveNumber);
  app.option_defaults()->group("Training by steps");
  app.add_option("--max-steps", c.max_steps, "Optimizer steps of the run")->check(CLI::PositiveNumber);
  app.add_option("--val-every-steps", c.val_every_steps, "Validate every K optimizer steps (0: at the end only)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--val-batches", c.val_batches, "Validation batches (a fixed set of windows of val.bin)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--eval-on-start", c.eval_on_start, "Validate once before the first step (nanoGPT's iteration 0)");
  app.add_option("--accumulate", c.accumulate, "Micro-batches per optimizer step (accumulate::Steps)")
      ->check(CLI::PositiveNumber);
  app.option_defaults()->group("Optimizer and schedule");
  app.add_option("--lr", c.lr, "Peak learning rate (after the warmup)")->check(CLI::PositiveNumber);
  app.add_option("--min-lr", c.min_lr, "Learning rate at the end of the cosine decay")->check(CLI::NonNegativeNumber);
  app.add_option("--warmup-steps", c.warmup_steps, "Linear warmup, nanoGPT's lr·(step+1)/(warmup+1)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--on-resume", c.on_resume,
                 "A resume whose --lr or --max-steps differ from the checkpoint's: keep the checkpoint's schedule, or "
                 "take this command line's (nanoGPT's get_lr)")
      ->check(CLI::IsMember({"keep", "take"}));
  app.add_option("--weight-decay", c.weight_decay, "AdamW's weight decay of the matrices and embeddings (not of "
                 "biases and LayerNorm gains)")->check(CLI::NonNegativeNumber);
  app.add_option("--beta2", c.beta2, "AdamW's beta2")->check(CLI::Range(0.0, 0.9999));
  app.add_flag("--fused", c.fused, "policytrain's fused AdamW (one kernel per param group) instead of LibTorch's loop");
  app.add_option("--clip", c.clip, "Clip the gradients' total norm to this (0: no clipping)")->check(CLI::NonNegativeNumber);
  app.option_defaults()->group("Checkpoints and EMA");
  app.add_option("--checkpoint", c.checkpoint,
                 "Checkpoint folder: last.ckpt at every validation, best.ckpt and best.pt by validation loss");
  app.add_option("--resume", c.resume,
                 "Resume the run of --checkpoint: without a value from its newest good checkpoint, or from PATH")
      ->expected(0, 1)->default_str("auto")->option_text("[PATH]");
  app.add_option("--save-every-steps", c.save_every_steps, "Also step-<N>.ckpt every N optimizer steps (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--ema", c.ema, "Validate (and keep as the best) an exponential moving average of the weights");
  app.add_option("--ema-decay", c.ema_decay, "EMA decay")->check(CLI::Range(0.0, 0.999999));
  app.option_defaults()->group("Output");
  app.add_option("--summary", c.summary, "Write the run's summary (steps, validations, best, tokens/s, options) as JSON");
  app.add_option("--log-dir", c.log_dir,
                 "Write every step's loss and lr and every validation (steps.jsonl, validations.jsonl) here (default: "
                 "CHECKPOINT/logs with --checkpoint, else none)");
  app.add_option("--init-weights", c.init_weights,
                 "Write the initial weights here (torch.load-able, nanoGPT's names) before the first step");
  app.add_option("--sample-tokens", c.sample_tokens, "Bytes of text sampled from the best weights at the end (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", c.top_k, "Sample from the k likeliest bytes (0: greedy)")->check(CLI::NonNegativeNumber);
  app.add_option("--temperature", c.temperature, "Sampling temperature")->check(CLI::PositiveNumber);
  app.add_option("--prompt", c.prompt, "Text the sample continues");
  app.add_option("--progress-tty", c.progress_tty, "Progress display: -1 detect, 0 plain lines, 1 terminal");
  app.add_option("--peak-flops", c.peak_flops,
                 "The device's peak FLOP/s (e.g. 989e12 for an H100's bf16): the model FLOPs utilisation is reported")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--cuda-graph", c.cuda_graph, "The whole step captured into one CUDA graph (a GPU only)");
  app.add_option("--device", c.device, "cpu, or cuda (each rank takes the GPU of its rank modulo the GPUs visible)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

// [snippet:task]
/// The task: the GPT, and what one training and one validation step compute on a batch of windows.
struct LanguageModel {
  tiny_lm::Gpt gpt;
  /// `units`: each block a parallel::FullyShard unit (--zero 3).
  LanguageModel(const tiny_lm::GptConfig& c, bool units) : gpt(c, units) {}
  torch::nn::Module& module() { return *gpt; }
  torch::Tensor training_step(const pt::Batch& b) {
    const auto logits = gpt->forward(b.x);
    return torch::nn::functional::cross_entropy(logits.flatten(0, 1), b.y.flatten());
  }
  pt::Prediction validation_step(const pt::Batch& b) {
    auto logits = gpt->forward(b.x);
    return {torch::nn::functional::cross_entropy(logits.flatten(0, 1), b.y.flatten()), logits};
  }
  pt::MetricCollection metrics() const { return {pt::metric::Perplexity()}; }
  // [snippet:tokens]
  /// Tokens a batch trains on: the Trainer counts them, sums them over the ranks (FitResult::tokens_per_second())
  /// and shows tok/s in the progress bar, the step log and TensorBoard.
  int64_t tokens(const pt::Batch& b) const { return b.x.numel(); }
  /// The model's arithmetic per token trained (nanoGPT's estimate_mfu: 6 per parameter, forward and backward, plus
  /// attention's 12 x layers x d_model x block); with --peak-flops, FitResult::mfu() and the logs report the MFU.
  double flops_per_token() const {
    const auto& c = gpt->config;
    int64_t n = 0;
    std::set<const void*> seen;  // the tied embedding once
    for (const auto& p : gpt->parameters())
      if (seen.insert(p.unsafeGetTensorImpl()).second) n += p.numel();
    return 6.0 * static_cast<double>(n) + 12.0 * static_cast<double>(c.layers * c.d_model * c.block);
  }
  // [/snippet:tokens]
};
// [/snippet:task]


/// Continues `prompt` by `n` bytes: greedy (top_k 0) or sampled from the k likeliest bytes, seeded.
std::string sample(tiny_lm::Gpt& gpt, const std::string& prompt, int64_t n, int64_t top_k, double temperature,
                   uint64_t seed) {
  torch::NoGradGuard no_grad;
  gpt->eval();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<int64_t> ids;
  for (char c : prompt) ids.push_back(static_cast<uint8_t>(c));
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t from = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - gpt->config.block);
    auto idx = torch::tensor(std::vector<int64_t>(ids.begin() + from, ids.end()), torch::kLong).unsqueeze(0);
    // The model's device for the forward, the CPU for the choice (the seeded CPU generator draws the same bytes).
    auto logits = gpt->forward(idx.to(gpt->wte->weight.device())).select(1, -1).squeeze(0).to(torch::kCPU, torch::kFloat);
    int64_t next = 0;
    if (top_k <= 0) {
      next = logits.argmax().item<int64_t>();
    } else {
      auto [values, indices] = (logits / temperature).topk(std::min<int64_t>(top_k, logits.size(0)));
      const auto pick = torch::multinomial(torch::softmax(values, 0), 1, false, gen);
      next = indices[pick.item<int64_t>()].item<int64_t>();
    }
    ids.push_back(next);
    out.push_back(static_cast<char>(next));
  }
  return out;
}

/// `bytes` as printable UTF-8: a sampled byte sequence need not be valid UTF-8 (a byte-level model may stop mid
/// character or emit a stray continuation byte); each byte of an invalid sequence becomes U+FFFD.
std::string printable(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<uint8_t>(bytes[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= bytes.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<uint8_t>(bytes[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(bytes, i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  pt::callbacks::Preemption::catch_early();
  CLI::App app{"Trains a byte-level GPT by steps on a text corpus with policytrain"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.option_defaults()->always_capture_default();
  Config cfg;
  add_flags(app, cfg);
  fmnist::PrecisionFlags precision_flags;
  app.option_defaults()->group("Precision (precision::Autocast)");
  precision_flags.add(app);
  ParallelFlags par;
  app.option_defaults()->group("Data parallelism");
  par.add(app);
  CLI11_PARSE(app, argc, argv);

  try {
    // tiny_lm's Trainer holds callbacks::MetricsLog (the step log summary.json reads) and ProgressBar, whose hooks
    // run inside the step on the host: a captured step cannot hold them (core/hooks.hpp's graph-safety check).
    if (cfg.cuda_graph)
      throw std::invalid_argument("--cuda-graph: a CUDA graph captures CUDA work only, and tiny_lm's trainer logs "
                                  "every step on the host (callbacks::MetricsLog), which a graph cannot hold; leave "
                                  "--cuda-graph out (--device cuda trains eagerly on the GPU)");
    if (cfg.device == "cuda" && !torch::cuda::is_available())
      throw std::invalid_argument(std::string("--device cuda: no CUDA device is visible (this LibTorch ") +
                                  (pt::detail::built_with_cuda() ? "has CUDA" : "is a CPU build") +
                                  "); leave --device out to train on the CPU");
    if (par.elastic)
      throw std::invalid_argument("--elastic: tiny_lm's windows are drawn per global batch of a fixed world size; "
                                  "resume at the same --nproc, without --elastic");
    if (cfg.model.d_model % cfg.model.heads != 0)
      throw std::invalid_argument("--heads " + std::to_string(cfg.model.heads) + " does not divide --d-model " +
                                  std::to_string(cfg.model.d_model) + "; give a --heads that divides it");
    if (!cfg.resume.empty() && cfg.checkpoint.empty())
      throw std::invalid_argument("--resume: needs --checkpoint DIR (the run's checkpoint folder)");
    // The token files, made once, before the ranks start (they all read them).
    if (const int64_t bytes = tiny_lm::prepare_tokens(cfg.corpus, cfg.data))
      std::printf("tiny_lm: %lld bytes of text from %s made into %s/train.bin and val.bin (uint16, 90/10)\n",
                  static_cast<long long>(bytes), cfg.corpus.string().c_str(), cfg.data.string().c_str());
    if (auto code = pt::parallel::launch_ranks(par.nproc, argc, argv, par.max_restarts)) return *code;

    if (cfg.threads > 0) torch::set_num_threads(cfg.threads);
    // Every step allocates and frees the same activations: kept, they are not faulted in again at the next step
    // (glibc's malloc; the tcmalloc this build links, policytrain_link_malloc, keeps them itself: nothing is set).
    if (cfg.keep_freed_memory) (void)pt::keep_freed_cpu_memory();
    pt::seed_everything(cfg.seed);
    auto dp = par.make();
    const int64_t rank = dp.rank(), world_size = dp.world_size();

    // [snippet:streams]
    // Random windows of block + 1 tokens: the training stream is endless (max_steps ends the run), the validation
    // set is a fixed --val-batches batches of val.bin. Each rank draws its rows of one global batch.
    pt::data::TokenStream train(cfg.data / "train.bin", pt::data::TokenType::uint16,
                                {.block_size = cfg.model.block, .batch_size = cfg.batch, .seed = cfg.seed,
                                 .rank = rank, .world_size = world_size});
    pt::data::TokenStream val(cfg.data / "val.bin", pt::data::TokenType::uint16,
                              {.block_size = cfg.model.block, .batch_size = cfg.batch, .seed = cfg.seed + 1,
                               .rank = rank, .world_size = world_size, .batches_per_epoch = cfg.val_batches});
    // [/snippet:streams]
    if (dp.is_main())
      std::printf("tiny_lm: %lld train and %lld validation tokens from %s; %lld rank(s), %d thread(s)\n",
                  static_cast<long long>(train.tokens()), static_cast<long long>(val.tokens()),
                  cfg.data.string().c_str(), static_cast<long long>(world_size), torch::get_num_threads());

    // --zero 3: each block a unit of fully sharded parameters (gathered for its compute only), the rest the root.
    LanguageModel task(cfg.model, /*units=*/par.zero == 3);
    if (!cfg.init_weights.empty() && dp.is_main()) pt::checkpoint::export_weights(task.module(), cfg.init_weights);
    // Before the optimizer takes the parameters; the Trainer moves each batch to the model's device.
    const torch::Device device = cfg.device == "cuda"
        ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(rank % static_cast<int64_t>(torch::cuda::device_count())))
        : torch::Device(torch::kCPU);
    task.module().to(device);
    // [snippet:optimizer]
    // nanoGPT's groups: matrices and embeddings decay, biases and LayerNorm gains do not.
    auto groups = tiny_lm::decay_groups(task.module(), cfg.weight_decay, cfg.lr, cfg.beta2);
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    if (cfg.fused) optimizer = std::make_unique<pt::optim::FusedAdamW>(std::move(groups), torch::optim::AdamWOptions(cfg.lr));
    else optimizer = std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(cfg.lr));
    // [/snippet:optimizer]

    // [snippet:schedule]
    // nanoGPT's get_lr: lr·(step+1)/(warmup+1) for the warmup, then cosine from lr to min_lr at max_steps.
    pt::schedule::LrOptions lr{.kind = pt::schedule::Kind::cosine,
                               .total_steps = cfg.max_steps,
                               .lrf = cfg.min_lr / cfg.lr,
                               .decay_end = pt::schedule::DecayEnd::after_run,
                               .warmup_steps = cfg.warmup_steps,
                               .warmup_start_factor = 1.0 / static_cast<double>(cfg.warmup_steps + 1),
                               .on_resume = cfg.on_resume == "take" ? pt::schedule::OnResume::take
                                                                    : pt::schedule::OnResume::keep};
    // [/snippet:schedule]
    pt::checkpoint::Disk::Options disk;
    disk.directory = cfg.checkpoint;
    disk.best = true;
    disk.every_steps = cfg.save_every_steps;
    disk.resume = cfg.resume;
    disk.run = {.world_size = 0, .batch_size = cfg.batch, .data_size = train.tokens()};
    disk.settings = nlohmann::json{{"argv", std::vector<std::string>(argv, argv + argc)}}.dump();
    const pt::FitOptions fit{.max_steps = cfg.max_steps, .limit_val_batches = cfg.val_batches,
                             .val_every_steps = cfg.val_every_steps, .eval_on_start = cfg.eval_on_start,
                             .peak_flops = cfg.peak_flops};

    // The step log: --log-dir, or beside the checkpoints (summary.json's validations come from it).
    const fs::path log_dir = !cfg.log_dir.empty() || cfg.checkpoint.empty() ? cfg.log_dir : cfg.checkpoint / "logs";
    const auto wall0 = std::chrono::steady_clock::now();
    // The parallel policy's counters after training; at stage 3 also this rank's bytes of the blocks' parameter
    // shards against their whole bytes (about 1 / world size of them when the blocks are units).
    auto parallel_summary = [&](auto& trainer) {
      const auto& p = trainer.template policy<pt::Category::parallel>();
      nlohmann::json d = par.describe(p);
      if constexpr (std::is_same_v<std::decay_t<decltype(p)>, pt::parallel::ShardedDataParallel>) {
        int64_t units = 0, rows = 0, whole = 0;
        for (const auto& m : task.module().modules(/*include_self=*/false))
          units += dynamic_cast<const pt::parallel::FullyShardedUnit*>(m.get()) != nullptr;
        for (const auto& s : p.parameter_shards()) {
          if (!s.name.starts_with("h.")) continue;
          int64_t numel = 1;
          for (int64_t n : s.shape) numel *= n;
          rows += s.rows.numel() * static_cast<int64_t>(s.rows.element_size());
          whole += numel * static_cast<int64_t>(s.rows.element_size());
        }
        d["units"] = units;
        d["block_shard_bytes"] = rows;
        d["block_bytes"] = whole;
      }
      return d;
    };
    auto finish = [&](auto& trainer) -> int {
      const auto result = trainer.fit(train, val, fit);
      if (result.stopped_at_step) {
        if (trainer.is_main())
          std::printf("tiny_lm: stopped at optimizer step %lld by a signal; continue with --resume\n",
                      static_cast<long long>(result.global_steps));
        return pt::callbacks::Preemption::exit_code;
      }
      if (!trainer.is_main()) return 0;
      const auto& st = trainer.state();
      // Every validation of the run, the earlier attempts' included: the step log keeps each once across resumes
      // (callbacks::MetricsLog), where this fit's result has its own only.
      nlohmann::json validation = nlohmann::json::array();
      std::ifstream rows(log_dir / "validations.jsonl");
      for (std::string line; std::getline(rows, line);) {
        const auto row = nlohmann::json::parse(line);
        validation.push_back({{"step", row.at("step")}, {"loss", row.at("val_loss")},
                              {"perplexity", row.value("val_perplexity", nlohmann::json())}});
      }
      if (validation.empty())  // no step log (no --log-dir or --checkpoint): this fit's
        for (size_t i = 0; i < result.validation.size(); ++i)
          validation.push_back({{"step", result.validation_steps[i]}, {"loss", result.validation[i].loss},
                                {"perplexity", result.validation[i].get("perplexity")}});
      std::printf("\nvalidation curve (step: loss, perplexity)\n");
      for (const auto& v : validation)
        std::printf("  %6lld: %.4f  %.2f\n", v.at("step").get<long long>(), v.at("loss").get<double>(),
                    v.at("perplexity").is_number() ? v.at("perplexity").get<double>() : std::nan(""));
      const double tps = result.tokens_per_second();
      std::printf("%lld steps, %.0f tokens/s over %lld rank(s), best validation loss %.4f at step %lld\n",
                  static_cast<long long>(result.global_steps), tps, static_cast<long long>(world_size),
                  st.best_metric, static_cast<long long>(st.best_step));
      const std::string trained_sha256 = pt::io::params_sha256(task.module());  // before the best weights replace them
      // [snippet:sample]
      // Text from the weights that scored best (best.ckpt holds what best.pt exports), or the last ones.
      std::string source = "the last weights";
      if (!cfg.checkpoint.empty() && fs::exists(cfg.checkpoint / "best.ckpt")) {
        pt::checkpoint::load_weights(trainer, cfg.checkpoint / "best.ckpt");
        source = (cfg.checkpoint / "best.ckpt").string();
      }
      if (cfg.sample_tokens > 0)
        std::printf("\nsample (%s, %s):\n%s%s\n", source.c_str(),
                    cfg.top_k > 0 ? ("top-" + std::to_string(cfg.top_k)).c_str() : "greedy", printable(cfg.prompt).c_str(),
                    printable(sample(task.gpt, cfg.prompt, cfg.sample_tokens, cfg.top_k, cfg.temperature, cfg.seed))
                        .c_str());
      // [/snippet:sample]
      if (!cfg.summary.empty()) {
        nlohmann::json summary{
            {"steps", result.global_steps},
            {"validation", validation},
            {"best", {{"step", st.best_step}, {"loss", st.best_metric}}},
            {"tokens_per_second", tps},
            {"mfu", result.mfu()},
            {"train_seconds", result.train_seconds},
            {"wall_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count()},
            {"world_size", world_size},
            {"resumed_from", trainer.template get<pt::checkpoint::Disk>().resumed_from().string()},
            {"params_sha256", trained_sha256},
            {"options",
             {{"argv", std::vector<std::string>(argv, argv + argc)},
              {"model", {{"layers", cfg.model.layers}, {"d_model", cfg.model.d_model}, {"heads", cfg.model.heads},
                         {"block", cfg.model.block}, {"vocab", cfg.model.vocab}}},
              {"batch", cfg.batch}, {"accumulate", cfg.accumulate}, {"max_steps", cfg.max_steps},
              {"val_every_steps", cfg.val_every_steps}, {"val_batches", cfg.val_batches},
              {"lr", cfg.lr}, {"min_lr", cfg.min_lr}, {"warmup_steps", cfg.warmup_steps},
              {"weight_decay", cfg.weight_decay}, {"fused", cfg.fused}, {"clip", cfg.clip}, {"ema", cfg.ema},
              {"precision", precision_flags.describe()}, {"zero", par.zero}, {"seed", cfg.seed},
              {"threads", torch::get_num_threads()}, {"keep_freed_memory", cfg.keep_freed_memory},
              {"malloc", pt::malloc_library()},
              {"corpus", cfg.corpus.string()}, {"device", cfg.device}}}};
        summary["parallel"] = parallel_summary(trainer);
        std::ofstream(cfg.summary) << summary.dump(2) << "\n";
      }
      return 0;
    };
    // [snippet:trainer]
    // One Trainer: each policy's type is fixed here, its settings (and whether it acts) come from the command line.
    auto policies = [&](auto parallel) {
      return pt::Trainer(task, *optimizer, precision_flags.make(), pt::accumulate::Steps(cfg.accumulate),
                         pt::schedule::Lr(lr), pt::checkpoint::Disk(disk),
                         pt::callbacks::GradClip(cfg.clip > 0 ? pt::callbacks::GradClip::Options{.max_norm = cfg.clip}
                                                              : pt::callbacks::GradClip::Options{}),
                         pt::callbacks::Ema({.enabled = cfg.ema, .decay = cfg.ema_decay, .tau = 0}),
                         pt::callbacks::Preemption(), pt::callbacks::ProgressBar({.force_tty = cfg.progress_tty}),
                         pt::callbacks::MetricsLog({.dir = log_dir, .print_summary = false}), std::move(parallel));
    };
    // [/snippet:trainer]
    if (par.zero > 0) {
      auto trainer = policies(par.make_sharded());
      return finish(trainer);
    }
    auto trainer = policies(std::move(dp));
    return finish(trainer);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tiny_lm: error: %s\n", e.what());
    return 1;
  }
}
