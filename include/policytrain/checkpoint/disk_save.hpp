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
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

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

/// A sharded save between its staging and its settle point (the next save, or fit end; at once when not
/// asynchronous): the parts it writes, the best saves still owed first.
struct ShardedPending {
  std::vector<std::shared_ptr<ShardedPart>> parts;  ///< owed best saves, then this save's
  std::string failure;                              ///< the staging's failure (nothing was written)
};

/// Disk's sharded writes that need no context: compiled once with separate compilation, whatever the Trainer.
struct ShardedWrites {
  /// An agreed failure of `p`: every rank keeps its best parts (all of them, written or not: the ranks other than
  /// the main one do not know which manifest failed; writing one again is harmless), then on_write_error.
  static void failed(Disk& d, ShardedPending& p, const std::string& failure);
  /// This rank's writes of `p`: its shard into every folder of every part, and on the main rank the common part
  /// (its digests into the part's `common` for the manifest). Throws CheckpointError at the first failure.
  static void write_parts(const Layout& layout, ShardedPending& p, int64_t rank, bool main);
  /// Hands `p`'s writes to this rank's background writer (made on the first save). The job holds the staged
  /// bytes and the pending save, never the Disk nor a tensor of the run.
  static void submit(Disk& d, const std::shared_ptr<ShardedPending>& p, int64_t rank, bool main);
};

/// Disk's save steps that need its context `Ctx` (a friend of Disk).
template <class Ctx>
struct DiskSave {
  /// The main rank's payload (make_payload; `optimizer_state` false: the optimizer's param groups without any
  /// parameter's state, a sharded save's common part); with a best file, the evaluated weights and, when best.pt
  /// is exported with it, best.pt's bytes into `best_pt` (written with the best file, never before); sets `evaluated`.
  /// `held`: the parameters the shards hold (stage 3; make_payload writes empty tensors in their place).
  static std::string main_payload(Disk& d, Ctx& ctx, const std::vector<std::pair<std::string, std::string>>& files, bool epoch_end,
                           std::string& evaluated, bool optimizer_state, std::string* best_pt,
                           const std::vector<std::string>& held = {}) {
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
      const bool export_best = d.o_.export_best && best_pt && std::any_of(files.begin(), files.end(), [](const auto& f) {
        return Layout::parse(f.first).kind == Layout::Kind::best;
      });
      evaluated = ctx.with_evaluated_weights([&] {
        if (export_best) *best_pt = export_bytes(checkpoint::detail::named_tensors(ctx.module()));
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
    return make_payload(ctx.module(), opt, st, d.o_.save, evaluated_weights, held);
  }


  /// save's sharded path: every rank stages its shard (its partition's optimizer state; parallel::
  /// ShardedDataParallel does not gather it) into bytes, rank 0 the common part (and best.pt with best.ckpt); every
  /// rank writes its parts (the best saves still owed first, then this one's: write_parts); the ranks agree that
  /// every file is written and fsynced; then rank 0 writes each folder's manifest last (finish). A failure: see
  /// on_write_error. With `async`, the save first settles the one in flight (settle), then hands the writes to the
  /// rank's background thread while training goes on; the manifests come at the next save or at fit end (settle).
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
    auto part = std::make_shared<ShardedPart>();
    part->files = files;
    part->step = step;
    part->world = world;
    part->stage = stage;
    part->after = std::move(after);
    auto p = std::make_shared<ShardedPending>();
    // Stage 3 (fully sharded parameters): each rank's shard holds its rows of the parameters too, the common part
    // an empty tensor in their place, and the manifest their layout. A best file's export and evaluated weights need
    // the whole model: it is gathered for that save only.
    std::vector<std::string> held;
    std::vector<std::pair<std::string, torch::Tensor>> rows;
    nlohmann::json model_layout;
    if constexpr (requires { par.parameter_shards(); }) {
      for (const auto& s : par.parameter_shards()) {
        held.push_back(s.name);
        const bool half = d.o_.save.half_weights && s.rows.is_floating_point();
        rows.emplace_back(s.name, half ? s.rows.to(torch::kHalf) : s.rows);
        model_layout.push_back({{"name", s.name}, {"shape", s.shape}, {"dtype", dtype_str(rows.back().second)},
                                {"rule", "dim0"}, {"world_size", world}, {"chunk", s.chunk}});
      }
    }
    part->model = model_layout;
    const bool gather = !held.empty() && std::any_of(files.begin(), files.end(), [](const auto& f) { return f.second == "best"; });
    {
      struct Gathered {
        decltype(par)& p;
        bool on;
        ~Gathered() {
          if constexpr (requires { p.release_parameters(); })
            if (on) p.release_parameters();
        }
      } gathered{par, false};
      if constexpr (requires { par.gather_parameters(); })
        if (gather) par.gather_parameters(), gathered.on = true;
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
        part->shard = std::make_shared<const std::string>(shard_payload(ctx.optimizer(), owned_parameters(ctx, false), part->indices, rows));
        if (ctx.is_main()) {
          std::string evaluated, best_pt;
          part->payload = std::make_shared<const std::string>(main_payload(d, ctx, files, epoch_end, evaluated, false, &best_pt, held));
          if (!best_pt.empty()) part->best_pt = std::make_shared<const std::string>(std::move(best_pt));
          part->meta = d.make_meta(epoch_end ? ctx.state().epoch + 1 : ctx.state().epoch,
                                   epoch_end ? 0 : ctx.state().batch_in_epoch, ctx.state(),
                                   d.fingerprint_.is_null() ? d.fingerprint(ctx) : nlohmann::json(), evaluated);
        }
      } catch (const CheckpointError& e) {
        p->failure = e.what();
      }
    }
    part->params = param_layout(ctx.optimizer());
    d.last_write_ = Disk::Clock::now();
    // Every rank prunes alike: the ranks' owed parts and top-k lists are the same.
    d.prune_owed(d.sharded_owed_, files, [](std::shared_ptr<ShardedPart>& e) -> ShardedPart& { return *e; });
    p->parts = std::exchange(d.sharded_owed_, {});
    p->parts.push_back(std::move(part));
    if (async) {
      if (p->failure.empty()) ShardedWrites::submit(d, p, rank, ctx.is_main());
      d.pending_ = std::move(p);
      d.last_save_seconds_ = std::chrono::duration<double>(Disk::Clock::now() - t0).count();
      return;
    }
    if (p->failure.empty()) {
      try {
        ShardedWrites::write_parts(d.layout_, *p, rank, ctx.is_main());
      } catch (const CheckpointError& e) {
        p->failure = e.what();
      }
    }
    if (const auto& hook = sharded_probe().after_shard_written) hook(step, rank);
    finish(d, ctx, *p, p->failure);
    d.last_save_seconds_ = std::chrono::duration<double>(Disk::Clock::now() - t0).count();
  }

