#pragma once
/// \file
/// parallel::Dim0Chunk — the arithmetic of sharding a tensor on dim 0 across the ranks as PyTorch's FSDP2 does
/// (`torch.chunk` semantics, padded): every rank's piece is ceil(rows / world) rows long once padded, rank r holds
/// rows [min(rows, c r), min(rows, c (r + 1))) of the full tensor, and the ranks past the last chunk hold an empty
/// piece (4 rows on 3 ranks: 2, 2 and 0). The layout depends on the tensor's shape and the world size only, so it is
/// the same for every stage, checkpoint and process; stage 3 of parallel::ShardedDataParallel is built on it.
/// Pure functions of integers and tensors; no process group.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <torch/types.h>

#include <policytrain/detail/format.hpp>

namespace policytrain::parallel {

/// How a tensor of `rows` rows on dim 0 is chunked over `world` ranks (see the file comment).
struct Dim0Chunk {
  int64_t rows = 0;   ///< dim 0 of the full tensor
  int64_t chunk = 0;  ///< rows of every rank's padded piece: ceil(rows / world)
  int64_t world = 1;  ///< ranks

  /// The chunking of `rows` rows over `world` ranks. Throws std::invalid_argument for world < 1 or rows < 0.
  static Dim0Chunk of(int64_t rows, int64_t world) {
    if (world < 1 || rows < 0)
      throw std::invalid_argument(policytrain::detail::error_message(
          "policytrain::parallel::Dim0Chunk",
          policytrain::detail::format("{} rows over {} ranks; expected rows >= 0 and at least 1 rank", rows, world)));
    return {rows, (rows + world - 1) / world, world};
  }
  /// The first row of rank `r`'s piece.
  int64_t begin(int64_t r) const { return std::min(rows, chunk * r); }
  /// The rows of rank `r`'s piece (0 past the last chunk).
  int64_t size(int64_t r) const { return std::min(rows, chunk * (r + 1)) - begin(r); }
  /// Rows of the padded full tensor: chunk * world.
  int64_t padded_rows() const { return chunk * world; }
};

/// Rank `r`'s piece of `full` (a view: rows Dim0Chunk::begin(r) to begin(r) + size(r) on dim 0).
inline torch::Tensor dim0_piece(const torch::Tensor& full, int64_t r, int64_t world) {
  const auto c = Dim0Chunk::of(full.size(0), world);
  return full.narrow(0, c.begin(r), c.size(r));
}

/// `t` with zero rows appended on dim 0 up to `rows` (itself when it has them already).
inline torch::Tensor pad_dim0(const torch::Tensor& t, int64_t rows) {
  if (t.size(0) == rows) return t;
  auto sizes = t.sizes().vec();
  sizes[0] = rows - t.size(0);
  return torch::cat({t, torch::zeros(sizes, t.options())}, 0);
}

}  // namespace policytrain::parallel
