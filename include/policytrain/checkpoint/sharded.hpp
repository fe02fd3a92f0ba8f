#pragma once
/// \file
/// Sharded checkpoints (checkpoint::Disk::Options::sharded): a folder per checkpoint in which every rank writes its
/// own optimizer partition and rank 0 the common part, then rank 0 writes the manifest last by atomic rename, once
/// every rank has written and fsynced (the ranks agree on it). Names: checkpoint/layout.hpp (Layout::common,
/// shard, shard_info, manifest). Knows no Trainer context: the optimizer, the module and predicates only.
///
/// The global parameter index: the optimizer's param groups flattened in order (group 0's parameters, then group
/// 1's, ...), the same on every rank and at every world size; a shard keys each parameter's state by it
/// ("state/<index>", an OptimizerParamState::serialize archive), so that another partition picks its pieces.
///
/// The manifest (manifest.json) is the checkpoint's metadata (the fields a single file's has: global_step, epoch,
/// batch_in_epoch, run_id, fingerprint, history, kind, ...) plus "sharded":
///
///     version       1
///     world_size    the ranks that wrote it;  stage: the ZeRO stage (0: the state was not partitioned)
///     common        {file, sha256, bytes}: rank 0's part (model, Trainer state, generators, param groups)
///     shards        [{rank, file, sha256, bytes, indices}]: each rank's file and the global indices it holds
///     params        [{index, group, position, shape, dtype, file}]: every parameter of the optimizer, its shape
///                   and dtype, and the file that holds its state (null: it has none yet)
///     model         (stage 3 only: parallel::ShardedDataParallel's fully sharded parameters) [{name, shape, dtype,
///                   rule, world_size, chunk}]: the model's parameters that the shards hold rather than the common
///                   part: each rank's shard file has its rows of each in its "model" section (rule "dim0":
///                   parallel::Dim0Chunk, FSDP2's torch.chunk; rank r holds rows [min(shape[0], chunk r),
///                   min(shape[0], chunk (r + 1))), padding stripped); the common part's "model" section keeps the
///                   names in the model's order with an empty tensor in their place. Their optimizer state is
///                   chunked alike (every shard lists every index).
///     state         (stage 3, when a policy keeps per-row state of those parameters: callbacks::Ema's average)
///                   [{name, param, shape, dtype, rule, world_size, chunk}]: the Trainer state's entries (name: its
///                   key, e.g. "callbacks::Ema/average/fc.weight") that the shards hold as rows of parameter
///                   `param`, in its layout: each rank's shard file has its rows of each in its "state_rows"
///                   section; the common part's "state" section has an empty tensor in their place.
///
/// Loading verifies the manifest and the SHA-256 (io/digest.hpp) of every file it lists before anything is applied
/// (every rank checks every file, so that every rank reaches the same verdict without a collective); a missing,
/// truncated, altered or stale file is a CheckpointError naming it, the expected and the found digest. Then each
/// rank reads the common part and only the shard files holding the indices it owns now (resharding: another world
/// size or stage takes its pieces from whichever files hold them); the result is what the consolidated file gives.
#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <policytrain/checkpoint/archive.hpp>
#include <policytrain/checkpoint/export.hpp>
#include <policytrain/checkpoint/format.hpp>
#include <policytrain/checkpoint/layout.hpp>
#include <policytrain/core/state_dict.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>
#include <policytrain/io/digest.hpp>

