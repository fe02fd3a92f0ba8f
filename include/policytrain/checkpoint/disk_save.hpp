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
#include <map>
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

/// The weights that scored, as a best save records them: their name (the context's with_evaluated_weights: "model"
/// or "callbacks::Ema"), best.pt's bytes, and the tensors of the payload's "evaluated" section (none when they are
/// the trained weights). Stage 3's sharded save gathers them onto rank 0 (DiskSave::evaluated_rows).
struct EvaluatedWeights {
  std::string name;
  std::string best_pt;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
};

/// Disk's save steps, through the context's view (a friend of Disk; compiled once with separate compilation).
struct DiskSave {
  /// The main rank's payload (make_payload; `optimizer_state` false: the optimizer's param groups without any
  /// parameter's state, a sharded save's common part); with a best file, the evaluated weights and, when best.pt
  /// is exported with it, best.pt's bytes into `best_pt` (written with the best file, never before); sets `evaluated`.
  /// `held`: the parameters the shards hold (stage 3; make_payload writes empty tensors in their place); `held_state`:
  /// the Trainer state's entries they hold (empty tensors in the "state" section); `scored`: the evaluated weights as
  /// every rank gathered them (stage 3; null: read from the module here).
  static std::string main_payload(Disk& d, const SaveContext& c, const std::vector<std::pair<std::string, std::string>>& files,
                                  bool epoch_end, std::string& evaluated, bool optimizer_state, std::string* best_pt,
                                  const std::vector<std::string>& held = {}, const std::vector<std::string>& held_state = {},
                                  EvaluatedWeights* scored = nullptr);
  /// Stage 3's sharded best save, on every rank (collectives): the evaluated weights gathered onto rank 0 parameter
  /// by parameter from the shards (callbacks::Ema swaps its rows in), as best.pt's bytes when `export_best` and as
  /// the "evaluated" tensors when they are not the trained weights; no rank gathers the whole model. Empty
  /// elsewhere than on rank 0 (the name: on every rank).
  static EvaluatedWeights evaluated_rows(const SaveContext& c, bool export_best);
  /// save's sharded path: every rank stages its shard (its partition's optimizer state; parallel::
  /// ShardedDataParallel does not gather it) into bytes, rank 0 the common part (and best.pt with best.ckpt); every
  /// rank writes its parts (the best saves still owed first, then this one's: write_parts); the ranks agree that
  /// every file is written and fsynced; then rank 0 writes each folder's manifest last (finish). A failure: see
  /// on_write_error. With `async`, the save first settles the one in flight (settle), then hands the writes to the
  /// rank's background thread while training goes on; the manifests come at the next save or at fit end (settle).
  static void sharded(Disk& d, const SaveContext& c, const std::vector<std::pair<std::string, std::string>>& files,
                      bool epoch_end, std::function<void()> after);
  /// The settle point of an asynchronous sharded save (the next save, fit end; every rank, on the training
  /// thread): waits for this rank's write in flight, then finish. Nothing in flight: returns at once (no
  /// collective; every rank has the same saves, so the same answer).
  static void settle(Disk& d, const SaveContext& c);

 private:
  static constexpr const char* kOtherRank =
      "policytrain::checkpoint: another rank could not write its shard (its error names the file and the reason)";

  /// Every rank, once its parts of `p` are written (`failure`: this rank's, "" when none): the ranks agree whether
  /// every rank's shards (and rank 0's common parts) are written and fsynced; if so rank 0 writes each folder's
  /// manifest, the owed parts' first, and runs each part's `after` (rotation: the previous checkpoints go only
  /// once this one is complete); the ranks agree on that too. A failure: no manifest of that part (the previous
  /// checkpoint of each name stays the newest); every rank keeps the best parts to write again (retry_next_save),
  /// then on_write_error, every rank alike.
  static void finish(Disk& d, const SaveContext& c, ShardedPending& p, const std::string& failure);
};

