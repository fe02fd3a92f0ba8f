#pragma once
/// \file
/// checkpoint::Disk's non-template members (included by checkpoint/disk.hpp, which a user includes): defined here
/// header-only, in <policytrain/src.hpp> with separate compilation. The resume policy (which file a resume loads,
/// falling back past bad ones), the set-aside of another run's files, the metadata of a save, the synchronous and
/// asynchronous writes and what a failed one does (on_write_error).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <policytrain/detail/format.hpp>
#include <policytrain/checkpoint/disk.hpp>

namespace policytrain::checkpoint {

#if POLICYTRAIN_DEFINE
POLICYTRAIN_DECL Disk::Disk(const Disk&) = default;
POLICYTRAIN_DECL Disk::Disk(Disk&&) noexcept = default;
POLICYTRAIN_DECL Disk& Disk::operator=(const Disk&) = default;
POLICYTRAIN_DECL Disk& Disk::operator=(Disk&&) noexcept = default;
POLICYTRAIN_DECL Disk::~Disk() = default;

POLICYTRAIN_DECL Disk::Disk(Options o) : o_(std::move(o)), layout_(o_.directory) {
  if (!o_.settings.empty() && !nlohmann::json::accept(o_.settings))
    throw std::invalid_argument(policytrain::detail::error_message("policytrain::checkpoint::Disk", "settings is not valid JSON; pass a JSON object as text"));
  // The settings sit one level inside the metadata, whose depth a reader bounds (kMaxMetaDepth).
  if (detail::json_too_deep(o_.settings, kMaxMetaDepth - 1) != std::string_view::npos)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::checkpoint::Disk", policytrain::detail::format(
            "settings nests arrays and objects more "
                                            "than {} levels deep; a checkpoint reader refuses metadata deeper than {}",
                                            kMaxMetaDepth - 1, kMaxMetaDepth)));
  if (o_.sharded && o_.save.half_optimizer)
    throw std::invalid_argument(policytrain::detail::error_message(
        "policytrain::checkpoint::Disk", "Options::sharded and Options::save.half_optimizer are both set",
        "one of them: a shard stores the optimizer state as it is", "unset save.half_optimizer (or sharded)"));
}

POLICYTRAIN_DECL void Disk::record_validation(TrainState& s, const Metrics& m) {
  if (!enabled()) return;
  history_.emplace_back(m.loss, m.accuracy);
  if (!o_.best) return;
  const double v = m.get(o_.monitor.metric);
  const int64_t epoch = s.epoch;
  if (o_.monitor.improves(v, best_metric_)) {
    best_metric_ = v;
    best_epoch_ = epoch;
    s.best_metric = v;
    s.best_epoch = epoch;
    s.best_step = s.global_step;
    // A validation before the first step (FitOptions::eval_on_start) sets the value to beat; the initial weights
    // are not saved as the best (nanoGPT saves nothing at iteration 0).
    pending_best_ = s.global_step > 0;
  }
  if (o_.top_k > 1 && std::isfinite(v) &&
      (static_cast<int64_t>(top_.size()) < o_.top_k || o_.monitor.improves(v, top_.back().first))) {
    top_.emplace_back(v, epoch);
    std::stable_sort(top_.begin(), top_.end(), [&](auto& a, auto& b) { return o_.monitor.better(a.first, b.first); });
    pending_top_ = true;
  }
}

POLICYTRAIN_DECL StateDict Disk::state_dict() const {
  auto hist = torch::zeros({static_cast<int64_t>(history_.size()), 2}, torch::kDouble);
  for (size_t i = 0; i < history_.size(); ++i) {
    hist[static_cast<int64_t>(i)][0] = history_[i].first;
    hist[static_cast<int64_t>(i)][1] = history_[i].second;
  }
  auto top = torch::zeros({static_cast<int64_t>(top_.size()), 2}, torch::kDouble);
  for (size_t i = 0; i < top_.size(); ++i) {
    top[static_cast<int64_t>(i)][0] = top_[i].first;
    top[static_cast<int64_t>(i)][1] = static_cast<double>(top_[i].second);
  }
  return {{"best_metric", scalar_tensor(best_metric_)}, {"best_epoch", scalar_tensor(best_epoch_)},
          {"history", hist}, {"top_k", top}};
}

