#pragma once
/// \file
/// checkpoint::Disk's save steps that need the Trainer context (included by checkpoint/disk.hpp): the main rank's
/// payload, and the sharded save (Options::sharded; the files: checkpoint/sharded.hpp), in which every rank writes
/// its optimizer partition, rank 0 the common part, the ranks agree, then rank 0 writes each manifest last.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <policytrain/checkpoint/disk.hpp>
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
  static void sharded(Disk& d, Ctx& ctx, const std::vector<std::pair<std::string, std::string>>& files, bool epoch_end,
                    std::function<void()> after) {
    const auto t0 = Disk::Clock::now();
    auto& par = ctx.template policy<Category::parallel>();
    const int64_t world = par.world_size(), step = ctx.state().global_step;
    int64_t rank = 0, stage = 0;
    if constexpr (requires { par.rank(); }) rank = par.rank();
    if constexpr (requires { par.sharding().stage; }) stage = par.sharding().stage;
    std::string failure;
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
        std::vector<int64_t> indices;
        const std::string shard = shard_payload(ctx.optimizer(), owned_parameters(ctx, false), indices);
        for (const auto& f : files) write_shard(d.layout_.path(f.first), step, rank, world, shard, indices);
        if (ctx.is_main()) {
          std::string evaluated;
          const std::string payload = main_payload(d, ctx, files, epoch_end, evaluated, false);
          meta = d.make_meta(epoch_end ? ctx.state().epoch + 1 : ctx.state().epoch,
                           epoch_end ? 0 : ctx.state().batch_in_epoch, ctx.state(),
                           d.fingerprint_.is_null() ? d.fingerprint(ctx) : nlohmann::json(), evaluated);
          common = d.write_common(files, meta, payload, step);
        }
      } catch (const CheckpointError& e) {
        failure = e.what();
      }
    }
    d.last_write_ = Disk::Clock::now();
    if (const auto& hook = sharded_probe().after_shard_written) hook(step, rank);
    if (ctx.agree_any(!failure.empty())) {  // no manifest: the previous checkpoint of each name stays the newest
      d.write_failed(failure.empty() ? std::string("policytrain::checkpoint: another rank could not write its shard (its "
                                                 "error names the file and the reason)") : failure);
      return;
    }
    if (ctx.is_main()) failure = d.finish_sharded(files, meta, common, step, world, stage, ctx.optimizer(), std::move(after), t0);
    d.settle_write(ctx, failure);
  }
};

}  // namespace policytrain::checkpoint::detail
