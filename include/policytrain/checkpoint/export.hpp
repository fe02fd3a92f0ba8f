#pragma once
/// \file
/// export_weights: a module's parameters and buffers as a `dict[str, Tensor]` in the format of Python's
/// `torch.save`, so a model trained in C++ goes on in Python:
/// `model.load_state_dict(torch.load("final.pt"))` for a Python model with the same parameter names.
/// It is what torch::pickle_save writes, minus the TorchScript type tags on the dict, which Python's
/// `torch.load` (weights_only=True, the default since PyTorch 2.6) refuses as an unknown global.
/// Written atomically (checkpoint/format.hpp). Cost: one copy of the weights on the CPU while writing.
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <policytrain/detail/config.hpp>
#if POLICYTRAIN_DEFINE  // only the definitions use them
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#endif
#include <torch/nn/module.h>
#include <torch/types.h>

#include <policytrain/checkpoint/payload.hpp>
#include <policytrain/checkpoint/format.hpp>
#include <policytrain/detail/config.hpp>

namespace policytrain::checkpoint {

/// The bytes export_weights writes for `tensors` (name, tensor; fp16 floating-point tensors when `half`): a
/// `dict[str, Tensor]` in torch.save's format, to be written later (checkpoint::Disk stages best.pt with best.ckpt).
POLICYTRAIN_DECL std::string export_bytes(const std::vector<std::pair<std::string, torch::Tensor>>& tensors, bool half = false)
#if POLICYTRAIN_DEFINE
{
  c10::Dict<std::string, torch::Tensor> d;
  for (const auto& [k, v] : tensors) {
    auto t = v.detach().to(torch::kCPU).contiguous();
    d.insert(k, half && t.is_floating_point() ? t.to(torch::kHalf) : t);
  }
  std::string pickle;
  torch::jit::Pickler pickler([&](const char* p, size_t n) { pickle.append(p, n); }, nullptr, nullptr, nullptr, nullptr,
                              /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(d));
  pickler.stop();
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* p, size_t n) -> size_t {
    bytes.append(static_cast<const char*>(p), n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return bytes;
}
#else
;
#endif

/// Writes `tensors` (name, tensor; fp16 floating-point tensors when `half`) to `file` as a `dict[str, Tensor]`.
POLICYTRAIN_DECL void export_weights(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                                     const std::filesystem::path& file, bool half = false)
#if POLICYTRAIN_DEFINE
{
  write_atomic(file, {export_bytes(tensors, half)});
}
#else
;
#endif

/// Writes every named parameter and buffer of `m` (fp16 floating-point tensors when `half`) to `file`.
POLICYTRAIN_DECL void export_weights(const torch::nn::Module& m, const std::filesystem::path& file, bool half = false)
#if POLICYTRAIN_DEFINE
{
  export_weights(detail::named_tensors(m), file, half);
}
#else
;
#endif

}  // namespace policytrain::checkpoint