POLICYTRAIN_DECL void Disk::load_state_dict(const StateDict& d) {
  best_metric_ = state_double(d, "best_metric");
  best_epoch_ = state_int(d, "best_epoch");
  auto hist = state_at(d, "history").to(torch::kDouble).contiguous();
  history_.clear();
  for (int64_t i = 0; i < hist.size(0); ++i) history_.emplace_back(hist[i][0].item<double>(), hist[i][1].item<double>());
  auto top = state_at(d, "top_k").to(torch::kDouble).contiguous();
  top_.clear();
  for (int64_t i = 0; i < top.size(0); ++i) top_.emplace_back(top[i][0].item<double>(), static_cast<int64_t>(top[i][1].item<double>()));
}

POLICYTRAIN_DECL void Disk::write_files(const std::vector<std::pair<std::string, std::string>>& files, nlohmann::json& meta,
                                   const std::string& payload, int64_t epoch, int64_t step,
                                   std::atomic<int64_t>* written) const {
  for (const auto& [file, kind] : files) {
    meta["kind"] = kind;
    write_file(layout_.path(file), meta, payload);
    if (written) ++*written;
    if (o_.verbose) say("policytrain::checkpoint: wrote {} (epoch {}, step {})", layout_.path(file).string(), epoch, step);
  }
}

POLICYTRAIN_DECL std::string Disk::other_run(const std::filesystem::path& file, const nlohmann::json& meta) const {
  if (!meta.contains("fingerprint")) {
    say("policytrain::checkpoint: {} records no run fingerprint (written before policytrain recorded one); its "
        "settings cannot be compared", file.string());
    return "";
  }
  check_fingerprint(file, meta["fingerprint"]);
  const auto diff = fingerprint_differences(compared(meta["fingerprint"]), compared(fingerprint_));
  if (diff.empty()) return "";
  return policytrain::detail::error_message(
      "policytrain::checkpoint",
      policytrain::detail::format("{}: belongs to another run: {}", file.string(), fmt::join(diff, "; ")), {},
      "to start a new run from its weights, resume with weights only (checkpoint::Disk::Options::weights_only)");
}

POLICYTRAIN_DECL bool Disk::same_fingerprint(const std::filesystem::path& file, const nlohmann::json& meta) const {
  if (!meta.contains("fingerprint")) return true;
  try {
    check_fingerprint(file, meta["fingerprint"]);
    return fingerprint_differences(compared(meta["fingerprint"]), compared(fingerprint_)).empty();
  } catch (const CheckpointError&) {
    return false;
  }
}

POLICYTRAIN_DECL void Disk::load_one(const Access& a, const std::filesystem::path& file, const nlohmann::json& meta) {
  if (o_.weights_only) {
    load_weights(a.module, file, Weights::trained);
    resumed_from_ = file;
    say("policytrain::checkpoint: loaded the weights of {} (step {}); a new run starts at step 0", file.string(),
        meta_int(file, meta, "global_step", 0));
    return;
  }
  if (const std::string why = other_run(file, meta); !why.empty()) throw CheckpointError(why);
  std::vector<std::unique_ptr<torch::optim::OptimizerOptions>> asked;
  for (const auto& g : a.optimizer.param_groups()) asked.push_back(g.options().clone());
  (void)load(a, file);
  reconcile_hyperparameters(a.optimizer, asked, meta.contains("fingerprint") ? meta["fingerprint"] : nlohmann::json());
  resumed_from_ = file;
  // The run continues under its id (a file written before run ids were recorded: a new one).
  const std::string id = meta_string(file, meta, "run_id", "");
  run_id_ = id.empty() ? detail::new_run_id() : id;
}

