#pragma once
// Causal attention over a paged KV cache (PagedAttention, Kwon et al.,
// SOSP'23): a sequence's keys and values live in fixed-size blocks named by
// its block table, so sequences share one pool without copying.

#include "engine/types.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace troupe {

/// The keys and values of every layer: per layer, K and V of shape
/// [num_blocks, block_size, num_kv_heads, head_dim], F32.
class paged_kv_cache {
public:
  paged_kv_cache(std::int64_t num_layers, std::int32_t num_blocks, std::int32_t block_size,
                 std::int64_t num_kv_heads, std::int64_t head_dim);

  auto block_size() const -> std::int32_t { return block_size_; }
  auto num_blocks() const -> std::int32_t { return num_blocks_; }
  auto bytes() const -> std::size_t { return storage_.size() * sizeof(float); }
  /// Floats of one slot's keys (or values): num_kv_heads * head_dim.
  auto row_floats() const -> std::int64_t { return row_floats_; }
  /// Bytes of K and V for one token across all layers.
  static auto bytes_per_token(std::int64_t num_layers, std::int64_t num_kv_heads,
                              std::int64_t head_dim) -> std::size_t {
    return static_cast<std::size_t>(2 * num_layers * num_kv_heads * head_dim) * sizeof(float);
  }

  /// Address of the key (value) vectors of all kv heads at one slot.
  auto key(std::int64_t layer, block_id b, std::int32_t slot) -> float*;
  auto value(std::int64_t layer, block_id b, std::int32_t slot) -> float*;

private:
  std::int64_t row_floats_; ///< num_kv_heads * head_dim
  std::int64_t layer_floats_;
  std::int32_t num_blocks_;
  std::int32_t block_size_;
  std::vector<float> storage_;
};

/// One token's view of its sequence for attention.
struct attention_row {
  std::int32_t position;                 ///< attends to positions [0, position]
  std::span<const block_id> block_table; ///< of its sequence
};

/// For each row t: writes k[t], v[t] ([num_kv_heads * head_dim]) into the slot
/// of rows[t].position.
void write_kv(paged_kv_cache& cache, std::int64_t layer, std::span<const attention_row> rows,
              const float* k, const float* v);

/// out[t, h] = softmax(q[t, h] · K[0..pos]ᵀ / √head_dim) · V[0..pos] with the
/// kv head h / (num_heads / num_kv_heads) (grouped-query attention).
/// q, out: [rows, num_heads * head_dim]. Parallel over rows and heads.
void paged_attention(paged_kv_cache& cache, std::int64_t layer,
                     std::span<const attention_row> rows, const float* q, std::int64_t num_heads,
                     std::int64_t num_kv_heads, std::int64_t head_dim, float* out);

} // namespace troupe