template <class Ctx>
SaveContext SaveContext::of(Ctx& ctx) {
  auto& par = ctx.template policy<Category::parallel>();
  SaveContext c{ctx.module(), ctx.optimizer(), ctx.state()};
  c.is_main = ctx.is_main();
  c.world_size = static_cast<int64_t>(par.world_size());
  if constexpr (requires { par.rank(); }) c.rank = par.rank();
  if constexpr (requires { par.sharding().stage; }) c.stage = par.sharding().stage;
  c.owned = owned_parameters(ctx, false);
  c.ctx = &ctx;
  if constexpr (requires { ctx.flush_checks(); }) c.flush_checks = [](void* x) { static_cast<Ctx*>(x)->flush_checks(); };
  if constexpr (requires { ctx.before_checkpoint(true); })
    c.before_checkpoint = [](void* x, bool epoch_end) { static_cast<Ctx*>(x)->before_checkpoint(epoch_end); };
  if constexpr (requires { ctx.before_save(); }) c.before_save = [](void* x) { static_cast<Ctx*>(x)->before_save(); };
  if constexpr (requires { ctx.after_save(); }) c.after_save = [](void* x) { static_cast<Ctx*>(x)->after_save(); };
  if constexpr (requires { par.set_sharded_save(true); })
    c.set_sharded_save = [](void* x, bool on) {
      static_cast<Ctx*>(x)->template policy<Category::parallel>().set_sharded_save(on);
    };
  if constexpr (requires { par.parameter_shards(); })
    c.parameter_shards = [](void* x) {
      std::vector<ParameterRows> out;
      for (auto& s : static_cast<Ctx*>(x)->template policy<Category::parallel>().parameter_shards())
        out.push_back({std::move(s.name), std::move(s.rows), std::move(s.shape), s.chunk});
      return out;
    };
  if constexpr (requires { par.export_bytes(ctx.module()); })
    c.export_bytes = [](void* x, const std::function<void(size_t, const std::string&, const torch::Tensor&)>& each) {
      auto& cx = *static_cast<Ctx*>(x);
      return cx.template policy<Category::parallel>().export_bytes(cx.module(), each);
    };
  c.state_rows = [](void* x) {
    std::vector<std::pair<std::string, std::string>> out;
    static_cast<Ctx*>(x)->for_each_policy([&]<class P>(P& p) {
      if constexpr (requires { p.state_rows(); })
        for (auto& [key, param] : p.state_rows()) out.emplace_back(std::string(policytrain::policy_name<P>()) + "/" + key, param);
    });
    return out;
  };
  c.agree_any = [](void* x, bool b) { return static_cast<Ctx*>(x)->agree_any(b); };
  c.state_dict = [](void* x) { return static_cast<Ctx*>(x)->state_dict(); };
  c.with_evaluated_weights = [](void* x, const std::function<void()>& f) {
    return static_cast<Ctx*>(x)->with_evaluated_weights(f);
  };
  return c;
}


// ShardedWrites' definitions: here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL std::string DiskSave::main_payload(Disk& d, const SaveContext& c,
                                                   const std::vector<std::pair<std::string, std::string>>& files,
                                                   bool epoch_end, std::string& evaluated, bool optimizer_state,
                                                   std::string* best_pt, const std::vector<std::string>& held,
                                                   const std::vector<std::string>& held_state, EvaluatedWeights* scored) {
  StateDict st = c.state_dict(c.ctx);
  for (const auto& k : held_state) {
    auto it = st.find(k);
    if (it != st.end()) it->second = torch::empty({0}, it->second.options().requires_grad(false));
  }
  const auto& s = c.state;
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
    if (scored) {
      evaluated = scored->name;
      if (export_best) *best_pt = std::move(scored->best_pt);
      evaluated_weights = std::move(scored->tensors);
    } else {
      evaluated = c.with_evaluated_weights(c.ctx, [&] {
        if (export_best) *best_pt = export_bytes(checkpoint::detail::named_tensors(c.module));
        torch::NoGradGuard g;
        for (const auto& [k, v] : checkpoint::detail::named_tensors(c.module)) evaluated_weights.emplace_back(k, v.detach().clone());
      });
    }
    if (evaluated == "model") evaluated_weights.clear();  // the model section holds them
  }
  if (optimizer_state) return make_payload(c.module, c.optimizer, st, d.o_.save, evaluated_weights);
  auto& opt = c.optimizer;
  auto aside = std::move(opt.state());  // the shards hold it
  opt.state().clear();
  struct Back {
    decltype(aside)& a;
    torch::optim::Optimizer& o;
    ~Back() { o.state() = std::move(a); }
  } back{aside, opt};
  return make_payload(c.module, opt, st, d.o_.save, evaluated_weights, held);
}