POLICYTRAIN_DECL nlohmann::json Disk::compared(const nlohmann::json& fingerprint) const {
  if (o_.hyperparameters == Hyperparameters::refuse || !fingerprint.is_object() || !fingerprint.contains("optimizer") ||
      !fingerprint["optimizer"].is_object() || !fingerprint["optimizer"].contains("param_groups") ||
      !fingerprint["optimizer"]["param_groups"].is_array())
    return fingerprint;
  // What makes it the same run stays: the family, and each group's parameters; the hyper-parameters are reconciled.
  nlohmann::json f = fingerprint;
  for (auto& g : f["optimizer"]["param_groups"]) {
    if (!g.is_object()) continue;
    nlohmann::json kept = nlohmann::json::object();
    for (const char* k : {"params", "elements"})
      if (g.contains(k)) kept[k] = g[k];
    g = std::move(kept);
  }
  return f;
}

POLICYTRAIN_DECL const nlohmann::json* Disk::recorded_group(const nlohmann::json& fingerprint, size_t g) {
  if (!fingerprint.is_object() || !fingerprint.contains("optimizer") || !fingerprint["optimizer"].is_object() ||
      !fingerprint["optimizer"].contains("param_groups") || !fingerprint["optimizer"]["param_groups"].is_array() ||
      g >= fingerprint["optimizer"]["param_groups"].size() || !fingerprint["optimizer"]["param_groups"][g].is_object())
    return nullptr;
  return &fingerprint["optimizer"]["param_groups"][g];
}

POLICYTRAIN_DECL void Disk::reconcile_hyperparameters(
    torch::optim::Optimizer& opt, const std::vector<std::unique_ptr<torch::optim::OptimizerOptions>>& asked,
    const nlohmann::json& recorded) {
  // refuse (the default): the fingerprint has already refused a file with other hyper-parameters than this run's, so
  // what differs here is what a schedule moved during the run (onecycle's or a warmup's beta1): nothing to say, and
  // the fingerprint stays the one the run began with (recording the moved value made the next resume refuse the
  // run's own checkpoints as another run's).
  if (o_.hyperparameters == Hyperparameters::refuse) return;
  const bool take = o_.hyperparameters == Hyperparameters::take;
  std::vector<std::string> said;
  auto& groups = opt.param_groups();
  for (size_t g = 0; g < groups.size() && g < asked.size(); ++g) {
    const auto [family_file, loaded_values] = detail::optimizer_options(groups[g].options());
    const auto [family_asked, asked_values] = detail::optimizer_options(*asked[g]);
    if (family_file != family_asked) continue;  // refused as another run before the load
    // The checkpoint's values are the run's base values, which its fingerprint recorded: the loaded optimizer's
    // options are those of the step it was saved at, where a schedule may have moved the momentum (onecycle's beta1),
    // which is no difference from this run's (a file without a fingerprint: the loaded options).
    const nlohmann::json* base = recorded_group(recorded, g);
    const nlohmann::json& file_values = base ? *base : loaded_values;
    bool differs = false;
    for (const auto& [k, v] : file_values.items()) {
      if (k == "params" || k == "elements" || !asked_values.contains(k) || asked_values[k] == v) continue;
      differs = true;
      said.push_back(policytrain::detail::format("param group {} {} {} {} (the checkpoint's {}; this run's optimizer "
                                                 "asks {})",
                                                 g, k, (take ? asked_values[k] : v).dump(), take ? "taken" : "kept",
                                                 v.dump(), asked_values[k].dump()));
      // Later checkpoints record the values the run goes on with.
      if (!take && fingerprint_.contains("optimizer") && fingerprint_["optimizer"].contains("param_groups") &&
          g < fingerprint_["optimizer"]["param_groups"].size() &&
          fingerprint_["optimizer"]["param_groups"][g].contains(k))
        fingerprint_["optimizer"]["param_groups"][g][k] = v;
    }
    if (take && differs) {
      // This run's options, at the checkpoint's lr (the schedule's to set, from its own restored state).
      auto mine = asked[g]->clone();
      mine->set_lr(groups[g].options().get_lr());
      groups[g].set_options(std::move(mine));
    }
  }
  if (said.empty()) return;
  say("policytrain::checkpoint: resumed with other optimizer settings than the checkpoint's: {}{}", fmt::join(said, "; "),
      take ? " (checkpoint::Disk::Options::hyperparameters = Hyperparameters::keep continues the checkpoint's instead)"
           : " (checkpoint::Disk::Options::hyperparameters = Hyperparameters::take takes this run's instead)");
}