namespace policytrain::checkpoint {

/// The version of the "sharded" object a manifest holds; a reader refuses any other.
inline constexpr int64_t kShardedVersion = 1;

/// Which parameters' state a rank writes or reads (by the parameter itself); empty: every parameter.
using OwnsParameter = std::function<bool(const torch::Tensor&)>;

/// The optimizer's parameters by global index (its param groups flattened in order).
inline std::vector<torch::Tensor> global_parameters(const torch::optim::Optimizer& opt) {
  std::vector<torch::Tensor> out;
  for (const auto& g : opt.param_groups())
    for (const auto& p : g.params()) out.push_back(p);
  return out;
}

/// Observation points of sharded saves and loads, per process, for tests (tests/unit/test_zero.cpp) and the save
/// benchmark; nothing in the library sets them.
struct ShardedProbe {
  /// Called by a rank's sharded save once its shard files (and, on rank 0, the common part) are written and
  /// fsynced, before the ranks agree on the manifest: a test SIGKILLs a rank there, a save cut between the shards
  /// and the manifest.
  /// With Options::async, it is called by the background thread once the shard is written.
  std::function<void(int64_t step, int64_t rank)> after_shard_written;
  /// Called by an asynchronous sharded save's background write before it writes anything (training goes on
  /// meanwhile): a test holds the write while steps train, makes it fail, or SIGKILLs the rank with it in flight.
  std::function<void(int64_t step, int64_t rank)> async_write_begin;
  /// The shard files whose contents this process read and deserialized (merge_optimizer), by name, in order. The
  /// digest pass (verify_sharded) streams every listed file through a 1 MiB buffer on every rank and is not counted.
  std::vector<std::string> shards_read;
};
/// This process's probe.
inline ShardedProbe& sharded_probe() {
  static ShardedProbe p;
  return p;
}

/// One rank's shard payload: the state of the parameters `owns` accepts that the optimizer holds state for, each
/// under "state/<global index>", and their indices (appended to `indices`) under "indices"; and, when `rows` is not
/// empty (stage 3), this rank's rows of the model's parameters by name in the "model" section, and of the Trainer
/// state's entries `state_rows` (by their keys) in the "state_rows" section.
POLICYTRAIN_DECL std::string shard_payload(const torch::optim::Optimizer& opt, const OwnsParameter& owns,
                                           std::vector<int64_t>& indices,
                                           const std::vector<std::pair<std::string, torch::Tensor>>& rows = {},
                                           const std::vector<std::pair<std::string, torch::Tensor>>& state_rows = {});

/// Writes `payload` with `meta` as a checkpoint-format file (header, metadata, payload; checkpoint/format.hpp)
/// atomically and fsynced; returns {file (its name), sha256, bytes}. Throws CheckpointError naming the file.
POLICYTRAIN_DECL nlohmann::json write_part(const std::filesystem::path& file, const nlohmann::json& meta,
                                           std::string_view payload);

/// A rank's part of the sharded save at optimizer step `step` into `folder` (created if needed): its shard
/// file, then the shard's digest beside it (Layout::shard_info), both atomic. Throws CheckpointError.
POLICYTRAIN_DECL void write_shard(const std::filesystem::path& folder, int64_t step, int64_t rank, int64_t world,
                                  std::string_view payload, const std::vector<int64_t>& indices);

/// The manifest's "params" without their files: every parameter of `opt` by global index, its group, position,
/// shape and dtype (taken when a save is staged: an asynchronous save's manifest is written steps later).
POLICYTRAIN_DECL nlohmann::json param_layout(const torch::optim::Optimizer& opt);

/// Rank 0, once every rank's shard of step `step` is written (agreed): reads the ranks' digests, writes the
/// manifest (`meta` plus "sharded", see the file comment) last by atomic rename, then removes the folder's files of
/// earlier saves and the digests the manifest now holds. `common`: write_part's answer for the common part;
/// `params`: param_layout's; `model`: the layout of the parameters the shards hold (stage 3; null: none); `state`:
/// of the Trainer state's entries they hold (null: none). Throws CheckpointError naming the file.
POLICYTRAIN_DECL void write_manifest(const std::filesystem::path& folder, nlohmann::json meta, const nlohmann::json& common,
                                     int64_t step, int64_t world, int64_t stage, nlohmann::json params,
                                     const nlohmann::json& model = nullptr, const nlohmann::json& state = nullptr);

/// SHA-256 of a file, streamed (a bounded buffer). Throws CheckpointError naming the file.
POLICYTRAIN_DECL std::string file_sha256(const std::filesystem::path& file);

/// Reads the manifest of `folder` and checks every file it lists: present, of its size and SHA-256. Returns the
/// manifest. Throws CheckpointError naming the file, the expected and the found digest.
POLICYTRAIN_DECL nlohmann::json verify_sharded(const std::filesystem::path& folder);

/// The common part's file of the sharded checkpoint `folder`, after verify_sharded.
POLICYTRAIN_DECL std::filesystem::path verified_common(const std::filesystem::path& folder);

/// The common part of the verified manifest `manifest` of `folder` as read (`raw`), with the model's parameters
/// that the shards hold (the manifest's "model", stage 3) and the Trainer state's entries they hold (its "state")
/// put together from every shard's rows in rank order, so that its "model" and "state" sections are a consolidated
/// save's; `raw` itself when the manifest has neither. Throws CheckpointError naming the shard file that lacks an
/// entry or whose rows do not make up its recorded shape.
POLICYTRAIN_DECL RawFile merge_model(const std::filesystem::path& folder, const nlohmann::json& manifest, RawFile raw);

/// An Optimizer::save archive: the param groups of `common_opt` (the common part's optimizer archive) and the
/// state of the global indices `wanted` accepts, read from the shard files of `manifest` that hold them (no
/// other file is read). Throws CheckpointError naming the file.
POLICYTRAIN_DECL std::string merge_optimizer(const std::filesystem::path& folder, const nlohmann::json& manifest,
                                             torch::serialize::InputArchive& common_opt,
                                             const std::function<bool(int64_t)>& wanted);

/// Reads the sharded checkpoint `folder` for a live model, optimizer and Trainer state (as read_payload does a
/// file): verified, the common part validated, the optimizer state of the parameters `owns` accepts (empty:
/// every one). Not applied (Loaded::apply). Throws CheckpointError.
POLICYTRAIN_DECL Loaded read_sharded(const std::filesystem::path& folder, const torch::nn::Module& module,
                                     torch::optim::Optimizer& optimizer, const StateDict& live_state,
                                     const OwnsParameter& owns = {});

/// Writes the sharded checkpoint `folder` as one file `out` in the single-file format (the whole optimizer state;
/// what a consolidated save writes), and, when `export_pt` is not empty, its trained weights there in the
/// torch.load-able format (checkpoint/export.hpp). Needs no model. Returns the manifest.
POLICYTRAIN_DECL nlohmann::json consolidate(const std::filesystem::path& folder, const std::filesystem::path& out,
                                            const std::filesystem::path& export_pt = {});

#if POLICYTRAIN_DEFINE
namespace detail {
[[noreturn]] inline void fail_error(const std::filesystem::path& file, const std::string& what, const std::string& expected,
                                    const std::string& fix) {
  throw CheckpointError(policytrain::detail::error_message(
      policytrain::detail::format("policytrain::checkpoint: {}", file.string()), what, expected, fix));
}
inline const char* kStaleFix =
    "the file was altered, truncated, or left by another save (a stale shard); this checkpoint is unusable: resume "
    "from an older one (auto-resume falls back by itself) or restore the file";
}  // namespace detail

POLICYTRAIN_DECL std::string shard_payload(const torch::optim::Optimizer& opt, const OwnsParameter& owns,
                                           std::vector<int64_t>& indices,
                                           const std::vector<std::pair<std::string, torch::Tensor>>& rows,
                                           const std::vector<std::pair<std::string, torch::Tensor>>& state_rows) {
  detail::OutputArchive a;
  a.write("format", c10::IValue(kShardedVersion));
  const auto params = global_parameters(opt);
  c10::List<int64_t> idx;
  for (size_t k = 0; k < params.size(); ++k) {
    if (owns && !owns(params[k])) continue;
    const auto it = opt.state().find(params[k].unsafeGetTensorImpl());
    if (it == opt.state().end()) continue;
    detail::OutputArchive sub(a.compilation_unit());
    it->second->serialize(sub);
    a.write("state/" + std::to_string(k), sub);
    idx.push_back(static_cast<int64_t>(k));
    indices.push_back(static_cast<int64_t>(k));
  }
  a.write("indices", c10::IValue(idx));
  if (!rows.empty()) detail::write_named(a, "model", rows, detail::identity);
  if (!state_rows.empty()) detail::write_named(a, "state_rows", state_rows, detail::identity);
  return detail::to_bytes(a);
}

POLICYTRAIN_DECL nlohmann::json write_part(const std::filesystem::path& file, const nlohmann::json& meta,
                                           std::string_view payload) {
  const std::string m = meta.dump();
  detail::check_meta_bounds(file, m);
  const std::string h = make_header(m, payload);
  write_atomic(file, {h, m, payload});
  io::Sha256 d;
  d.update(h);
  d.update(m);
  d.update(payload);
  return {{"file", file.filename().string()}, {"sha256", d.hex()}, {"bytes", h.size() + m.size() + payload.size()}};
}

POLICYTRAIN_DECL void write_shard(const std::filesystem::path& folder, int64_t step, int64_t rank, int64_t world,
                                  std::string_view payload, const std::vector<int64_t>& indices) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) detail::fail(folder, policytrain::detail::format("cannot create the sharded checkpoint's folder: {}", ec.message()));
  const nlohmann::json meta{{"library", "policytrain"}, {"sharded_part", "shard"}, {"format", kFormatVersion},
                            {"global_step", step}, {"rank", rank}, {"world_size", world}};
  nlohmann::json info = write_part(folder / Layout::shard(step, rank, world), meta, payload);
  info["rank"] = rank;
  info["global_step"] = step;
  info["indices"] = indices;
  write_atomic(folder / Layout::shard_info(step, rank, world), {info.dump()});
}

