#pragma once
/// \file
/// data::TokenStream — batches of random windows of a language model's token stream: a token file memory-mapped
/// (nanoGPT's `.bin`: the token ids one after the other, uint16 or uint32, little endian, no header) or a 1-D integer
/// tensor. Batch i (of epoch e) holds, for each of its rows, block_size + 1 consecutive tokens from a start drawn by
/// a counter-based hash of (seed, epoch, i, row) over the global batch (batch_size × world_size rows, rank r taking
/// rows r·batch_size to (r+1)·batch_size - 1): `x` the first block_size tokens and `y` the last block_size, int64, as
/// nanoGPT's get_batch. So ranks draw different rows of one global batch (the same windows as one rank with the
/// global batch), a batch is a function of (seed, epoch, index, rank) alone, built on dereference, and a resumed run
/// continues the exact sequence (begin_at(k) starts at batch k without building any before it).
/// The start of row j of batch i in epoch e, for a stream of n tokens (window_start, written out in
/// docs/your-data.md and checked against a Python transcription in tests/differential/token_stream.py):
///   h = splitmix64(seed); h = splitmix64(h ^ e); h = splitmix64(h ^ i); h = splitmix64(h ^ j); start = h mod (n − block_size)
/// with splitmix64(z) = (z += 0x9E3779B97F4A7C15, z = (z ^ (z >> 30)) · 0xBF58476D1CE4E5B9,
/// z = (z ^ (z >> 27)) · 0x94D049BB133111EB, z ^ (z >> 31)), all modulo 2^64.
/// Length: endless (`batches_per_epoch` 0: a run by steps, FitOptions::max_steps, ends it), or `batches_per_epoch`
/// batches an epoch. Cost: a hash and a copy of block_size + 1 tokens per row, on the calling thread; the file's
/// pages are read by the system as the windows touch them.
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <torch/types.h>

#include <policytrain/core/batch.hpp>
#include <policytrain/detail/format.hpp>

namespace policytrain::data {

/// The width of a token file's ids.
enum class TokenType { uint16, uint32 };

/// How a TokenStream draws its batches.
struct TokenStreamOptions {
  int64_t block_size = 256;        ///< tokens of context per row (a window is block_size + 1 tokens)
  int64_t batch_size = 8;          ///< rows per batch on this rank
  uint64_t seed = 0;               ///< the windows' seed
  int64_t rank = 0;                ///< this process's rows of the global batch
  int64_t world_size = 1;          ///< ranks; the global batch has batch_size × world_size rows
  int64_t batches_per_epoch = 0;   ///< batches an epoch (0: endless; a run by steps ends it)
};

/// The splitmix64 step (Steele, Lea and Flood, 2014): the mixer of TokenStream's window starts.
constexpr uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The first token of row `row` (of the global batch) of batch `index` in epoch `epoch`, in a stream of `tokens`
/// tokens with windows of block_size + 1: the file comment's formula.
constexpr int64_t window_start(uint64_t seed, int64_t epoch, int64_t index, int64_t row, int64_t tokens,
                               int64_t block_size) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ static_cast<uint64_t>(epoch));
  h = splitmix64(h ^ static_cast<uint64_t>(index));
  h = splitmix64(h ^ static_cast<uint64_t>(row));
  return static_cast<int64_t>(h % static_cast<uint64_t>(tokens - block_size));
}