POLICYTRAIN_DECL bool Disk::resume(const Access& a) {
  namespace fs = std::filesystem;
  const fs::path target = o_.resume == "auto" ? o_.directory : fs::path(o_.resume);
  std::error_code ec;
  auto resumed = [&](const fs::path& file, const nlohmann::json& meta, bool fell_back) {
    if (o_.weights_only) return;
    say("policytrain::checkpoint: resumed from {} (epoch {}, batch {}, step {}){}", file.string(),
        meta_int(file, meta, "epoch", 0), meta_int(file, meta, "batch_in_epoch", 0),
        meta_int(file, meta, "global_step", 0), fell_back ? ", the newest usable checkpoint" : "");
  };
  // A named file, or a sharded checkpoint's folder: no fallback.
  if (fs::is_regular_file(target, ec) || fs::exists(target / Layout::manifest(), ec)) {
    const auto meta = Layout::read_checkpoint_meta(target);
    load_one(a, target, meta);
    resumed(target, meta, false);
    return !o_.weights_only;
  }
  if (!fs::is_directory(target, ec)) {
    if (o_.resume != "auto")
      throw CheckpointError(policytrain::detail::error_message(
          "policytrain::checkpoint", policytrain::detail::format(
              "{}: no such file or directory to resume from", target.string())));
    say("policytrain::checkpoint: no checkpoint in {}; starting from scratch", target.string());
    return false;
  }
  const Candidates c = Layout(target).list();
  for (const auto& [file, why] : c.unreadable) say("{}; skipping it", why);
  for (const auto& folder : c.incomplete)
    say("policytrain::checkpoint: {} has no {}: a sharded save that did not finish, no checkpoint; skipping it",
        folder.string(), Layout::manifest());
  std::vector<std::string> errors;
  for (const auto& [file, why] : c.unreadable) errors.push_back(why);
  // Files of another fingerprint go on to load_one, which reports how they differ.
  const auto same = [this](const fs::path& file, const nlohmann::json& meta) { return same_fingerprint(file, meta); };
  for (const auto& [file, meta, skip] : Layout::resume_order(c, same)) {
    if (!skip.empty()) {
      say("{}; skipping it", skip);
      errors.push_back(skip);
      continue;
    }
    try {
      load_one(a, file, meta);
      resumed(file, meta, !errors.empty());
      return !o_.weights_only;
    } catch (const CheckpointError& e) {
      say("{}; falling back to the previous checkpoint", e.what());
      errors.push_back(e.what());
    }
  }
  if (errors.empty()) {
    say("policytrain::checkpoint: no checkpoint in {}; starting from scratch", target.string());
    return false;
  }
  throw CheckpointError(policytrain::detail::error_message(
      "policytrain::checkpoint", policytrain::detail::format(
          "no usable checkpoint in {}:\n  {}", target.string(),
                                    fmt::join(errors, "\n  "))));
}

POLICYTRAIN_DECL void Disk::set_aside_other_runs() {
  const SetAside moved = layout_.set_aside(o_.existing == Existing::refuse, resumed_from_);
  if (moved.files == 0) return;
  resumed_from_ = moved.resumed_from;
  say("policytrain::checkpoint: {} held {} file(s) of another run (run {}, newest step {}); moved them to {} so "
      "that this run (run {}) does not mix with them (checkpoint::Disk::Options::existing = rotate; refuse stops "
      "instead){}", o_.directory.string(), moved.files, moved.run_id.empty() ? "without id" : moved.run_id,
      moved.newest_step, moved.destination.string(), run_id_,
      moved.resumed_from_moved ? policytrain::detail::format("; the file this run took its weights from is among them, now {}",
                                                             moved.resumed_from.string())
                               : std::string());
}