POLICYTRAIN_DECL nlohmann::json param_layout(const torch::optim::Optimizer& opt) {
  nlohmann::json ps = nlohmann::json::array();
  size_t k = 0;
  for (size_t g = 0; g < opt.param_groups().size(); ++g)
    for (size_t i = 0; i < opt.param_groups()[g].params().size(); ++i, ++k) {
      const auto& p = opt.param_groups()[g].params()[i];
      ps.push_back({{"index", k}, {"group", g}, {"position", i}, {"shape", p.sizes().vec()}, {"dtype", detail::dtype_str(p)}});
    }
  return ps;
}

POLICYTRAIN_DECL void write_manifest(const std::filesystem::path& folder, nlohmann::json meta, const nlohmann::json& common,
                                     int64_t step, int64_t world, int64_t stage, nlohmann::json params,
                                     const nlohmann::json& model, const nlohmann::json& state) {
  namespace fs = std::filesystem;
  std::vector<nlohmann::json> file_of(params.size());
  nlohmann::json shards = nlohmann::json::array();
  for (int64_t r = 0; r < world; ++r) {
    const fs::path info_file = folder / Layout::shard_info(step, r, world);
    nlohmann::json info;
    detail::documented_errors(info_file, [&] {
      const uint64_t size = detail::file_size_of(info_file);
      info = nlohmann::json::parse(detail::read_bytes(info_file, 0, size, size, "the shard's digest"));
      return 0;
    });
    if (info.value("global_step", int64_t{-1}) != step || info.value("rank", int64_t{-1}) != r)
      detail::fail_error(info_file, policytrain::detail::format("records step {} and rank {}",
                                                                info.value("global_step", int64_t{-1}), info.value("rank", int64_t{-1})),
                         policytrain::detail::format("step {} and rank {} (this save's)", step, r), detail::kStaleFix);
    for (const auto& k : info["indices"]) {
      const int64_t i = k.get<int64_t>();
      if (i < 0 || i >= static_cast<int64_t>(params.size()))
        detail::fail(info_file, policytrain::detail::format("lists parameter index {}, the optimizer has {}", i, params.size()));
      file_of[static_cast<size_t>(i)] = info["file"];
    }
    shards.push_back({{"rank", r}, {"file", info["file"]}, {"sha256", info["sha256"]}, {"bytes", info["bytes"]},
                      {"indices", info["indices"]}});
  }
  for (size_t k = 0; k < params.size(); ++k) params[k]["file"] = file_of[k];
  meta["sharded"] = {{"version", kShardedVersion}, {"world_size", world}, {"stage", stage}, {"common", common},
                     {"shards", shards}, {"params", std::move(params)}};
  if (!model.is_null()) meta["sharded"]["model"] = model;
  if (!state.is_null() && !state.empty()) meta["sharded"]["state"] = state;
  const std::string text = meta.dump();
  detail::check_meta_bounds(folder / Layout::manifest(), text);
  write_atomic(folder / Layout::manifest(), {text});  // the checkpoint exists from here on
  // The files of earlier saves into this folder, and the digests the manifest now holds, go.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    const Layout::Part part = Layout::parse_part(e.path().filename().string());
    const bool ours = part.step == step && (part.kind == Layout::PartKind::common || part.world == world);
    if (part.kind == Layout::PartKind::shard_info || (part.kind != Layout::PartKind::manifest &&
                                                      part.kind != Layout::PartKind::other && !ours))
      fs::remove(e.path(), ec);
  }
}

