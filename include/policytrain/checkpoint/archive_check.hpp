#pragma once
/// \file
/// The bounds a checkpoint payload read from disk passes before LibTorch parses it (checkpoint/archive.hpp says
/// what a payload holds): every zip record lies inside the payload and every pickle's length-prefixed strings fit in
/// their record (LibTorch's unpickler reserves a declared string length before reading it: a forged length made a
/// 14 KiB file allocate 2 GiB, found by fuzz_archive); and the payload's bytes to and from an archive.
#include <filesystem>
#include <string>
#include <string_view>

#include <policytrain/detail/config.hpp>
#if POLICYTRAIN_DEFINE  // only the definitions use them
#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#endif
#include <fmt/format.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/types.h>

#include <policytrain/checkpoint/format.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::checkpoint {

namespace detail {

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

POLICYTRAIN_DECL std::string to_bytes(OutputArchive& a)
#if POLICYTRAIN_DEFINE
{
  std::string s;
  a.save_to([&](const void* p, size_t n) -> size_t {
    s.append(static_cast<const char*>(p), n);
    return n;
  });
  return s;
}
#else
;
#endif
inline void from_bytes(InputArchive& a, std::string_view s) { a.load_from(s.data(), s.size(), torch::Device(torch::kCPU)); }

/// Walks one pickle of a LibTorch archive (the opcodes torch::jit::Unpickler reads) and checks that every
/// argument, length-prefixed strings included, fits in the record. Stops at STOP or at an opcode the
/// unpickler does not read (it refuses those itself). Throws CheckpointError naming the record and the byte.
POLICYTRAIN_DECL void check_pickle(std::string_view p, const std::string& record, const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  size_t i = 0;
  const auto need = [&](uint64_t n, const char* what) {
    if (n > p.size() - i)
      fail(file, policytrain::detail::format("the archive's record '{}' declares {} of {} bytes at byte {} where {} remain; "
                             "the payload is forged or damaged",
                             record, what, n, i, p.size() - i));
  };
  while (i < p.size()) {
    const auto op = static_cast<unsigned char>(p[i++]);
    switch (op) {
      case '.':  // STOP
        return;
      case 0x80: case 'q': case 'K': case 'h':  // PROTO, BINPUT, BININT1, BINGET
        need(1, "an argument"), i += 1;
        break;
      case 'M':  // BININT2
        need(2, "an argument"), i += 2;
        break;
      case 'r': {  // LONG_BINPUT: the unpickler grows its memo table to the index + 1 before storing
        need(4, "an argument");
        const uint64_t memo = get_le(p.data() + i, 4);
        // Each memo entry costs at least two bytes of pickle, so a valid index is below the pickle's size; a forged
        // one made LibTorch's Unpickler::setInput allocate 27 GB (fuzz_archive).
        if (memo >= p.size())
          fail(file, policytrain::detail::format("the archive's record '{}' stores memo entry {} at byte {}, past any pickle of {} "
                                 "bytes; the payload is forged or damaged", record, memo, i - 1, p.size()));
        i += 4;
      } break;
      case 'J': case 'j':  // BININT, LONG_BINGET
        need(4, "an argument"), i += 4;
        break;
      case 'G':  // BINFLOAT
        need(8, "an argument"), i += 8;
        break;
      case 0x8a: {  // LONG1: one length byte, then the integer
        need(1, "a length");
        const uint64_t n = get_le(p.data() + i, 1);  // pickle integers are little-endian
        i += 1;
        need(n, "an integer");
        i += n;
      } break;
      case 'X': {  // BINUNICODE: four length bytes, then the string
        need(4, "a length");
        const uint64_t n = get_le(p.data() + i, 4);
        i += 4;
        need(n, "a string");
        i += n;
      } break;
      case 'c':  // GLOBAL: module and class names, each ending with a newline
        for (int k = 0; k < 2; ++k) {
          const auto nl = p.find('\n', i);
          if (nl == std::string_view::npos)
            fail(file, policytrain::detail::format("the archive's record '{}' holds a name at byte {} that never ends (no newline); "
                                   "the payload is forged or damaged", record, i));
          i = nl + 1;
        }
        break;
      case '(': case ')': case ']': case '}': case 'N': case 0x88: case 0x89: case 't': case 0x85: case 0x86:
      case 0x87: case 'e': case 'l': case 'd': case 'u': case 's': case 0x81: case 'b': case 'R': case 'Q':
        break;  // no argument
      default:
        return;  // not an opcode the unpickler reads: it refuses the archive itself
    }
  }
}
#else
;
#endif

/// Bounds a LibTorch archive read from disk before InputArchive parses it: every zip record lies inside the
/// payload (so no record allocates more than the file holds) and every pickle passes check_pickle.
POLICYTRAIN_DECL void check_archive(std::string_view bytes, const std::filesystem::path& file)
#if POLICYTRAIN_DEFINE
{
  std::vector<std::pair<std::string, std::string>> pickles;
  try {
    caffe2::serialize::PyTorchStreamReader reader(
        std::make_shared<caffe2::serialize::MemoryReadAdapter>(bytes.data(), static_cast<off_t>(bytes.size())));
    for (const auto& name : reader.getAllRecords()) {
      const uint64_t size = reader.getRecordSize(name), offset = reader.getRecordOffset(name);
      if (offset > bytes.size() || size > bytes.size() - offset)
        fail(file, policytrain::detail::format("the archive's record '{}' declares {} bytes at offset {}, past the payload's end "
                               "({} bytes); the payload is forged or damaged",
                               name, size, offset, bytes.size()));
      if (name.ends_with(".pkl")) {
        auto [data, n] = reader.getRecord(name);
        pickles.emplace_back(name, std::string(static_cast<const char*>(data.get()), n));
      }
    }
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    fail(file, policytrain::detail::format("the payload is not a readable LibTorch archive: {}", e.what()));
  }
  for (const auto& [name, p] : pickles) check_pickle(p, name, file);
}
#else
;
#endif
}  // namespace detail

}  // namespace policytrain::checkpoint