  /// The settle point of an asynchronous sharded save (the next save, fit end; every rank, on the training
  /// thread): waits for this rank's write in flight, then finish. Nothing in flight: returns at once (no
  /// collective; every rank has the same saves, so the same answer).
  static void settle(Disk& d, Ctx& ctx) {
    if (!d.pending_) return;
    const auto p = std::exchange(d.pending_, nullptr);
    std::string failure = d.finish_async_write();
    if (failure.empty()) failure = p->failure;
    finish(d, ctx, *p, failure);
  }

 private:
  static constexpr const char* kOtherRank =
      "policytrain::checkpoint: another rank could not write its shard (its error names the file and the reason)";

  /// Every rank, once its parts of `p` are written (`failure`: this rank's, "" when none): the ranks agree whether
  /// every rank's shards (and rank 0's common parts) are written and fsynced; if so rank 0 writes each folder's
  /// manifest, the owed parts' first, and runs each part's `after` (rotation: the previous checkpoints go only
  /// once this one is complete); the ranks agree on that too. A failure: no manifest of that part (the previous
  /// checkpoint of each name stays the newest); every rank keeps the best parts to write again (retry_next_save),
  /// then on_write_error, every rank alike.
  static void finish(Disk& d, Ctx& ctx, ShardedPending& p, const std::string& failure) {
    if (ctx.agree_any(!failure.empty())) return ShardedWrites::failed(d, p, failure.empty() ? std::string(kOtherRank) : failure);
    std::string manifest_failure;
    if (ctx.is_main())
      for (const auto& part : p.parts) {
        manifest_failure = d.finish_sharded(part->files, part->meta, part->common, part->step, part->world, part->stage,
                                            part->params, part->model, part->after, part->best_pt.get());
        if (!manifest_failure.empty()) break;
      }
    if (ctx.agree_any(!manifest_failure.empty())) return ShardedWrites::failed(d, p, manifest_failure);
  }
};


// ShardedWrites' definitions: here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL void ShardedWrites::failed(Disk& d, ShardedPending& p, const std::string& failure) {
  if (d.o_.on_write_error == Disk::OnWriteError::retry_next_save)
    for (auto& part : p.parts) {
      std::erase_if(part->files, [](const auto& f) { return f.second != "best"; });
      if (part->files.empty()) continue;
      part->common.clear();
      d.sharded_owed_.push_back(std::move(part));
    }
  d.write_failed(failure);
}

POLICYTRAIN_DECL void ShardedWrites::write_parts(const Layout& layout, ShardedPending& p, int64_t rank, bool main) {
  for (const auto& part : p.parts) {
    if (!part->shard || (main && !part->payload))  // a save whose staging failed, kept as owed: nothing to write
      throw CheckpointError(policytrain::detail::error_message(
          "policytrain::checkpoint", policytrain::detail::format("the save of step {} has nothing staged to write "
                                                                 "(its staging failed)", part->step)));
    for (const auto& f : part->files) write_shard(layout.path(f.first), part->step, rank, part->world, *part->shard, part->indices);
    if (!main) continue;
    part->common.clear();
    for (const auto& f : part->files) {
      nlohmann::json m = part->meta;
      m["kind"] = f.second;
      m["sharded_part"] = "common";
      part->common.push_back(write_part(layout.path(f.first) / Layout::common(part->step), m, *part->payload));
    }
  }
}

POLICYTRAIN_DECL void ShardedWrites::submit(Disk& d, const std::shared_ptr<ShardedPending>& p, int64_t rank, bool main) {
  if (!d.writer_) {
    d.writer_ = std::make_shared<AsyncWriter>();
    d.written_ = std::make_shared<std::atomic<int64_t>>(0);
  }
  d.writer_->submit([p, layout = d.layout_, rank, main] {
    const int64_t step = p->parts.back()->step;
    if (const auto& hook = sharded_probe().async_write_begin) hook(step, rank);
    write_parts(layout, *p, rank, main);
    if (const auto& hook = sharded_probe().after_shard_written) hook(step, rank);
  });
}
#endif

}  // namespace policytrain::checkpoint::detail
