#pragma once
/// \file
/// export_weights: a module's parameters and buffers as a `dict[str, Tensor]` in the format of Python's
/// `torch.save`, so a model trained in C++ goes on in Python:
/// `model.load_state_dict(torch.load("final.pt"))` for a Python model with the same parameter names.
/// It is what torch::pickle_save writes, minus the TorchScript type tags on the dict, which Python's
/// `torch.load` (weights_only=True, the default since PyTorch 2.6) refuses as an unknown global.
/// Written atomically (checkpoint/format.hpp). Cost: one copy of the weights on the CPU while writing.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <policytrain/detail/config.hpp>
#if POLICYTRAIN_DEFINE  // only the definitions use them
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <unordered_map>

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

/// An export in export_weights' format (a `dict[str, Tensor]` for torch.load) written tensor by tensor, so that the
/// writer holds one tensor's values at a time (stage 3 of parallel::ShardedDataParallel gathers the parameters one
/// by one onto rank 0: ShardedDataParallel::export_weights). The constructor takes every tensor's name, dtype and
/// shape in the file's order (the values are not read: a freed parameter of stage 3 gives its shape) and pickles the
/// dict; write(i, values) writes tensor i's values straight into the file, in any order (torch.save's zip finds its
/// records by name); finish() writes the dict and renames the file into place, fsynced. An export not finished
/// leaves `file` as it was. Throws CheckpointError naming the file. Written in the layout's order, the file has
/// export_weights' bytes for the same tensors.
class StreamedExport {
 public:
  /// Opens a temporary file beside `file` and writes the pickled dict of `layout`'s names, dtypes and shapes (their
  /// values are not read). Throws CheckpointError naming the file.
  POLICYTRAIN_DECL StreamedExport(const std::filesystem::path& file, const std::vector<std::pair<std::string, torch::Tensor>>& layout);
  /// The same export into memory: `bytes` (cleared) receives what the file would, finish() renames nothing
  /// (checkpoint::Disk stages best.pt so, to write it with best.ckpt). `bytes` must outlive the export.
  POLICYTRAIN_DECL StreamedExport(std::string& bytes, const std::vector<std::pair<std::string, torch::Tensor>>& layout);
  POLICYTRAIN_DECL ~StreamedExport();
  StreamedExport(const StreamedExport&) = delete;
  StreamedExport& operator=(const StreamedExport&) = delete;
  /// Writes the values of tensor `i` of the layout (its dtype and shape; any device, any layout).
  POLICYTRAIN_DECL void write(size_t i, const torch::Tensor& values);
  /// Writes the dict once every tensor is written, and puts the file in place.
  POLICYTRAIN_DECL void finish();