POLICYTRAIN_DECL void Disk::write_failed(const std::string& failure) {
  const std::string what =
      failure.empty() ? policytrain::detail::error_message("policytrain::checkpoint",
                                                           "the main rank could not write a checkpoint (its error names "
                                                           "the file and the reason)")
                      : failure;
  last_saved_step_ = -1;  // the state since the last good save is on no disk: fit end saves again
  if (o_.on_write_error == OnWriteError::stop)
    throw CheckpointError(policytrain::detail::format("{}; every rank stops (checkpoint::Disk::Options::on_write_error = stop; "
                                                      "retry_next_save trains on and writes again at the next save)", what));
  if (finishing_)
    throw CheckpointError(policytrain::detail::format("{}; every rank stops: it was the fit's last save, with none after it to "
                                                      "retry at (on_write_error = retry_next_save)", what));
  ++write_failures_;
  // The best save not written is kept (owed_: its bytes) and written first at the next save; until then best.ckpt
  // and best.pt are the previous best's, and no file on disk records the newer best.
  std::vector<std::string> owed;
  bool with_export = false;
  auto add = [&](const auto& files, bool exported) {
    for (const auto& f : files) owed.push_back(f.first);
    with_export = with_export || exported;
  };
  for (const auto& b : owed_) add(b.files, b.best_pt != nullptr);
  for (const auto& p : sharded_owed_) add(p->files, p->best_pt != nullptr);
  const std::string kept = owed.empty() ? std::string()
                                        : policytrain::detail::format(
                                              ", first the best checkpoint it could not write ({}{}), kept in memory until then",
                                              fmt::join(owed, ", "), with_export ? ", with best.pt" : "");
  say("{}; training goes on and the next save writes again{} (checkpoint::Disk::Options::on_write_error = "
      "retry_next_save)", what, kept);
}

POLICYTRAIN_DECL std::string Disk::finish_async_write() {
  if (!writer_) return "";
  try {
    writer_->wait();
  } catch (const CheckpointError& e) {
    // The job's best writes that failed: written first at the next save (retry_next_save).
    for (auto& b : std::exchange(*owed_slot_, {})) owed_.push_back(std::move(b));
    return e.what();
  }
  return "";
}

POLICYTRAIN_DECL bool Disk::still_owed(const std::string& name,
                                       const std::vector<std::pair<std::string, std::string>>& files) const {
  const Layout::Name n = Layout::parse(name);
  if (n.kind == Layout::Kind::best)
    return std::none_of(files.begin(), files.end(), [](const auto& f) { return f.first == Layout::best(); });
  if (n.kind == Layout::Kind::best_top)
    return std::any_of(top_.begin(), top_.end(), [&](const auto& t) { return t.second + 1 == n.number; });
  return true;
}

POLICYTRAIN_DECL void Disk::write_best(const detail::BestWrite& b, std::atomic<int64_t>& written) const {
  std::vector<StagedFile> staged;
  for (const auto& [file, kind] : b.files) {
    nlohmann::json m = b.meta;
    m["kind"] = kind;
    staged.push_back(stage_file(layout_.path(file), m, *b.payload));
  }
  if (b.best_pt) staged.emplace_back(layout_.path(Layout::best_export()), std::initializer_list<std::string_view>{*b.best_pt});
  // Nothing replaced its previous version until every file is written and fsynced: best.ckpt and best.pt are
  // both the new best's, or both the previous one's.
  for (auto& f : staged) f.commit();
  written += static_cast<int64_t>(b.files.size());
  for (const auto& f : b.files)
    if (o_.verbose)
      say("policytrain::checkpoint: wrote {} (epoch {}, step {}){}", layout_.path(f.first).string(), b.epoch, b.step,
          b.best_pt && f.first == Layout::best() ? " and " + layout_.path(Layout::best_export()).string() : std::string());
}