POLICYTRAIN_DECL void DiskSave::sharded(Disk& d, const SaveContext& c,
                                        const std::vector<std::pair<std::string, std::string>>& files, bool epoch_end,
                                        std::function<void()> after) {
  const auto t0 = Disk::Clock::now();
  const int64_t world = c.world_size, step = c.state.global_step;
  const int64_t rank = c.rank, stage = c.stage;
  const bool async = d.o_.async;
  if (async) settle(d, c);  // one save in flight: the previous one is complete (or its failure agreed) first
  auto part = std::make_shared<ShardedPart>();
  part->files = files;
  part->step = step;
  part->world = world;
  part->stage = stage;
  part->after = std::move(after);
  auto p = std::make_shared<ShardedPending>();
  // Stage 3 (fully sharded parameters): each rank's shard holds its rows of the parameters too (and of the Trainer
  // state's entries that are rows of them: callbacks::Ema's average), the common part an empty tensor in their
  // place, and the manifest their layout. A best file's export and evaluated weights are gathered onto rank 0
  // parameter by parameter (evaluated_rows): no rank holds the whole model for them.
  std::vector<std::string> held, held_state;
  std::vector<std::pair<std::string, torch::Tensor>> rows, state_rows;
  nlohmann::json model_layout, state_layout;
  std::map<std::string, std::pair<std::vector<int64_t>, int64_t>> param_shape;  // name -> (shape, chunk)
  if (c.parameter_shards) {
    for (const auto& s : c.parameter_shards(c.ctx)) {
      held.push_back(s.name);
      const bool half = d.o_.save.half_weights && s.rows.is_floating_point();
      rows.emplace_back(s.name, half ? s.rows.to(torch::kHalf) : s.rows);
      model_layout.push_back({{"name", s.name}, {"shape", s.shape}, {"dtype", dtype_str(rows.back().second)},
                              {"rule", "dim0"}, {"world_size", world}, {"chunk", s.chunk}});
      param_shape[s.name] = {s.shape, s.chunk};
    }
  }
  part->model = model_layout;
  const bool best = std::any_of(files.begin(), files.end(), [](const auto& f) { return f.second == "best"; });
  {
    struct Restore {
      const SaveContext& c;
      ~Restore() {
        if (c.after_save) c.after_save(c.ctx);
        if (c.set_sharded_save) c.set_sharded_save(c.ctx, false);
      }
    };
    if (c.set_sharded_save) c.set_sharded_save(c.ctx, true);
    Restore restore{c};
    if (c.before_save) c.before_save(c.ctx);
    d.last_saved_step_ = step;
    try {
      // The Trainer state's rows (known once before_save ran: callbacks::Ema writes rows in a sharded save only).
      if (!held.empty() && c.state_rows) {
        const auto entries = c.state_rows(c.ctx);
        const StateDict st = entries.empty() ? StateDict() : c.state_dict(c.ctx);
        for (const auto& [key, param] : entries) {
          const auto it = st.find(key);
          const auto shape = param_shape.find(param);
          if (it == st.end() || shape == param_shape.end()) continue;  // not a sharded parameter's: stays in the common part
          held_state.push_back(key);
          state_rows.emplace_back(key, it->second.detach());
          state_layout.push_back({{"name", key}, {"param", param}, {"shape", shape->second.first},
                                  {"dtype", dtype_str(it->second)}, {"rule", "dim0"}, {"world_size", world},
                                  {"chunk", shape->second.second}});
        }
      }
      part->state = state_layout;
      EvaluatedWeights scored;
      const bool gathered = best && !held.empty() && c.export_bytes;
      if (gathered) {
        const bool export_best = d.o_.export_best && std::any_of(files.begin(), files.end(), [](const auto& f) {
          return Layout::parse(f.first).kind == Layout::Kind::best;
        });
        scored = evaluated_rows(c, export_best);
      }
      part->shard = std::make_shared<const std::string>(shard_payload(c.optimizer, c.owned, part->indices, rows, state_rows));
      if (c.is_main) {
        std::string evaluated, best_pt;
        part->payload = std::make_shared<const std::string>(main_payload(d, c, files, epoch_end, evaluated, false, &best_pt,
                                                                         held, held_state, gathered ? &scored : nullptr));
        if (!best_pt.empty()) part->best_pt = std::make_shared<const std::string>(std::move(best_pt));
        part->meta = d.make_meta(epoch_end ? c.state.epoch + 1 : c.state.epoch, epoch_end ? 0 : c.state.batch_in_epoch,
                                 c.state,
                                 d.fingerprint_.is_null() ? d.fingerprint_of(c.module, c.optimizer, c.world_size)
                                                          : nlohmann::json(),
                                 evaluated);
      }
    } catch (const CheckpointError& e) {
      p->failure = e.what();
    }
  }
  part->params = param_layout(c.optimizer);
  d.last_write_ = Disk::Clock::now();
  // Every rank prunes alike: the ranks' owed parts and top-k lists are the same.
  d.prune_owed(d.sharded_owed_, files, [](std::shared_ptr<ShardedPart>& e) -> ShardedPart& { return *e; });
  p->parts = std::exchange(d.sharded_owed_, {});
  p->parts.push_back(std::move(part));
  if (async) {
    if (p->failure.empty()) ShardedWrites::submit(d, p, rank, c.is_main);
    d.pending_ = std::move(p);
    d.last_save_seconds_ = std::chrono::duration<double>(Disk::Clock::now() - t0).count();
    return;
  }
  if (p->failure.empty()) {
    try {
      ShardedWrites::write_parts(d.layout_, *p, rank, c.is_main);
    } catch (const CheckpointError& e) {
      p->failure = e.what();
    }
  }
  if (const auto& hook = sharded_probe().after_shard_written) hook(step, rank);
  finish(d, c, *p, p->failure);
  d.last_save_seconds_ = std::chrono::duration<double>(Disk::Clock::now() - t0).count();
}

