#pragma once
// Host launchers of the element- and row-wise kernels (elementwise.cu).
// Plain C++: included by the executor, which g++ compiles. Every pointer is
// device memory; `act` is the element type of activations, weights and the
// KV cache (F32 or BF16); norm weights and RoPE tables are F32.

#include "base/dtype.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace troupe::kernels {

/// out[t] = table[ids[t]], rows of dim.
struct embedding_params {
  const void* table = nullptr; ///< [vocab, dim]
  const std::int32_t* ids = nullptr;
  std::int64_t rows = 0, dim = 0;
  void* out = nullptr; ///< [rows, dim]
};
void embedding(dtype act, const embedding_params& p, cudaStream_t stream);

/// The residual add fused with the norm: residual += add (when add is not
/// null), then out = residual / sqrt(mean(residual²) + eps) * weight.
struct rms_norm_params {
  void* residual = nullptr;     ///< [rows, dim]
  const void* add = nullptr;    ///< [rows, dim] or nullptr
  const float* weight = nullptr; ///< [dim]
  void* out = nullptr;          ///< [rows, dim]; may not alias residual
  std::int64_t rows = 0, dim = 0;
  float eps = 1e-6f;
};
void rms_norm(dtype act, const rms_norm_params& p, cudaStream_t stream);

/// Rotates q's and k's heads in place (Hugging Face's rotate-half pairing),
/// reading cos/sin of each row's position from tables built on the host
/// (llama3 or linear scaling already applied): [max_positions, head_dim/2].
struct rope_params {
  void* qkv = nullptr;          ///< [rows, row_stride]: q heads, then k heads (then v)
  std::int64_t row_stride = 0;  ///< elements
  const std::int32_t* positions = nullptr; ///< [rows]
  const float* cos = nullptr;
  const float* sin = nullptr;
  std::int64_t rows = 0, num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
};
void rope(dtype act, const rope_params& p, cudaStream_t stream);

/// out[t, i] = silu(gate_up[t, i]) * gate_up[t, inter + i]: the fused
/// gate/up product's two halves.
struct swiglu_params {
  const void* gate_up = nullptr; ///< [rows, 2 * inter]
  void* out = nullptr;           ///< [rows, inter]
  std::int64_t rows = 0, inter = 0;
};
void swiglu(dtype act, const swiglu_params& p, cudaStream_t stream);

/// Writes each row's keys and values (from the fused qkv rows) into its
/// slot of the paged cache: slot = block * block_size + offset. Cache layout
/// per layer: [num_blocks, num_kv_heads, block_size, head_dim], for keys and
/// values alike. Rows with slot < 0 (padding) are skipped.
struct kv_append_params {
  const void* qkv = nullptr;   ///< [rows, row_stride]; k at column k_offset, v at v_offset
  std::int64_t row_stride = 0, k_offset = 0, v_offset = 0;
  const std::int32_t* slots = nullptr; ///< [rows]
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  std::int64_t rows = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
};
void kv_append(dtype act, const kv_append_params& p, cudaStream_t stream);

/// dst[i] = src[i] converted, for uploading weights in the executor's type.
void convert(dtype from, const void* src, dtype to, void* dst, std::int64_t n, cudaStream_t stream);

} // namespace troupe::kernels