POLICYTRAIN_DECL std::string file_sha256(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) detail::fail(file, "cannot open for reading");
  io::Sha256 h;
  std::vector<char> buf(size_t{1} << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) h.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  return h.hex();
}

POLICYTRAIN_DECL nlohmann::json verify_sharded(const std::filesystem::path& folder) {
  namespace fs = std::filesystem;
  const nlohmann::json man = Layout::read_manifest(folder);
  const fs::path mf = folder / Layout::manifest();
  return detail::documented_errors(mf, [&] {
    const auto& sh = man.at("sharded");
    if (sh.at("version").get<int64_t>() != kShardedVersion)
      detail::fail(mf, policytrain::detail::format("the manifest's version is {}, this build reads {}", sh.at("version").dump(),
                                                   kShardedVersion));
    std::vector<nlohmann::json> listed{sh.at("common")};
    for (const auto& s : sh.at("shards")) listed.push_back(s);
    for (const auto& f : listed) {
      const std::string name = f.at("file").get<std::string>();
      const auto kind = Layout::parse_part(name).kind;
      if (kind != Layout::PartKind::common && kind != Layout::PartKind::shard)
        detail::fail(mf, policytrain::detail::format("the manifest lists '{}', which is no part of a sharded checkpoint", name));
      const fs::path file = folder / name;
      const std::string want = f.at("sha256").get<std::string>();
      const uint64_t bytes = f.at("bytes").get<uint64_t>();
      std::error_code ec;
      if (!fs::is_regular_file(file, ec))
        detail::fail_error(file, "is missing",
                           policytrain::detail::format("the file {} lists ({} bytes, SHA-256 {})", mf.string(), bytes, want),
                           detail::kStaleFix);
      const uint64_t size = detail::file_size_of(file);
      const std::string found = file_sha256(file);
      if (found != want || size != bytes)
        detail::fail_error(file, policytrain::detail::format("has SHA-256 {} ({} bytes)", found, size),
                           policytrain::detail::format("SHA-256 {} ({} bytes), as {} records", want, bytes, mf.string()),
                           detail::kStaleFix);
    }
    return man;
  });
}

