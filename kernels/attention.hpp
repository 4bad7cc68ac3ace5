#pragma once
// Host launchers of the attention kernels over the paged KV cache
// (attention.cu). Cache layout per layer, keys and values alike:
// [num_blocks, num_kv_heads, block_size, head_dim] of the activation type.

#include "base/dtype.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace troupe::kernels {

/// Decode: one query row per sequence attending to its context_len cached
/// positions. One pass over a KV block serves every query head of its kv
/// head (GQA); a long context is split into num_splits ranges computed in
/// parallel and merged (split-K).
struct decode_attention_params {
  const void* q = nullptr;            ///< query rows, [*, q_stride]: heads at column 0
  std::int64_t q_stride = 0;          ///< elements between rows
  const std::int32_t* q_rows = nullptr; ///< [num_seqs]: each sequence's query row
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const std::int32_t* block_tables = nullptr; ///< [num_seqs, max_blocks]
  std::int64_t max_blocks = 0;
  const std::int32_t* context_lens = nullptr; ///< [num_seqs]; 0: padding, writes nothing
  void* out = nullptr;                ///< [*, num_q_heads * head_dim], row q_rows[s]
  std::int64_t num_seqs = 0, num_q_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  float scale = 1.0f;                 ///< 1/sqrt(head_dim)
  int num_splits = 1;                 ///< >1: partials in `workspace`
  float* workspace = nullptr;         ///< decode_workspace_floats() floats
};
auto decode_workspace_floats(const decode_attention_params& p) -> std::int64_t;
void decode_attention(dtype act, const decode_attention_params& p, cudaStream_t stream);

/// Chunked prefill: each query row attends causally to its sequence's cached
/// positions [0, position] (its chunk's keys and values already appended),
/// in tiles as in flash attention (online softmax, nothing of size
/// context² in memory).
struct prefill_attention_params {
  const void* q = nullptr;            ///< [rows, q_stride]
  std::int64_t q_stride = 0;
  const std::int32_t* positions = nullptr; ///< [rows]
  const std::int32_t* row_seq = nullptr;   ///< [rows]: the row's sequence, indexing block_tables
  const std::int32_t* tile_first_row = nullptr; ///< [num_tiles]: tiles of rows of one sequence each
  const std::int32_t* tile_num_rows = nullptr;  ///< [num_tiles], each <= prefill_tile_rows
  std::int64_t num_tiles = 0;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const std::int32_t* block_tables = nullptr; ///< [num_seqs, max_blocks]
  std::int64_t max_blocks = 0;
  void* out = nullptr;                ///< [rows, num_q_heads * head_dim]
  std::int64_t num_q_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  float scale = 1.0f;
};
/// Query rows per tile of prefill_attention.
inline constexpr int prefill_tile_rows = 16;
/// Largest head_dim the kernels take.
inline constexpr int max_head_dim = 256;
void prefill_attention(dtype act, const prefill_attention_params& p, cudaStream_t stream);

} // namespace troupe::kernels
