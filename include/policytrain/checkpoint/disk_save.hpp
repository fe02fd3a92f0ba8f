#pragma once
/// \file
/// checkpoint::Disk's save steps that need the Trainer context (included by checkpoint/disk.hpp): the main rank's
/// payload, and the sharded save (Options::sharded; the files: checkpoint/sharded.hpp), in which every rank writes
/// its optimizer partition, rank 0 the common part, the ranks agree, then rank 0 writes each manifest last; with
/// Options::async, staged into bytes at the step and written by a background thread, one save in flight.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <policytrain/checkpoint/async_writer.hpp>
#include <policytrain/checkpoint/disk.hpp>
#include <policytrain/checkpoint/layout.hpp>
#include <policytrain/checkpoint/sharded.hpp>
#include <policytrain/core/category.hpp>

namespace policytrain::checkpoint::detail {

/// The parameters whose optimizer state this rank keeps under the context's parallel policy: those it owns
/// (parallel::ShardedDataParallel's partition); every one under a policy that does not partition it (`all`), or
/// rank 0's alone (`!all`: a sharded save writes an unpartitioned state once).
template <class Ctx>
OwnsParameter owned_parameters(Ctx& ctx, bool all) {
  auto& par = ctx.template policy<Category::parallel>();
  if constexpr (requires { par.owner(torch::Tensor()); par.rank(); }) {
    return [&par, all](const torch::Tensor& p) {
      const int o = par.owner(p);
      return o < 0 ? all || par.rank() == 0 : o == par.rank();
    };
  } else {
    const bool main = ctx.is_main();
    return [all, main](const torch::Tensor&) { return all || main; };
  }
}

/// An asynchronous sharded save between its staging and its settle point (the next save, or fit end): what the
/// manifest needs. `common` is filled by the background write (rank 0), read once the writer is waited for.
struct ShardedPending {
  std::vector<std::pair<std::string, std::string>> files;  ///< the save's folders (names in the directory) and kinds
  nlohmann::json meta;                                      ///< the checkpoint's metadata (rank 0)
  std::vector<nlohmann::json> common;                       ///< write_part's answer per folder (rank 0)
  nlohmann::json params;                                    ///< param_layout at the save's step
  int64_t step = 0, world = 1, stage = 0;
  std::function<void()> after;                              ///< rotation, once the manifests are written
  std::string failure;                                      ///< the staging's failure (nothing was submitted)
};

/// Disk's save steps that need its context `Ctx` (a friend of Disk).
template <class Ctx>
struct DiskSave {
  /// The main rank's payload (make_payload; `optimizer_state` false: the optimizer's param groups without any
  /// parameter's state, a sharded save's common part); exports best.pt with a best file; sets `evaluated`.
  static std::string main_payload(Disk& d, Ctx& ctx, const std::vector<std::pair<std::string, std::string>>& files, bool epoch_end,
                           std::string& evaluated, bool optimizer_state) {
    StateDict st = ctx.state_dict();
    const auto& s = ctx.state();
    const int64_t epoch = epoch_end ? s.epoch + 1 : s.epoch;
    const int64_t batch = epoch_end ? 0 : s.batch_in_epoch;
    st["trainer/epoch"] = scalar_tensor(epoch);
    st["trainer/batch_in_epoch"] = scalar_tensor(batch);
    // A best file records the weights that scored: the validation's (callbacks::Ema swaps its average in), in
    // the payload's "evaluated" section when they are not the trained ones, and exported as best.pt.
    std::vector<std::pair<std::string, torch::Tensor>> evaluated_weights;
    const bool best = std::any_of(files.begin(), files.end(), [](const auto& f) { return f.second == "best"; });
    if (best) {
      const bool export_best = d.o_.export_best && std::any_of(files.begin(), files.end(), [](const auto& f) {
        return Layout::parse(f.first).kind == Layout::Kind::best;
      });
      evaluated = ctx.with_evaluated_weights([&] {
        if (export_best) export_weights(ctx.module(), d.layout_.path(Layout::best_export()));
        torch::NoGradGuard g;
        for (const auto& [k, v] : checkpoint::detail::named_tensors(ctx.module())) evaluated_weights.emplace_back(k, v.detach().clone());
      });
      if (evaluated == "model") evaluated_weights.clear();  // the model section holds them
    }
    if (optimizer_state) return make_payload(ctx.module(), ctx.optimizer(), st, d.o_.save, evaluated_weights);
    auto& opt = ctx.optimizer();
    auto aside = std::move(opt.state());  // the shards hold it
    opt.state().clear();
    struct Back {
      decltype(aside)& a;
      torch::optim::Optimizer& o;
      ~Back() { o.state() = std::move(a); }
    } back{aside, opt};
    return make_payload(ctx.module(), opt, st, d.o_.save, evaluated_weights);
  }


