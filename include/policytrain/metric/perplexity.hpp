#pragma once
/// \file
/// metric::Perplexity — a language model's perplexity over an epoch, as torchmetrics.text.Perplexity computes it:
/// exp of the mean negative log-likelihood of the target tokens, over every token whose target is not
/// `ignore_index` (padding), in double precision. Takes the model's logits `[batch, tokens, vocabulary]` (or
/// `[tokens, vocabulary]`) and the target ids `[batch, tokens]` (or `[tokens]`); keeps two double sums on the CPU,
/// reduced over ranks by summing, so the value is exact over every batch and rank (not a mean of batches'
/// perplexities). Declared in a task's `metrics()` (core/metric.hpp, docs/metrics.md, "Perplexity").
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include <policytrain/core/metric.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::metric {

/// Perplexity over every non-ignored token since reset() (torchmetrics.text.Perplexity).
class Perplexity {
 public:
  /// A perplexity named `name`; targets equal to `ignore_index` (when given) are left out.
  explicit Perplexity(std::optional<int64_t> ignore_index = std::nullopt, std::string name = "perplexity")
      : name_(std::move(name)), ignore_(ignore_index) {}
  /// The name it is declared, printed, logged and monitored under.
  std::string name() const { return name_; }
  /// Adds a batch: logits `[..., vocabulary]` and target ids of the same leading shape.
  void update(const torch::Tensor& prediction, const torch::Tensor& target) {
    const int64_t v = prediction.dim() > 0 ? prediction.size(-1) : 0;
    if (prediction.dim() < 2 || target.numel() * v != prediction.numel())
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::metric::Perplexity",
          policytrain::detail::format("logits {} and targets {}", c10::str(prediction.sizes()), c10::str(target.sizes())),
          "logits [batch, tokens, vocabulary] and targets [batch, tokens]",
          "pass the model's logits and the target token ids"));
    auto logp = torch::log_softmax(prediction.detach().to(torch::kCPU, torch::kDouble).reshape({-1, v}), 1);
    auto t = target.detach().to(torch::kCPU, torch::kLong).reshape({-1});
    auto keep = ignore_ ? t.ne(*ignore_) : torch::ones_like(t, torch::kBool);
    auto safe = torch::where(keep, t, torch::zeros_like(t));
    auto nll = -logp.gather(1, safe.unsqueeze(1)).squeeze(1);
    sum_.value = sum_.value + torch::where(keep, nll, torch::zeros_like(nll)).sum();
    count_.value = count_.value + keep.sum().to(torch::kDouble);
  }
  /// exp(total negative log-likelihood / tokens counted) over every batch since reset().
  torch::Tensor compute() const { return (sum_.value / count_.value).exp(); }
  /// Clears the states: no batch.
  void reset() {
    sum_.value = torch::zeros({}, torch::kDouble);
    count_.value = torch::zeros({}, torch::kDouble);
  }
  /// Every state, in a fixed order, for the reduction over ranks.
  std::vector<MetricState*> states() { return {&sum_, &count_}; }

 private:
  std::string name_;
  std::optional<int64_t> ignore_;
  MetricState sum_{"sum_nll", torch::zeros({}, torch::kDouble), Reduce::sum};
  MetricState count_{"tokens", torch::zeros({}, torch::kDouble), Reduce::sum};
};

}  // namespace policytrain::metric