/// Random windows of a token stream, a batch a function of (seed, epoch, index, rank); see the file comment.
class TokenStream {
 public:
  /// Windows of the token file `file` (ids of `type`, nanoGPT's .bin), memory-mapped read-only. Throws
  /// std::invalid_argument naming the file when it cannot be mapped, is not a whole number of ids, or holds no more
  /// than block_size tokens, or on bad options.
  TokenStream(const std::filesystem::path& file, TokenType type, TokenStreamOptions o = {}) : o_(o) {
    const std::string what = "policytrain::data::TokenStream";
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          what, policytrain::detail::format("cannot open the token file '{}': {}", file.string(), std::strerror(errno)), {},
          "give the path of a token file (nanoGPT's train.bin)"));
    struct stat st {};
    const int rc = ::fstat(fd, &st);
    const size_t width = type == TokenType::uint16 ? 2 : 4;
    const auto bytes = rc == 0 ? static_cast<size_t>(st.st_size) : 0;
    if (rc != 0 || bytes % width != 0 || bytes == 0) {
      ::close(fd);
      throw std::invalid_argument(policytrain::detail::error_message(
          what, policytrain::detail::format("the token file '{}' has {} bytes, not a whole number of {}-byte ids", file.string(),
                               bytes, width),
          {}, "check the file and its token type (uint16 for vocabularies up to 65536, else uint32)"));
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED)
      throw std::invalid_argument(policytrain::detail::error_message(
          what, policytrain::detail::format("cannot map the token file '{}': {}", file.string(), std::strerror(errno))));
    map_ = std::shared_ptr<void>(p, [bytes](void* q) { ::munmap(q, bytes); });
    data_ = p;
    type_ = type == TokenType::uint16 ? torch::kUInt16 : torch::kUInt32;
    tokens_ = static_cast<int64_t>(bytes / width);
    check(file.string());
  }

  /// Windows of a 1-D tensor of token ids (int32, int64, uint16 or uint32; kept, on the CPU and contiguous).
  explicit TokenStream(torch::Tensor tokens, TokenStreamOptions o = {}) : o_(o) {
    const std::string what = "policytrain::data::TokenStream";
    const auto t = tokens.scalar_type();
    if (tokens.dim() != 1 || (t != torch::kInt32 && t != torch::kInt64 && t != torch::kUInt16 && t != torch::kUInt32))
      throw std::invalid_argument(policytrain::detail::error_message(
          what, policytrain::detail::format("the tokens are a {}-dimensional tensor of {}", tokens.dim(), c10::toString(t)),
          {}, "give a 1-D tensor of token ids (int32, int64, uint16 or uint32)"));
    tensor_ = tokens.to(torch::kCPU).contiguous();
    data_ = tensor_.data_ptr();
    type_ = t;
    tokens_ = tensor_.numel();
    check("the tensor");
  }

  /// The settings.
  const TokenStreamOptions& options() const { return o_; }
  /// Tokens in the stream.
  int64_t tokens() const { return tokens_; }
  /// Selects the epoch whose windows the next pass draws (the Trainer calls it at every epoch's start).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  /// The current epoch.
  int64_t epoch() const { return epoch_; }
  /// Batches an epoch, or -1 when endless (the Trainer's "unknown length").
  int64_t batches_per_epoch() const { return o_.batches_per_epoch > 0 ? o_.batches_per_epoch : -1; }

  /// Batch `index` of the current epoch on this rank: rows of block_size + 1 tokens as x (the first block_size) and
  /// y (the last block_size), int64.
  Batch batch(int64_t index) const {
    const int64_t b = o_.batch_size, w = o_.block_size + 1;
    auto rows = torch::empty({b, w}, torch::kLong);
    int64_t* out = rows.data_ptr<int64_t>();
    for (int64_t r = 0; r < b; ++r) {
      const int64_t start = window_start(o_.seed, epoch_, index, o_.rank * b + r, tokens_, o_.block_size);
      copy_tokens(start, w, out + r * w);
    }
    return Batch{rows.slice(1, 0, o_.block_size).contiguous(), rows.slice(1, 1, w).contiguous()};
  }

  /// Walks the batches of an epoch; a batch is built on dereference only.
  class Iterator {
   public:
    /// What std::input_iterator requires; a batch is built by operator* only.
    ///@{
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Batch;
    Iterator() = default;
    Iterator(const TokenStream* s, int64_t i) : s_(s), i_(i) {}
    Batch operator*() const { return s_->batch(i_); }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }
    ///@}

   private:
    const TokenStream* s_ = nullptr;
    int64_t i_ = 0;
  };
  /// The first batch of the epoch.
  Iterator begin() const { return {this, 0}; }
  /// Batch k of the epoch, with none before it built: a resumed epoch's start.
  Iterator begin_at(int64_t k) const { return {this, k}; }
  /// The end of the epoch (never reached when endless).
  Iterator end() const { return {this, o_.batches_per_epoch > 0 ? o_.batches_per_epoch : std::numeric_limits<int64_t>::max()}; }

 private:
  void check(const std::string& source) const {
    const std::string what = "policytrain::data::TokenStream";
    if (o_.block_size <= 0 || o_.batch_size <= 0 || o_.batches_per_epoch < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          what, policytrain::detail::format("block_size {}, batch_size {}, batches_per_epoch {}", o_.block_size, o_.batch_size,
                               o_.batches_per_epoch),
          "block_size and batch_size > 0, batches_per_epoch >= 0"));
    if (o_.world_size <= 0 || o_.rank < 0 || o_.rank >= o_.world_size)
      throw std::invalid_argument(policytrain::detail::error_message(
          what, policytrain::detail::format("rank {} of world size {} is invalid", o_.rank, o_.world_size)));
    if (tokens_ <= o_.block_size)
      throw std::invalid_argument(policytrain::detail::error_message(
          what, policytrain::detail::format("{} holds {} tokens; a window needs block_size + 1 = {}", source, tokens_,
                               o_.block_size + 1),
          {}, "give a longer stream or a smaller block_size"));
  }

  void copy_tokens(int64_t start, int64_t n, int64_t* out) const {
    auto copy = [&](const auto* p) {
      for (int64_t k = 0; k < n; ++k) out[k] = static_cast<int64_t>(p[start + k]);
    };
    switch (type_) {
      case torch::kUInt16: copy(static_cast<const uint16_t*>(data_)); break;
      case torch::kUInt32: copy(static_cast<const uint32_t*>(data_)); break;
      case torch::kInt32: copy(static_cast<const int32_t*>(data_)); break;
      default: copy(static_cast<const int64_t*>(data_)); break;
    }
  }

  TokenStreamOptions o_;
  std::shared_ptr<void> map_;  ///< the file's mapping (shared by copies; unmapped with the last)
  torch::Tensor tensor_;       ///< or the tensor the tokens are in
  const void* data_ = nullptr;
  torch::ScalarType type_ = torch::kUInt16;
  int64_t tokens_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace policytrain::data