  /// save's sharded path: every rank writes its shard (its partition's optimizer state; parallel::
  /// ShardedDataParallel does not gather it), rank 0 the common part; the ranks agree that every file is written
  /// and fsynced; then rank 0 writes each folder's manifest last (finish_sharded). A failure: see on_write_error.
  /// With `async`, the save first settles the one in flight (settle), then stages this one: the shard and the
  /// common part serialized into bytes here, on the training thread (the next step cannot change what is
  /// written), and written by the rank's background thread while training goes on; its manifest comes at the
  /// next save or at fit end (settle).
  static void sharded(Disk& d, Ctx& ctx, const std::vector<std::pair<std::string, std::string>>& files, bool epoch_end,
                      std::function<void()> after) {
    const auto t0 = Disk::Clock::now();
    auto& par = ctx.template policy<Category::parallel>();
    const int64_t world = par.world_size(), step = ctx.state().global_step;
    int64_t rank = 0, stage = 0;
    if constexpr (requires { par.rank(); }) rank = par.rank();
    if constexpr (requires { par.sharding().stage; }) stage = par.sharding().stage;
    const bool async = d.o_.async;
    if (async) settle(d, ctx);  // one save in flight: the previous one is complete (or its failure agreed) first
    std::string failure, shard, payload;
    std::vector<int64_t> indices;
    nlohmann::json meta;
    std::vector<nlohmann::json> common;
    {
      struct Restore {
        Ctx& c;
        decltype(par)& p;
        ~Restore() {
          if constexpr (requires { c.after_save(); }) c.after_save();
          if constexpr (requires { p.set_sharded_save(false); }) p.set_sharded_save(false);
        }
      };
      if constexpr (requires { par.set_sharded_save(true); }) par.set_sharded_save(true);
      Restore restore{ctx, par};
      if constexpr (requires { ctx.before_save(); }) ctx.before_save();
      d.last_saved_step_ = step;
      try {
        shard = shard_payload(ctx.optimizer(), owned_parameters(ctx, false), indices);
        if (!async)
          for (const auto& f : files) write_shard(d.layout_.path(f.first), step, rank, world, shard, indices);
        if (ctx.is_main()) {
          std::string evaluated;
          payload = main_payload(d, ctx, files, epoch_end, evaluated, false);
          meta = d.make_meta(epoch_end ? ctx.state().epoch + 1 : ctx.state().epoch,
                             epoch_end ? 0 : ctx.state().batch_in_epoch, ctx.state(),
                             d.fingerprint_.is_null() ? d.fingerprint(ctx) : nlohmann::json(), evaluated);
          if (!async) common = d.write_common(files, meta, payload, step);
        }
      } catch (const CheckpointError& e) {
        failure = e.what();
      }
    }
    d.last_write_ = Disk::Clock::now();
    if (async) {
      auto p = std::make_shared<ShardedPending>(ShardedPending{files, std::move(meta), {}, param_layout(ctx.optimizer()),
                                                               step, world, stage, std::move(after), std::move(failure)});
      if (p->failure.empty()) submit(d, p, std::move(shard), std::move(payload), std::move(indices), rank, ctx.is_main());
      d.pending_ = std::move(p);
      d.last_save_seconds_ = std::chrono::duration<double>(Disk::Clock::now() - t0).count();
      return;
    }
    if (const auto& hook = sharded_probe().after_shard_written) hook(step, rank);
    if (ctx.agree_any(!failure.empty())) {  // no manifest: the previous checkpoint of each name stays the newest
      d.write_failed(failure.empty() ? std::string(kOtherRank) : failure);
      return;
    }
    if (ctx.is_main()) failure = d.finish_sharded(files, meta, common, step, world, stage, param_layout(ctx.optimizer()), std::move(after));
    d.last_save_seconds_ = std::chrono::duration<double>(Disk::Clock::now() - t0).count();
    d.settle_write(ctx, failure);
  }