POLICYTRAIN_DECL std::filesystem::path verified_common(const std::filesystem::path& folder) {
  const nlohmann::json man = verify_sharded(folder);
  return folder / man["sharded"]["common"]["file"].get<std::string>();
}

POLICYTRAIN_DECL RawFile merge_model(const std::filesystem::path& folder, const nlohmann::json& manifest, RawFile raw) {
  namespace fs = std::filesystem;
  const auto& sh = manifest.at("sharded");
  // (the manifest's list, the common part's section, the shards' section): the parameters, the Trainer state's rows.
  const std::vector<std::array<std::string, 3>> kinds{{"model", "model", "model"}, {"state", "state", "state_rows"}};
  const auto listed = [&](const std::string& key) { return sh.contains(key) && !sh.at(key).empty(); };
  if (!listed("model") && !listed("state")) return raw;
  const fs::path common = folder / sh.at("common").at("file").get<std::string>();
  detail::check_archive(raw.payload(), common);
  detail::InputArchive a;
  detail::from_bytes(a, raw.payload());
  // Every shard's rows of every listed entry, by section, in rank order (the manifest lists the shards so).
  std::map<std::string, std::map<std::string, std::vector<torch::Tensor>>> rows;
  fs::path last;
  for (const auto& s : sh.at("shards")) {
    last = folder / s.at("file").get<std::string>();
    const RawFile part = read_file(last);
    detail::check_archive(part.payload(), last);
    detail::InputArchive in;
    detail::from_bytes(in, part.payload());
    for (const auto& [list, section, shard_section] : kinds)
      if (listed(list))
        for (auto& [name, t] : detail::read_named(in, shard_section, last)) rows[section][name].push_back(t);
  }
  std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>> merged;
  for (const auto& [list, section, shard_section] : kinds) {
    if (!listed(list)) continue;
    auto whole_section = detail::read_named(a, section, common);
    for (const auto& m : sh.at(list)) {
      const std::string name = m.at("name").get<std::string>();
      const auto shape = m.at("shape").get<std::vector<int64_t>>();
      const auto it = rows[section].find(name);
      if (it == rows[section].end() || it->second.size() != sh.at("shards").size())
        detail::fail(last, policytrain::detail::format("the shards hold rows of {} '{}' in {} of {} files; the manifest "
                                                       "lists it as sharded on every rank",
                                                       section == "model" ? "parameter" : "state entry", name,
                                                       it == rows[section].end() ? size_t{0} : it->second.size(),
                                                       sh.at("shards").size()));
      torch::Tensor whole = torch::cat(it->second);
      if (whole.sizes().vec() != shape)
        detail::fail(last, policytrain::detail::format("the shards' rows of '{}' make up shape {}; the manifest records {}",
                                                       name, c10::str(whole.sizes()), c10::str(c10::IntArrayRef(shape))));
      const auto pos = std::find_if(whole_section.begin(), whole_section.end(), [&](const auto& e) { return e.first == name; });
      if (pos == whole_section.end())
        detail::fail(common, policytrain::detail::format("the '{}' section lacks '{}' that the manifest lists", section, name));
      pos->second = whole;
    }
    merged[section] = std::move(whole_section);
  }
  // The common part again, its merged sections whole (in the place and order they had).
  detail::OutputArchive o;
  std::set<std::string> written;
  for (const auto& k : a.keys()) {
    const auto slash = k.find('/');
    const std::string section = slash == std::string::npos ? k : k.substr(0, slash);
    if (merged.count(section)) {
      if (written.insert(section).second) detail::write_named(o, section, merged[section], detail::identity);
      continue;
    }
    c10::IValue v;
    a.read(k, v);
    if (v.isModule()) {
      detail::InputArchive sub;
      a.read(k, sub);
      detail::OutputArchive osub(o.compilation_unit());
      detail::copy_archive(sub, osub, detail::identity);
      o.write(k, osub);
    } else {
      o.write(k, v);
    }
  }
  raw.bytes = detail::to_bytes(o);
  raw.payload_offset = 0;
  return raw;
}