POLICYTRAIN_DECL void Disk::run_write(detail::SaveWrite& w, const nlohmann::json& meta, const std::string& payload,
                                      int64_t epoch, int64_t step, std::vector<detail::BestWrite>& owed_after,
                                      std::atomic<int64_t>& written) const {
  size_t i = 0;
  try {
    for (; i < w.owed.size(); ++i) write_best(w.owed[i], written);
    if (!w.best.files.empty()) write_best(w.best, written);
  } catch (const CheckpointError&) {
    // The best saves from the one that failed on (this save's included) stay owed; its other files are not
    // written: they would record a best that best.ckpt does not hold.
    owed_after.assign(std::make_move_iterator(w.owed.begin() + static_cast<std::ptrdiff_t>(i)),
                      std::make_move_iterator(w.owed.end()));
    if (!w.best.files.empty()) {
      w.best.after = std::move(w.after);
      owed_after.push_back(std::move(w.best));
    }
    throw;
  }
  for (auto& b : w.owed)
    if (b.after) b.after();
  nlohmann::json m = meta;
  write_files(w.rest, m, payload, epoch, step, &written);
  if (w.after) w.after();
}

POLICYTRAIN_DECL std::string Disk::write_checkpoint(const std::vector<std::pair<std::string, std::string>>& files, int64_t epoch,
                                             int64_t batch, const TrainState& s, std::string payload, std::string best_pt,
                                             nlohmann::json fresh_fingerprint, std::function<void()> after,
                                             Clock::time_point t0, const std::string& evaluated) {
  nlohmann::json meta = make_meta(epoch, batch, s, std::move(fresh_fingerprint), evaluated);
  std::string failure;
  // The writes: the best saves still owed, this save's best files (with best.pt), its other files.
  auto plan = [&] {
    detail::SaveWrite w;
    prune_owed(owed_, files, [](detail::BestWrite& b) -> detail::BestWrite& { return b; });
    w.owed = std::exchange(owed_, {});
    auto shared = std::make_shared<const std::string>(std::move(payload));
    for (const auto& f : files) (f.second == "best" ? w.best.files : w.rest).push_back(f);
    w.best.meta = meta;
    w.best.payload = shared;
    if (!best_pt.empty()) w.best.best_pt = std::make_shared<const std::string>(std::move(best_pt));
    w.best.epoch = epoch;
    w.best.step = s.global_step;
    w.after = std::move(after);
    return std::pair(std::move(w), shared);
  };
  if (!o_.async) {
    auto [w, shared] = plan();
    std::atomic<int64_t> written{0};
    std::vector<detail::BestWrite> still;
    try {
      run_write(w, meta, *shared, epoch, s.global_step, still, written);
    } catch (const CheckpointError& e) {
      failure = e.what();
    }
    owed_ = std::move(still);
    files_written_ += written.load();
  } else {
    if (!writer_) {
      writer_ = std::make_shared<detail::AsyncWriter>();
      written_ = std::make_shared<std::atomic<int64_t>>(0);
    }
    // The previous write finished (its failure, if any, is this save's to report; its best writes not done are
    // owed_ now); a run that stops on it starts no other.
    failure = finish_async_write();
    if (failure.empty() || (o_.on_write_error == OnWriteError::retry_next_save && !finishing_)) {
      auto [w, shared] = plan();
      writer_->submit([this, w = std::move(w), meta = std::move(meta), payload = std::move(shared), epoch,
                       step = s.global_step, slot = owed_slot_, written = written_]() mutable {
        std::vector<detail::BestWrite> still;
        try {
          run_write(w, meta, *payload, epoch, step, still, *written);
        } catch (...) {
          *slot = std::move(still);  // read by finish_async_write once the writer is waited for
          throw;
        }
      });
    }
  }
  last_write_ = Clock::now();
  last_saved_step_ = s.global_step;
  last_save_seconds_ = std::chrono::duration<double>(last_write_ - t0).count();
  return failure;
}