 private:
  /// Both constructors' work: the pickled dict of `layout`, and the writer.
  POLICYTRAIN_DECL void open(const std::vector<std::pair<std::string, torch::Tensor>>& layout);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

#if POLICYTRAIN_DEFINE
struct StreamedExport::Impl {
  std::filesystem::path file, tmp;
  std::ofstream out;
  std::string* memory = nullptr;  ///< the in-memory export's bytes (null: the file's)
  std::unique_ptr<caffe2::serialize::PyTorchStreamWriter> writer;
  std::string pickle;
  std::vector<size_t> record;  ///< layout index -> its record ("data/<record>") in the pickle
  std::vector<std::pair<std::string, torch::Tensor>> layout;
  std::vector<bool> written;
  bool finished = false;
};

POLICYTRAIN_DECL StreamedExport::StreamedExport(std::string& bytes, const std::vector<std::pair<std::string, torch::Tensor>>& layout)
    : impl_(std::make_unique<Impl>()) {
  impl_->memory = &bytes;
  impl_->file = "(an export staged in memory)";  // what its errors name
  open(layout);
}

POLICYTRAIN_DECL StreamedExport::StreamedExport(const std::filesystem::path& file,
                                                const std::vector<std::pair<std::string, torch::Tensor>>& layout)
    : impl_(std::make_unique<Impl>()) {
  impl_->file = file;
  impl_->tmp = file;
  impl_->tmp += ".tmp-export-" + std::to_string(static_cast<long>(::getpid()));
  open(layout);
}

POLICYTRAIN_DECL void StreamedExport::open(const std::vector<std::pair<std::string, torch::Tensor>>& layout) {
  auto& m = *impl_;
  // Each tensor stands in as one of its dtype and shape on a storage of its size that holds no memory: the pickle
  // records a storage's size and key, never its bytes.
  c10::Dict<std::string, torch::Tensor> d;
  std::unordered_map<const void*, size_t> by_storage;
  for (size_t i = 0; i < layout.size(); ++i) {
    const auto& t = layout[i].second;
    const auto sizes = t.sizes().vec();
    std::vector<int64_t> strides(sizes.size(), 1);
    for (int64_t k = static_cast<int64_t>(sizes.size()) - 2; k >= 0; --k)
      strides[static_cast<size_t>(k)] = strides[static_cast<size_t>(k) + 1] * std::max<int64_t>(1, sizes[static_cast<size_t>(k) + 1]);
    c10::Storage st(c10::Storage::use_byte_size_t(), static_cast<size_t>(t.numel()) * t.element_size(),
                    at::DataPtr(nullptr, c10::Device(c10::kCPU)), nullptr, /*resizable=*/false);
    auto stand_in = torch::empty({0}, torch::TensorOptions().dtype(t.scalar_type())).set_(st, 0, sizes, strides);
    by_storage[stand_in.storage().unsafeGetStorageImpl()] = i;
    d.insert(layout[i].first, stand_in);
  }
  torch::jit::Pickler pickler([&](const char* p, size_t n) { m.pickle.append(p, n); }, nullptr, nullptr, nullptr, nullptr,
                              /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(d));
  pickler.stop();
  // Kept only now: the Pickler memoizes a tensor referenced from elsewhere too (its use count), which export_bytes'
  // copies are not, and the bytes would differ.
  for (const auto& [k, v] : layout) m.layout.emplace_back(k, d.at(k));
  m.record.assign(layout.size(), 0);
  for (size_t k = 0; k < pickler.tensorData().size(); ++k)
    m.record[by_storage.at(pickler.tensorData()[k].storage().unsafeGetStorageImpl())] = k;
  m.written.assign(layout.size(), false);
  if (m.memory) {
    m.memory->clear();
    m.writer = std::make_unique<caffe2::serialize::PyTorchStreamWriter>([&m](const void* p, size_t n) -> size_t {
      m.memory->append(static_cast<const char*>(p), n);
      return n;
    });
    return;
  }
  m.out.open(m.tmp, std::ios::binary | std::ios::trunc);
  if (!m.out) detail::fail(m.tmp, "cannot open the export's temporary file for writing");
  m.writer = std::make_unique<caffe2::serialize::PyTorchStreamWriter>([&m](const void* p, size_t n) -> size_t {
    m.out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    return m.out ? n : 0;
  });
}

POLICYTRAIN_DECL StreamedExport::~StreamedExport() {
  if (!impl_ || impl_->finished || impl_->memory) return;
  impl_->writer.reset();
  impl_->out.close();
  std::error_code ec;
  std::filesystem::remove(impl_->tmp, ec);
}

POLICYTRAIN_DECL void StreamedExport::write(size_t i, const torch::Tensor& values) {
  auto& m = *impl_;
  const auto& want = m.layout.at(i).second;
  if (values.sizes() != want.sizes() || values.scalar_type() != want.scalar_type())
    detail::fail(m.file, policytrain::detail::format("tensor '{}' is written with shape {} and dtype {}; the export's "
                                                     "layout has {} and {}", m.layout[i].first, c10::str(values.sizes()),
                                                     c10::toString(values.scalar_type()), c10::str(want.sizes()),
                                                     c10::toString(want.scalar_type())));
  const auto t = values.detach().to(torch::kCPU).contiguous();
  m.writer->writeRecord("data/" + std::to_string(m.record[i]), t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  if (!m.memory && !m.out) detail::fail(m.tmp, "the write of the export's temporary file failed");
  m.written[i] = true;
}

POLICYTRAIN_DECL void StreamedExport::finish() {
  auto& m = *impl_;
  for (size_t i = 0; i < m.written.size(); ++i)
    if (!m.written[i]) detail::fail(m.file, policytrain::detail::format("tensor '{}' of the export was never written", m.layout[i].first));
  m.writer->writeRecord("data.pkl", m.pickle.data(), m.pickle.size());
  m.writer->writeEndOfFile();
  m.writer.reset();
  if (m.memory) {
    m.finished = true;
    return;
  }
  m.out.close();
  if (!m.out) detail::fail(m.tmp, "the write of the export's temporary file failed");
  const int fd = ::open(m.tmp.c_str(), O_RDONLY);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!synced) detail::fail(m.tmp, "cannot fsync the export's temporary file");
  std::error_code ec;
  std::filesystem::rename(m.tmp, m.file, ec);
  if (ec) detail::fail(m.file, policytrain::detail::format("cannot rename the export into place: {}", ec.message()));
  m.finished = true;
}
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
