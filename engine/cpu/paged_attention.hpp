#pragma once
// Causal attention over a paged KV cache (PagedAttention, Kwon et al.,
// SOSP'23): a sequence's keys and values live in fixed-size blocks named by
// its block table, so sequences share one pool without copying.

#include "engine/core/kv_dtype.hpp"
#include "base/types.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace troupe {

/// The keys and values of every layer, in the cache's kv_dtype. Per layer,
/// K is [num_blocks, num_kv_heads, head_dim, block_size] — transposed, so the
/// scores of a block's slots are vector FMAs with no horizontal sums — and V
/// is [num_blocks, num_kv_heads, block_size, head_dim]: one head's keys (and
/// values) of a block are one tile, contiguous, so attention streams them.
/// Q8_0 keeps both per token instead ([block_size, head_dim] in Q8_0
/// blocks: a token's values share a block's scale), widened to the F32
/// layouts above when read.
class paged_kv_cache {
public:
  paged_kv_cache(std::int64_t num_layers, std::int32_t num_blocks, std::int32_t block_size,
                 std::int64_t num_kv_heads, std::int64_t head_dim, kv_dtype type = kv_dtype::f32);

  auto block_size() const -> std::int32_t { return block_size_; }
  auto num_blocks() const -> std::int32_t { return num_blocks_; }
  paged_kv_cache(const paged_kv_cache&) = delete;
  auto operator=(const paged_kv_cache&) -> paged_kv_cache& = delete;

  auto type() const -> kv_dtype { return type_; }
  auto num_kv_heads() const -> std::int64_t { return num_kv_heads_; }
  auto head_dim() const -> std::int64_t { return head_dim_; }
  /// Bytes one block holds over every layer, keys and values (kv_block_bytes).
  auto block_bytes() const -> std::int64_t {
    return kv_block_bytes(type_, num_layers_, num_kv_heads_, head_dim_, block_size_);
  }
  /// Copies block b's keys and values of every layer to dst (block_bytes():
  /// host swap space), or back from src.
  void save_block(block_id b, std::byte* dst) const;
  void load_block(block_id b, const std::byte* src);
  /// Stores one token's keys and values of one kv head (head_dim each) in
  /// its slot of block b.
  void write(std::int64_t layer, block_id b, std::int64_t kv_head, std::int32_t slot, const float* k,
             const float* v);
  /// One kv head's keys in one block as F32 [head_dim, block_size], and its
  /// values as [block_size, head_dim]: the tile itself for f32, else widened
  /// into scratch (head_dim * block_size floats) and scratch returned. Only
  /// slots [lo, hi) are widened (hi < 0: to the block's end); the others
  /// of scratch are left as they were.
  auto keys(std::int64_t layer, block_id b, std::int64_t kv_head, float* scratch, std::int32_t lo = 0,
            std::int32_t hi = -1) const -> const float*;
  auto values(std::int64_t layer, block_id b, std::int64_t kv_head, float* scratch, std::int32_t lo = 0,
              std::int32_t hi = -1) const -> const float*;

private:
  auto key_tile(std::int64_t layer, block_id b, std::int64_t kv_head) const -> std::byte* {
    return storage_ + layer * layer_bytes_ + (static_cast<std::int64_t>(b) * num_kv_heads_ + kv_head) * tile_bytes_;
  }
  auto value_tile(std::int64_t layer, block_id b, std::int64_t kv_head) const -> std::byte* {
    return key_tile(layer, b, kv_head) + layer_bytes_ / 2;
  }

  kv_dtype type_;
  std::int64_t num_layers_;
  std::int64_t num_kv_heads_;
  std::int64_t head_dim_;
  std::int32_t num_blocks_;
  std::int32_t block_size_;
  std::int64_t tile_bytes_;  ///< one kv head's keys (or values) in one block
  std::int64_t layer_bytes_; ///< keys, then values, of every block in one layer
  std::shared_ptr<std::byte> mapping_; ///< map_huge_pages: zeroed lazily, 2 MiB pages
  std::byte* storage_;
};

/// One token's view of its sequence for attention.
struct attention_row {
  std::int32_t position;                 ///< attends to positions [0, position]
  std::span<const block_id> block_table; ///< of its sequence
};

/// How scores are formed; the defaults are Llama's.
struct attention_options {
  float scale = 0.0f;   ///< multiplies q · k; 0: 1 / √head_dim
  float softcap = 0.0f; ///< > 0: score = softcap · tanh(score / softcap) (Gemma 2)
  /// > 0: a token at position p attends to positions (p - window, p] only
  /// (sliding-window attention: Mistral, Gemma's local layers).
  std::int32_t window = 0;
  /// gpt-oss: a logit per query head that joins each softmax's maximum and
  /// denominator and adds no value (an attention sink); nullptr: none.
  const float* sinks = nullptr;
};

/// For each row t: writes k[t], v[t] ([num_kv_heads * head_dim]) into the slot
/// of rows[t].position.
void write_kv(paged_kv_cache& cache, std::int64_t layer, std::span<const attention_row> rows,
              const float* k, const float* v);

/// out[t, h] = softmax(q[t, h] · K[lo..pos]ᵀ · scale) · V[lo..pos] with the
/// kv head h / (num_heads / num_kv_heads) (grouped-query attention); lo is 0,
/// or pos - window + 1 with a window. q, out: [rows, num_heads * head_dim].
/// Parallel over rows and heads; each output a fixed-order reduction.
void paged_attention(paged_kv_cache& cache, std::int64_t layer,
                     std::span<const attention_row> rows, const float* q, std::int64_t num_heads,
                     std::int64_t num_kv_heads, std::int64_t head_dim, float* out,
                     const attention_options& options = {});

} // namespace troupe
