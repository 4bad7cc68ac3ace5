#pragma once
// The forward pass of a decoder (Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3,
// and the mixtures of experts Qwen3-MoE, Mixtral and OLMoE)
// on the CPU over a flattened batch: any mix of sequences, each contributing
// a chunk of prompt tokens or one decode token, attending through a paged KV
// cache. What a family adds to Llama's layer (biases, q/k norms, post norms,
// GeGLU, soft-caps, sliding windows) is chosen per layer, never per element.

#include "engine/cpu/moe.hpp"
#include "engine/cpu/paged_attention.hpp"
#include "engine/cpu/rope.hpp"
#include "engine/model/model_weights.hpp"
#include "engine/model/tensor_parallel.hpp"
#include "base/types.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace troupe {

class cpu_model {
public:
  /// One sequence's chunk: tokens at positions [start_position, + size).
  struct chunk {
    std::span<const token_id> tokens;
    std::int32_t start_position = 0;
    std::span<const block_id> block_table; ///< covers every position up to the chunk's end
    bool all_logits = false; ///< a logits row for each of its tokens, not only its last
  };

  /// `weights` must outlive the model. The KV cache holds num_kv_blocks blocks
  /// of block_size tokens in kv_type. With tensor parallelism, `weights` is
  /// this rank's shard (shard_weights) and `reduce` its end of the group's
  /// all-reduce (both must outlive the model); else reduce is nullptr.
  cpu_model(const model_weights& weights, std::int32_t block_size, std::int32_t num_kv_blocks,
            all_reduce* reduce = nullptr, kv_dtype kv_type = kv_dtype::f32);

  /// Runs the chunks as one batch, writing their keys and values into the
  /// cache. logits receives [rows, vocab]: one row per token of every chunk
  /// when all_logits, else one per token of a chunk with all_logits and one
  /// for the last token of every other, in batch order.
  void forward(std::span<const chunk> batch, bool all_logits, std::vector<float>& logits);

  auto config() const -> const model_config& { return w_.config; }
  auto kv_cache() -> paged_kv_cache& { return cache_; }

private:
  void mlp(const layer_weights& lw, std::int64_t t_rows, float* proj);
  void head(std::span<const chunk> batch, bool all_logits, std::int64_t t_rows, std::vector<float>& logits);

  const model_weights& w_;
  all_reduce* reduce_;
  paged_kv_cache cache_;
  rotary_embedding rope_;
  std::optional<rotary_embedding> local_rope_; ///< Gemma 3's sliding layers
  float embed_scale_ = 1.0f;                   ///< Gemma: √hidden in the embedding's dtype
  moe_mlp moe_;                                ///< a mixture of experts' MLP
  // Scratch reused across steps; resizing within capacity allocates nothing.
  std::vector<float> x_, xn_, q_, k_, v_, att_, gate_, up_, proj_, cos_, sin_, local_cos_, local_sin_, last_;
  std::vector<std::int32_t> positions_;
  std::vector<attention_row> rows_;
  std::vector<const token_id*> token_ptrs_;
};

} // namespace troupe
