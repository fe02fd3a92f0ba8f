#pragma once
// The example's precision flags: --precision {fp32,bf16,fp16}, --loss-scale {auto,on,off}, the scaler's settings
// and what a non-finite loss does. make() returns the configured precision::Autocast.
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <policytrain/precision/autocast.hpp>

namespace fmnist {

struct PrecisionFlags {
  std::string precision = "fp32";
  std::string loss_scale = "auto";
  double init_scale = 65536.0;
  int64_t growth_interval = 2000;
  std::string on_nonfinite = "error";

  void add(CLI::App& app) {
    app.add_option("--precision", precision, "Forward precision: fp32, or bf16/fp16 under autocast (master weights stay fp32)")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
        ->capture_default_str();
    app.add_option("--loss-scale", loss_scale, "Dynamic loss scaling: auto (fp16 only), on, off")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    app.add_option("--init-scale", init_scale, "Initial loss scale")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--growth-interval", growth_interval, "Finite steps before the loss scale doubles")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--on-nonfinite", on_nonfinite, "Non-finite loss without loss scaling: error, skip the step, ignore")
        ->check(CLI::IsMember({"error", "skip", "ignore"}))
        ->capture_default_str();
  }

  c10::ScalarType dtype() const {
    return precision == "bf16" ? torch::kBFloat16 : precision == "fp16" ? torch::kHalf : torch::kFloat;
  }
  policytrain::precision::LossScaling scaling() const {
    using policytrain::precision::LossScaling;
    return loss_scale == "on" ? LossScaling::on : loss_scale == "off" ? LossScaling::off : LossScaling::automatic;
  }
  policytrain::NonFinite nonfinite() const {
    using policytrain::NonFinite;
    return on_nonfinite == "skip" ? NonFinite::skip : on_nonfinite == "ignore" ? NonFinite::ignore : NonFinite::error;
  }
  /// Whether the loss is scaled, as the policy resolves it.
  bool scaled() const {
    using policytrain::precision::LossScaling;
    return scaling() == LossScaling::on || (scaling() == LossScaling::automatic && precision == "fp16");
  }

  /// `rollback`: a callbacks::DivergenceRollback handles non-finite losses (they skip the step, then it restores).
  policytrain::precision::Autocast make(bool rollback = false) const {
    // [snippet:make]
    return policytrain::precision::Autocast({.dtype = dtype(),
                                             .loss_scaling = scaling(),
                                             .scaler = {.init_scale = init_scale, .growth_interval = growth_interval},
                                             .on_nonfinite = rollback ? policytrain::NonFinite::rollback : nonfinite()});
    // [/snippet:make]
  }

  nlohmann::json describe() const {
    nlohmann::json j{{"name", std::string(policytrain::precision::Autocast::name)},
                     {"dtype", precision},
                     {"loss_scaling", loss_scale},
                     {"scaled", scaled()},
                     {"on_nonfinite", on_nonfinite}};
    if (scaled()) j["scaler"] = {{"init_scale", init_scale}, {"growth_interval", growth_interval}};
    return j;
  }
};

}  // namespace fmnist
