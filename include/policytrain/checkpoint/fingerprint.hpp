#pragma once
/// \file
/// The run fingerprint as read from a checkpoint's metadata (torch-free, so that fuzz_checkpoint_header reaches it):
/// its shape checked before anything compares it (check_fingerprint), and what differs from this run's
/// (fingerprint_differences). What the fingerprint records: checkpoint::run_fingerprint (checkpoint/disk.hpp).
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <policytrain/checkpoint/format.hpp>
#include <policytrain/detail/config.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::checkpoint {

/// Checks the shape of a checkpoint's fingerprint (`saved`, the metadata's "fingerprint" of `file`) before it is
/// compared: an object whose known fields have their types. Throws CheckpointError naming the file, the field, its
/// value and what was expected.
POLICYTRAIN_DECL void check_fingerprint(const std::filesystem::path& file, const nlohmann::json& saved)
#if POLICYTRAIN_DEFINE
{
  if (!saved.is_object()) detail::bad_meta_field(file, "fingerprint", saved, "an object (the run fingerprint)");
  const auto field = [&](const char* key, bool ok, std::string_view expected) {
    if (saved.contains(key) && !ok) detail::bad_meta_field(file, policytrain::detail::format("fingerprint.{}", key), saved[key], expected);
  };
  field("model", saved.contains("model") && saved["model"].is_string(), "a string (the architecture digest)");
  for (const char* k : {"model_tensors", "model_elements", "world_size", "batch_size", "data_size"})
    field(k, saved.contains(k) && saved[k].is_number_integer(), "an integer");
  field("optimizer", saved.contains("optimizer") && (saved["optimizer"].is_string() || saved["optimizer"].is_object()),
        "an object (the optimizer's family and parameter groups) or a string (its type, in older files)");
  if (!saved.contains("optimizer") || !saved["optimizer"].is_object()) return;
  const auto& o = saved["optimizer"];
  if (!o.contains("family") || !o["family"].is_string())
    detail::bad_meta_field(file, "fingerprint.optimizer.family", o.contains("family") ? o["family"] : nlohmann::json(),
                           "a string (adamw, adam, sgd, ...)");
  if (o.contains("param_groups")) {
    const auto& groups = o["param_groups"];
    if (!groups.is_array())
      detail::bad_meta_field(file, "fingerprint.optimizer.param_groups", groups, "an array (one object per group)");
    for (size_t g = 0; g < groups.size(); ++g)
      if (!groups[g].is_object())
        detail::bad_meta_field(file, policytrain::detail::format("fingerprint.optimizer.param_groups[{}]", g), groups[g],
                               "an object (the group's hyper-parameters)");
  }
}
#else
;
#endif

namespace detail {
/// The optimizer family of a fingerprint's "optimizer" field: its "family", or for a file written before families
/// were recorded, the family of the C++ type it names (a fused optimizer's is its LibTorch twin's; another type:
/// the type itself).
POLICYTRAIN_DECL std::string optimizer_family(const nlohmann::json& o)
#if POLICYTRAIN_DEFINE
{
  if (o.is_object()) return o.contains("family") && o["family"].is_string() ? o["family"].get<std::string>() : "";
  if (!o.is_string()) return "";
  const std::string t = o.get<std::string>();
  static const std::pair<const char*, const char*> known[] = {
      {"torch::optim::AdamW", "adamw"}, {"policytrain::optim::FusedAdamW", "adamw"},
      {"torch::optim::Adam", "adam"},   {"policytrain::optim::FusedAdam", "adam"},
      {"torch::optim::SGD", "sgd"},     {"policytrain::optim::FusedSgd", "sgd"},
      {"torch::optim::RMSprop", "rmsprop"}, {"torch::optim::Adagrad", "adagrad"}};
  for (const auto& [type, family] : known)
    if (t == type) return family;
  return t;
}
#else
;
#endif
/// What differs between two fingerprints' "optimizer" fields (see fingerprint_differences).
POLICYTRAIN_DECL void optimizer_differences(const nlohmann::json& saved, const nlohmann::json& now, std::vector<std::string>& out)
#if POLICYTRAIN_DEFINE
{
  const std::string a = optimizer_family(saved), b = optimizer_family(now);
  if (a != b) {
    out.push_back(policytrain::detail::format("optimizer: {} in the checkpoint, {} in this run", a, b));
    return;
  }
  // A file written before the groups were recorded names the type only: the family is all there is to compare.
  if (!saved.is_object() || !now.is_object() || !saved.contains("param_groups") || !now.contains("param_groups")) return;
  const auto &gs = saved["param_groups"], &gn = now["param_groups"];
  if (gs.size() != gn.size()) {
    // The advice of the payload's own check (read_payload): the same run continues with the groups it had then.
    out.push_back(policytrain::detail::format("optimizer parameter groups: {} in the checkpoint, {} in this run (to "
                                              "continue that run, build the optimizer with the {} group(s) it had when "
                                              "it wrote the checkpoint, add_param_group included)",
                                              gs.size(), gn.size(), gs.size()));
    return;
  }
  for (size_t g = 0; g < gs.size(); ++g) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : gs[g].items()) keys.push_back(k);
    for (const auto& [k, v] : gn[g].items())
      if (!gs[g].contains(k)) keys.push_back(k);
    for (const auto& k : keys) {
      const auto missing = nlohmann::json("(not recorded)");
      const auto& x = gs[g].contains(k) ? gs[g][k] : missing;
      const auto& y = gn[g].contains(k) ? gn[g][k] : missing;
      if (x != y)
        out.push_back(policytrain::detail::format("optimizer parameter group {} {}: {} in the checkpoint, {} in this run", g, k,
                                  json_excerpt(x), json_excerpt(y)));
    }
  }
}
#else
;
#endif
}  // namespace detail