POLICYTRAIN_DECL EvaluatedWeights DiskSave::evaluated_rows(const SaveContext& c, bool export_best) {
  EvaluatedWeights e;
  // Whose weights scored is known without gathering anything (a swap in and out, on every rank alike); the
  // "evaluated" tensors are kept on rank 0 only when they are not the trained weights, which the model section holds.
  e.name = c.with_evaluated_weights(c.ctx, [] {});
  const bool keep = e.name != "model";
  if (!export_best && !keep) return e;
  std::function<void(size_t, const std::string&, const torch::Tensor&)> each;
  if (keep)
    each = [&e](size_t, const std::string& name, const torch::Tensor& t) { e.tensors.emplace_back(name, t.detach().clone()); };
  c.with_evaluated_weights(c.ctx, [&] { e.best_pt = c.export_bytes(c.ctx, each); });
  if (!export_best) e.best_pt.clear();
  return e;
}

POLICYTRAIN_DECL void DiskSave::settle(Disk& d, const SaveContext& c) {
  if (!d.pending_) return;
  const auto p = std::exchange(d.pending_, nullptr);
  std::string failure = d.finish_async_write();
  if (failure.empty()) failure = p->failure;
  finish(d, c, *p, failure);
}

POLICYTRAIN_DECL void DiskSave::finish(Disk& d, const SaveContext& c, ShardedPending& p, const std::string& failure) {
  if (c.agree_any(c.ctx, !failure.empty()))
    return ShardedWrites::failed(d, p, failure.empty() ? std::string(kOtherRank) : failure);
  std::string manifest_failure;
  if (c.is_main)
    for (const auto& part : p.parts) {
      manifest_failure = d.finish_sharded(part->files, part->meta, part->common, part->step, part->world, part->stage,
                                          part->params, part->model, part->state, part->after, part->best_pt.get());
      if (!manifest_failure.empty()) break;
    }
  if (c.agree_any(c.ctx, !manifest_failure.empty())) return ShardedWrites::failed(d, p, manifest_failure);
}

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

// Disk's members that go through DiskSave: here header-only, in <policytrain/src.hpp> with separate compilation.
#if POLICYTRAIN_DEFINE
namespace policytrain::checkpoint {

POLICYTRAIN_DECL bool Disk::fit_begin_erased(const detail::SaveContext& c, int64_t val_every_steps) {
  last_write_ = Clock::now();
  quiet_ = !c.is_main && !o_.log_every_rank && !o_.sharded;
  if (!enabled()) return false;
  if (pending_) { (void)finish_async_write(); pending_.reset(); }  // a sharded save of a fit that threw
  if (c.is_main) {
    // One job per run directory: `run.lock` is held until fit end (or this policy's end, after an exception),
    // taken before anything in the directory is touched.
    std::error_code ec;
    std::filesystem::create_directories(o_.directory, ec);  // Layout::prepare reports a failure
    if (!ec) lock_ = RunLock::acquire(o_.directory, [this](const std::string& m) { say("{}", m); });
    layout_.prepare();
  }
  // Top-k files are named after the epoch that scored (best-e<n>.ckpt): one per epoch, not per step validation.
  if (o_.best && o_.top_k > 1 && val_every_steps > 0)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::checkpoint::Disk",
        policytrain::detail::format("top_k is {} and the fit validates every {} steps; top-k files are named after "
                                    "epochs", o_.top_k, val_every_steps),
        {}, "keep top_k at 1 (best.ckpt) in a run validated by steps, or validate at epoch ends"));
  // Re-read at every fit's begin: a param group added (add_param_group) since the last fit is part of the run
  // the next checkpoints record, so that they resume with the optimizer built as they were written. A group's
  // hyper-parameters stay those of the fit it first appeared in (a schedule has moved the momentum meanwhile;
  // the run is the same): refresh_fingerprint.
  auto fresh = fingerprint_of(c.module, c.optimizer, c.world_size);
  fingerprint_ = fingerprint_.is_null() ? std::move(fresh) : refresh_fingerprint(fingerprint_, fresh);
  return true;
}

