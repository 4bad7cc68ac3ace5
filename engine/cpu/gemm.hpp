#pragma once
// Matrix products for the shapes of LLM inference: y = x · Wᵀ, x in F32, the
// weight W [n, k] in its checkpoint dtype, few rows of x. Written for the
// memory-bound (decode) and small-batch regimes; parallel over weight rows
// with OpenMP, so each weight byte is read by one thread once.
//
// Batch invariance: every output y[b, j] is one chain of fused multiply-adds
// over k in ascending order, starting from zero, whatever m, the row's place
// among the rows of x, the thread count or the weight layout. So a row of x
// gives the same bits alone (decode at batch 1) as inside any batch.

#include "base/dtype.hpp"
#include "engine/model/weight_layout.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace troupe {

/// One matrix of a gemm_multi: y[m, n] = x[m, k] · w[n, k]ᵀ, w in any weight
/// dtype (F16/BF16 widened in registers: half the bytes read) and layout.
struct matmul_job {
  const void* w;
  dtype type;
  std::int64_t n;
  float* y;
  weight_layout layout = weight_layout::row_major;
};

/// Sums n floats with four independent vector accumulators: the sequential
/// read that decode is measured against (the memory read bandwidth).
auto read_sum_f32(const float* p, std::int64_t n) -> float;

/// y[m, n] = Σ_k x[m, k] · w[n, k] for any m >= 1. For m >= 2, x is packed
/// into panels of 16 rows (k-major) that stay in L2 while the weight rows
/// stream past (each broadcast against a panel), each weight read from
/// memory once. For m = 1 with packed16 weights, 16 weight rows lie in one
/// vector and x[k] is broadcast: a plain stream of the weights. (Row-major
/// weights at m = 1 take the panel path with one row: the same sums, slower;
/// serving packs its weights, see pack_weights.)
void gemm(const float* x, std::int64_t m, const void* w, dtype type, std::int64_t n, std::int64_t k, float* y,
          weight_layout layout = weight_layout::row_major);

/// gemm for several weights sharing x (q/k/v, gate/up), all in one layout
/// (one model's): x is packed once and all jobs run in one parallel region.
void gemm_multi(const float* x, std::int64_t m, std::int64_t k, std::span<const matmul_job> jobs);

/// Bytes of a packed16 copy of an [n, k] matrix of `type` (n rounded up to 16).
auto packed16_bytes(dtype type, std::int64_t n, std::int64_t k) -> std::size_t;

/// Writes the row-major [n, k] matrix src as packed16 into dst
/// (packed16_bytes; the padding rows are zero). Parallel over row groups.
void pack16(const void* src, dtype type, std::int64_t n, std::int64_t k, void* dst);

/// Element (row, col) of a packed16 [?, k] matrix, as F32.
auto packed16_at(const void* w, dtype type, std::int64_t k, std::int64_t row, std::int64_t col) -> float;

} // namespace troupe