/// The fingerprint of a run at a later fit's begin: `now` (the model, the world size and the optimizer's groups as
/// they are now: a group added with add_param_group since, parameters added to a group), except that each group
/// `recorded` already holds keeps its hyper-parameters from then (a schedule has moved the momentum meanwhile; the run
/// is the same). Both must be objects as run_fingerprint makes them.
POLICYTRAIN_DECL nlohmann::json refresh_fingerprint(const nlohmann::json& recorded, nlohmann::json now)
#if POLICYTRAIN_DEFINE
{
  if (!recorded.is_object() || !now.is_object() || !recorded.contains("optimizer") || !now.contains("optimizer"))
    return now;
  const auto &ro = recorded["optimizer"];
  auto& no = now["optimizer"];
  if (!ro.is_object() || !no.is_object() || detail::optimizer_family(ro) != detail::optimizer_family(no) ||
      !ro.contains("param_groups") || !no.contains("param_groups"))
    return now;
  const auto& rg = ro["param_groups"];
  auto& ng = no["param_groups"];
  for (size_t g = 0; g < rg.size() && g < ng.size(); ++g) {
    auto kept = rg[g];
    for (const char* k : {"params", "elements"})
      if (ng[g].contains(k)) kept[k] = ng[g][k];
    ng[g] = std::move(kept);
  }
  return now;
}
#else
;
#endif

/// What differs between a checkpoint's fingerprint (`saved`) and this run's (`now`), one phrase per field;
/// empty when they agree. A field only one of them records is not compared (a file of an older version records none).
/// `saved` must have passed check_fingerprint.
POLICYTRAIN_DECL std::vector<std::string> fingerprint_differences(const nlohmann::json& saved, const nlohmann::json& now)
#if POLICYTRAIN_DEFINE
{
  std::vector<std::string> out;
  if (!saved.is_object() || !now.is_object())
    throw std::invalid_argument(policytrain::detail::error_message("policytrain::checkpoint::fingerprint_differences", "a fingerprint is not an object; "
                                "check a checkpoint's with check_fingerprint first"));
  auto str = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : detail::json_excerpt(v); };
  if (saved.contains("model") && now.contains("model") && saved["model"] != now["model"]) {
    std::string what = "model architecture (parameter names, shapes or dtypes)";
    if (saved.contains("model_tensors") && saved.contains("model_elements") && now.contains("model_tensors"))
      what += policytrain::detail::format(": {} tensors of {} elements in the checkpoint, {} tensors of {} elements in this run",
                          str(saved["model_tensors"]), str(saved["model_elements"]), str(now["model_tensors"]),
                          str(now["model_elements"]));
    out.push_back(what);
  }
  if (saved.contains("optimizer") && now.contains("optimizer"))
    detail::optimizer_differences(saved["optimizer"], now["optimizer"], out);
  const std::pair<const char*, const char*> fields[] = {
      {"world_size", "world size"}, {"batch_size", "batch size"}, {"data_size", "data size"}};
  for (const auto& [key, label] : fields)
    if (saved.contains(key) && now.contains(key) && saved[key] != now[key])
      out.push_back(policytrain::detail::format("{}: {} in the checkpoint, {} in this run", label, str(saved[key]), str(now[key])));
  return out;
}
#else
;
#endif

}  // namespace policytrain::checkpoint