POLICYTRAIN_DECL void Disk::after_resume(bool continued, bool at_zero, bool is_main) {
  // A new run from step 0 must not share the directory with another run's files, whether it loaded nothing or took
  // its weights from a file (weights only, which may be one of them: its weights are in the model already, and the
  // file moves with the others): its last.ckpt and best.ckpt would overwrite that run's.
  if (!continued && run_id_.empty()) {
    run_id_ = detail::new_run_id();
    if (at_zero && (resumed_from_.empty() || o_.weights_only) && is_main) set_aside_other_runs();
  }
}

POLICYTRAIN_DECL void Disk::step_end_erased(const detail::SaveContext& c, bool validated) {
  const int64_t step = c.state.global_step;
  if (validated) {
    std::vector<std::pair<std::string, std::string>> files;
    if (o_.last) files.emplace_back(Layout::last(), "last");
    if (std::exchange(pending_best_, false)) files.emplace_back(Layout::best(), "best");
    const bool periodic = o_.every_steps > 0 && step % o_.every_steps == 0;
    if (periodic) files.emplace_back(Layout::step(step), "step");
    if (files.empty()) return;
    save_erased(c, files, false, [this, periodic] {
      if (periodic) layout_.rotate(run_id_, o_.keep);
    });
  } else if (o_.every_steps > 0 && step % o_.every_steps == 0) {
    save_erased(c, {{Layout::step(step), "step"}}, false, [this] { layout_.rotate(run_id_, o_.keep); });
  } else if (o_.every_seconds > 0 && o_.last &&
             c.agree_any(c.ctx, std::chrono::duration<double>(Clock::now() - last_write_).count() >= o_.every_seconds)) {
    // Agreed: every rank saves at the same step (a sharded optimizer's state is gathered by all of them).
    save_erased(c, {{Layout::last(), "last"}}, false, {});
  }
}

POLICYTRAIN_DECL void Disk::epoch_end_erased(const detail::SaveContext& c, bool finished) {
  const int64_t epoch = c.state.epoch;
  std::vector<std::pair<std::string, std::string>> files;
  if (o_.last) files.emplace_back(Layout::last(), "last");
  if (std::exchange(pending_best_, false)) files.emplace_back(Layout::best(), "best");
  std::string dropped;
  if (std::exchange(pending_top_, false)) {
    files.emplace_back(Layout::best_top(epoch + 1), "best");
    if (static_cast<int64_t>(top_.size()) > o_.top_k) {
      dropped = Layout::best_top(top_.back().second + 1);
      top_.pop_back();
    }
  }
  const bool periodic = o_.every_epochs > 0 && (epoch + 1) % o_.every_epochs == 0;
  if (periodic) files.emplace_back(Layout::epoch(epoch + 1), "epoch");
  if (files.empty()) return;
  save_erased(c, files, finished, [this, dropped, periodic] {
    if (!dropped.empty()) layout_.remove(dropped);
    if (periodic) layout_.rotate(run_id_, o_.keep);
  });
}