POLICYTRAIN_DECL RawFile verified_common_file(const std::filesystem::path& folder) {
  const nlohmann::json man = verify_sharded(folder);
  const std::filesystem::path common = folder / man["sharded"]["common"]["file"].get<std::string>();
  return detail::documented_errors(folder, [&] { return merge_model(folder, man, read_file(common)); });
}

POLICYTRAIN_DECL std::string merge_optimizer(const std::filesystem::path& folder, const nlohmann::json& manifest,
                                             torch::serialize::InputArchive& common_opt,
                                             const std::function<bool(int64_t)>& wanted) {
  namespace fs = std::filesystem;
  const int64_t step = manifest.at("global_step").get<int64_t>();
  detail::OutputArchive out;
  out.write("pytorch_version", c10::IValue(std::string("1.5.0")));
  detail::InputArchive groups;
  if (!common_opt.try_read("param_groups", groups)) detail::fail(folder, "the common part's optimizer state has no param groups");
  detail::OutputArchive og(out.compilation_unit());
  detail::copy_archive(groups, og, detail::identity);
  out.write("param_groups", og);
  // The common part's parameter keys, by global index: the archive's state is keyed by them.
  std::vector<std::string> keys;
  c10::IValue n;
  groups.read("param_groups/size", n);
  for (int64_t g = 0; g < n.toTensor().item<int64_t>(); ++g) {
    detail::InputArchive grp;
    groups.read("param_groups/" + std::to_string(g), grp);
    c10::IValue m;
    grp.read("params/size", m);
    for (int64_t i = 0; i < m.toTensor().item<int64_t>(); ++i) {
      c10::IValue key;
      grp.read("params/" + std::to_string(i), key);
      keys.push_back(key.toStringRef());
    }
  }
  detail::OutputArchive state(out.compilation_unit());
  // An index that several shards list was chunked on dim 0 (parallel::Partition::dim0): each rank wrote its rows
  // of every state tensor; they are concatenated in rank order (the manifest lists the shards so) into the whole
  // state, which the loading ranks cut again for their world size (resharding comes with it).
  std::map<int64_t, int> holders;
  for (const auto& s : manifest.at("sharded").at("shards"))
    for (const auto& k : s.at("indices")) ++holders[k.get<int64_t>()];
  std::map<int64_t, std::vector<std::pair<fs::path, std::shared_ptr<detail::InputArchive>>>> pieces;
  for (const auto& s : manifest.at("sharded").at("shards")) {
    std::vector<int64_t> take;
    for (const auto& k : s.at("indices"))
      if (wanted(k.get<int64_t>())) take.push_back(k.get<int64_t>());
    if (take.empty()) continue;  // holds nothing this rank owns: not read
    const fs::path file = folder / s.at("file").get<std::string>();
    sharded_probe().shards_read.push_back(s.at("file").get<std::string>());
    const RawFile raw = read_file(file);
    if (meta_int(file, raw.meta, "global_step", -1) != step)
      detail::fail_error(file, policytrain::detail::format("belongs to step {}", meta_int(file, raw.meta, "global_step", -1)),
                         policytrain::detail::format("step {} (its manifest's)", step), detail::kStaleFix);
    detail::check_archive(raw.payload(), file);
    detail::InputArchive a;
    detail::from_bytes(a, raw.payload());
    for (const int64_t k : take) {
      if (k < 0 || k >= static_cast<int64_t>(keys.size()))
        detail::fail(file, policytrain::detail::format("holds parameter index {}; the optimizer has {}", k, keys.size()));
      auto sub = std::make_shared<detail::InputArchive>();
      if (!a.try_read("state/" + std::to_string(k), *sub))
        detail::fail(file, policytrain::detail::format("lacks the state of parameter index {} that the manifest lists", k));
      if (holders[k] > 1) {
        pieces[k].emplace_back(file, std::move(sub));
        continue;
      }
      detail::OutputArchive osub(out.compilation_unit());
      detail::copy_archive(*sub, osub, detail::identity);
      state.write(keys[static_cast<size_t>(k)], osub);
    }
  }
  for (auto& [k, parts] : pieces) {
    detail::OutputArchive osub(out.compilation_unit());
    for (const auto& name : parts.front().second->keys()) {
      c10::IValue first;
      parts.front().second->read(name, first);
      if (!first.isTensor() || !first.toTensor().defined() || first.toTensor().dim() == 0) {
        osub.write(name, first);  // a counter (Adam's step): the same on every rank
        continue;
      }
      std::vector<torch::Tensor> rows;
      for (auto& [file, sub] : parts) {
        c10::IValue v;
        if (!sub->try_read(name, v) || !v.isTensor())
          detail::fail(file, policytrain::detail::format("lacks '{}' of the dim-0 chunk of parameter index {}", name, k));
        rows.push_back(v.toTensor());
      }
      // In the parameter's shape (the manifest's): a 0-dim parameter was chunked as one row.
      torch::Tensor whole = torch::cat(rows);
      for (const auto& p : manifest.at("sharded").at("params"))
        if (p.at("index").get<int64_t>() == k && whole.numel() == c10::multiply_integers(p.at("shape").get<std::vector<int64_t>>()))
          whole = whole.reshape(p.at("shape").get<std::vector<int64_t>>());
      osub.write(name, whole);
    }
    state.write(keys[static_cast<size_t>(k)], osub);
  }
  out.write("state", state);
  return detail::to_bytes(out);
}