  /// The settle point of an asynchronous sharded save (the next save, fit end; every rank, on the training
  /// thread): waits for this rank's write in flight, the ranks agree whether every rank's shard (and rank 0's
  /// common part) is written and fsynced; if so rank 0 writes each folder's manifest and runs the save's `after`
  /// (rotation: the previous checkpoints go only once this one is complete), and the ranks agree on that write.
  /// A failure: on_write_error (every rank alike). Nothing in flight: returns at once (no collective; every rank
  /// has the same saves, so the same answer).
  static void settle(Disk& d, Ctx& ctx) {
    if (!d.pending_) return;
    const auto p = std::exchange(d.pending_, nullptr);
    std::string failure = d.finish_async_write();
    if (failure.empty()) failure = p->failure;
    if (ctx.agree_any(!failure.empty())) {  // no manifest: the previous checkpoint of each name stays the newest
      d.write_failed(failure.empty() ? std::string(kOtherRank) : failure);
      return;
    }
    if (ctx.is_main())
      failure = d.finish_sharded(p->files, p->meta, p->common, p->step, p->world, p->stage, std::move(p->params),
                                 std::move(p->after));
    d.settle_write(ctx, failure);
  }

 private:
  static constexpr const char* kOtherRank =
      "policytrain::checkpoint: another rank could not write its shard (its error names the file and the reason)";

  /// Hands the staged bytes to this rank's background writer (made on the first save): its shard into every
  /// folder of the save, and on the main rank the common part (its digests into `p->common` for the manifest).
  static void submit(Disk& d, const std::shared_ptr<ShardedPending>& p, std::string shard, std::string payload,
                     std::vector<int64_t> indices, int64_t rank, bool main) {
    if (!d.writer_) {
      d.writer_ = std::make_shared<AsyncWriter>();
      d.written_ = std::make_shared<std::atomic<int64_t>>(0);
    }
    std::vector<std::filesystem::path> folders;
    for (const auto& f : p->files) folders.push_back(d.layout_.path(f.first));
    // The job holds the bytes, the folders and the pending save, never the Disk nor a tensor of the run.
    d.writer_->submit([p, folders = std::move(folders), shard = std::move(shard), payload = std::move(payload),
                       indices = std::move(indices), rank, main] {
      const int64_t step = p->step;
      if (const auto& hook = sharded_probe().async_write_begin) hook(step, rank);
      for (const auto& folder : folders) write_shard(folder, step, rank, p->world, shard, indices);
      if (main)
        for (size_t i = 0; i < folders.size(); ++i) {
          nlohmann::json m = p->meta;
          m["kind"] = p->files[i].second;
          m["sharded_part"] = "common";
          p->common.push_back(write_part(folders[i] / Layout::common(step), m, payload));
        }
      if (const auto& hook = sharded_probe().after_shard_written) hook(step, rank);
    });
  }
};

}  // namespace policytrain::checkpoint::detail