POLICYTRAIN_DECL void Disk::fit_end_erased(const detail::SaveContext& c) {
  // Every rank takes part in the save (it may gather a sharded optimizer's state); the main rank writes. There
  // is no next save to retry at: a failure of the last write stops under either on_write_error.
  finishing_ = true;
  struct Finished {
    bool& f;
    ~Finished() { f = false; }
  } finished{finishing_};
  const bool save_last = o_.last && last_saved_step_ != c.state.global_step;
  // A best save that failed under retry_next_save is written at this last save, with last.ckpt or alone. Its
  // bytes are on the main rank (every rank's with sharded saves, which every rank knows of alike): ask the others.
  bool owed = !owed_.empty() || !sharded_owed_.empty();
  if (!save_last && !o_.sharded && o_.best && o_.on_write_error == OnWriteError::retry_next_save)
    owed = c.agree_any(c.ctx, owed);
  if (save_last || owed)
    save_erased(c, save_last ? std::vector<std::pair<std::string, std::string>>{{Layout::last(), "last"}}
                             : std::vector<std::pair<std::string, std::string>>{}, false, {});
  // The last asynchronous write is on disk (or its failure agreed and raised) when fit returns; a sharded one
  // has its manifest.
  if (o_.sharded) settle_sharded(c);
  else settle_write(c, c.is_main ? finish_async_write() : std::string());
  struct Release {
    std::shared_ptr<RunLock>& lock;
    ~Release() { lock.reset(); }
  } release{lock_};  // the directory is free once the final files are written
  // A stop on a signal (callbacks::Preemption) leaves mid-run weights: the run is not over, and final.pt (a
  // finished run's weights) would pass them off as its result; the resumed run exports them at its end. (Every rank
  // agreed on the stop, so every rank returns here alike.)
  if (!o_.export_final || c.state.stop_at_step) return;
  // The export is a write like the others: its failure is agreed, and stops every rank with its message. At stage 3
  // it was written before the model was gathered (on_fit_begin's before_unshard): its failure is settled here.
  std::string failure;
  if (final_streamed_) {
    failure = *std::exchange(final_streamed_, std::nullopt);
  } else if (c.is_main) {
    try {
      said_final(c.with_evaluated_weights(c.ctx, [&] { export_weights(c.module, layout_.path(Layout::final_export())); }));
    } catch (const CheckpointError& e) {
      failure = e.what();
    }
  }
  settle_write(c, failure);
}

POLICYTRAIN_DECL void Disk::save_erased(const detail::SaveContext& c,
                                        const std::vector<std::pair<std::string, std::string>>& files, bool epoch_end,
                                        std::function<void()> after) {
  // A deferred check (precision's non-finite loss) surfaces before weights it would condemn are written.
  if (c.flush_checks) c.flush_checks(c.ctx);
  // Logs kept beside the run (callbacks::MetricsLog) hold every row up to this step before the file exists, so
  // that a resume from it finds no gap in them (rows written after it are dropped when they are reopened).
  if (c.before_checkpoint) c.before_checkpoint(c.ctx, epoch_end);
  if (o_.sharded) return detail::DiskSave::sharded(*this, c, best_first(files), epoch_end, std::move(after));
  std::string failure;
  {
    // Every rank: a sharded optimizer (parallel::ShardedDataParallel) gathers its whole state on the main rank
    // here (a collective), and lets the other ranks' parts go again once the payload holds them.
    struct AfterSave {
      const detail::SaveContext& c;
      ~AfterSave() {
        if (c.after_save) c.after_save(c.ctx);
      }
    };
    if (c.before_save) c.before_save(c.ctx);
    AfterSave after_save{c};
    last_saved_step_ = c.state.global_step;
    if (c.is_main) failure = write_main(c, best_first(files), epoch_end, std::move(after));
    else last_write_ = Clock::now();
  }
  if (c.agree_any(c.ctx, !failure.empty())) write_failed(failure);
}

POLICYTRAIN_DECL std::string Disk::write_main(const detail::SaveContext& c,
                                              const std::vector<std::pair<std::string, std::string>>& files,
                                              bool epoch_end, std::function<void()> after) {
  const auto t0 = Clock::now();
  std::string evaluated, best_pt;
  std::string payload = detail::DiskSave::main_payload(*this, c, files, epoch_end, evaluated, true, &best_pt);
  const int64_t epoch = epoch_end ? c.state.epoch + 1 : c.state.epoch;
  const int64_t batch = epoch_end ? 0 : c.state.batch_in_epoch;
  return write_checkpoint(files, epoch, batch, c.state, std::move(payload), std::move(best_pt),
                          fingerprint_.is_null() ? fingerprint_of(c.module, c.optimizer, c.world_size) : nlohmann::json(),
                          std::move(after), t0, evaluated);
}

POLICYTRAIN_DECL nlohmann::json Disk::fingerprint_of(torch::nn::Module& module, torch::optim::Optimizer& opt,
                                                     int64_t world_size) const {
  RunInfo run = o_.run;
  if (run.world_size == 0) run.world_size = world_size;
  return run_fingerprint(module, opt, run);
}

POLICYTRAIN_DECL void Disk::settle_sharded(const detail::SaveContext& c) { detail::DiskSave::settle(*this, c); }

}  // namespace policytrain::checkpoint
#endif