POLICYTRAIN_DECL std::vector<nlohmann::json> Disk::write_common(const std::vector<std::pair<std::string, std::string>>& files,
                                                                const nlohmann::json& meta, const std::string& payload,
                                                                int64_t step) {
  std::vector<nlohmann::json> out;
  for (const auto& [file, kind] : files) {
    nlohmann::json m = meta;
    m["kind"] = kind;
    m["sharded_part"] = "common";
    out.push_back(write_part(layout_.path(file) / Layout::common(step), m, payload));
  }
  return out;
}

POLICYTRAIN_DECL std::string Disk::finish_sharded(const std::vector<std::pair<std::string, std::string>>& files,
                                                  const nlohmann::json& meta, const std::vector<nlohmann::json>& common,
                                                  int64_t step, int64_t world, int64_t stage,
                                                  nlohmann::json params, const nlohmann::json& model,
                                                  const nlohmann::json& state, const std::function<void()>& after,
                                                  const std::string* best_pt) {
  try {
    // best.pt is staged before the first manifest and committed after the last: a best save's folder and its
    // export are both written, or neither (the files come best first).
    StagedFile export_pt;
    if (best_pt && std::any_of(files.begin(), files.end(), [](const auto& f) { return f.first == Layout::best(); }))
      export_pt = StagedFile(layout_.path(Layout::best_export()), {*best_pt});
    for (size_t i = 0; i < files.size(); ++i) {
      nlohmann::json m = meta;
      m["kind"] = files[i].second;
      write_manifest(layout_.path(files[i].first), std::move(m), common.at(i), step, world, stage, params, model, state);
      ++files_written_;
      if (o_.verbose)
        say("policytrain::checkpoint: wrote {} ({} shard(s) and its manifest; epoch {}, step {})",
            layout_.path(files[i].first).string(), world, meta.value("epoch", int64_t{0}), step);
    }
    export_pt.commit();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  if (after) after();
  return "";
}

POLICYTRAIN_DECL nlohmann::json Disk::make_meta(int64_t epoch, int64_t batch, const TrainState& s,
                                                nlohmann::json fresh_fingerprint, const std::string& evaluated) {
  nlohmann::json meta{{"library", "policytrain"},
                      {"library_version", kLibraryVersion},
                      {"torch_version", policytrain::detail::torch_version()},
                      {"format", kFormatVersion},
                      {"epoch", epoch},
                      {"batch_in_epoch", batch},
                      {"global_step", s.global_step},
                      {"samples_seen", s.samples_seen},
                      {"half_weights", o_.save.half_weights},
                      {"half_optimizer", o_.save.half_optimizer},
                      {"created_unix_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::system_clock::now().time_since_epoch()).count()}};
  nlohmann::json hist = nlohmann::json::array();
  for (const auto& [l, a] : history_) hist.push_back({{"loss", l}, {"accuracy", a}});
  meta["history"] = hist;
  if (o_.best) meta["best"] = {{"metric", o_.monitor.metric}, {"mode", to_string(o_.monitor.effective_mode())},
                               {"value", std::isfinite(best_metric_) ? nlohmann::json(best_metric_) : nlohmann::json()},
                               {"epoch", best_epoch_}};
  if (!evaluated.empty()) meta["evaluated"] = evaluated;  // "model", or the policy whose weights were evaluated
  if (!o_.settings.empty()) meta["settings"] = nlohmann::json::parse(o_.settings);
  if (run_id_.empty()) run_id_ = detail::new_run_id();  // a save outside fit
  meta["run_id"] = run_id_;
  meta["fingerprint"] = fingerprint_.is_null() ? std::move(fresh_fingerprint) : fingerprint_;
  return meta;
}
#endif

}  // namespace policytrain::checkpoint