POLICYTRAIN_DECL Loaded read_sharded(const std::filesystem::path& folder, const torch::nn::Module& module,
                                     torch::optim::Optimizer& optimizer, const StateDict& live_state,
                                     const OwnsParameter& owns) {
  const nlohmann::json man = verify_sharded(folder);
  const std::filesystem::path common = folder / man["sharded"]["common"]["file"].get<std::string>();
  Loaded l = read_payload(detail::documented_errors(folder, [&] { return merge_model(folder, man, read_file(common)); }),
                          common, module, optimizer, live_state);
  l.meta = man;
  const auto params = global_parameters(optimizer);
  std::string merged = detail::documented_errors(folder, [&] {
    return merge_optimizer(folder, man, l.optimizer, [&](int64_t k) {
      return k >= 0 && k < static_cast<int64_t>(params.size()) && (!owns || owns(params[static_cast<size_t>(k)]));
    });
  });
  detail::InputArchive in;
  detail::from_bytes(in, merged);
  detail::validate_optimizer(in, optimizer, module, folder);
  l.optimizer = std::move(in);
  return l;
}

POLICYTRAIN_DECL nlohmann::json consolidate(const std::filesystem::path& folder, const std::filesystem::path& out,
                                            const std::filesystem::path& export_pt) {
  nlohmann::json man = verify_sharded(folder);
  const std::filesystem::path common = folder / man["sharded"]["common"]["file"].get<std::string>();
  const RawFile raw = detail::documented_errors(folder, [&] { return merge_model(folder, man, read_file(common)); });
  detail::check_archive(raw.payload(), common);
  detail::InputArchive a;
  detail::from_bytes(a, raw.payload());
  detail::OutputArchive o;
  detail::documented_errors(common, [&] {
    for (const auto& k : a.keys()) {
      if (k == "optimizer") {
        detail::InputArchive opt, merged;
        a.read("optimizer", opt);
        detail::from_bytes(merged, merge_optimizer(folder, man, opt, [](int64_t) { return true; }));
        detail::OutputArchive om(o.compilation_unit());
        detail::copy_archive(merged, om, detail::identity);
        o.write("optimizer", om);
        continue;
      }
      c10::IValue v;
      a.read(k, v);
      if (v.isModule()) {
        detail::InputArchive sub;
        a.read(k, sub);
        detail::OutputArchive osub(o.compilation_unit());
        detail::copy_archive(sub, osub, detail::identity);
        o.write(k, osub);
      } else {
        o.write(k, v);
      }
    }
    return 0;
  });
  nlohmann::json meta = man;
  meta.erase("sharded");
  write_file(out, meta, detail::to_bytes(o));
  if (!export_pt.empty()) export_weights(detail::read_named(a, "model", common), export_pt);
  return man;
}
#endif

}  // namespace policytrain::checkpoint
