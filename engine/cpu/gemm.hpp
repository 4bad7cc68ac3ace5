#pragma once
// Matrix products for the shapes of LLM inference: y = x · Wᵀ, x in F32, the
// weight W [n, k] row-major in its checkpoint dtype, few rows of x.
// Written for the memory-bound (decode) and small-batch regimes; parallel
// over weight rows with OpenMP, so each weight byte is read by one thread once.

#include "engine/model/dtype.hpp"

#include <cstdint>
#include <span>

namespace troupe {

/// One matrix of a gemv_multi / gemm_multi: y[m, n] = x[m, k] · w[n, k]ᵀ, w
/// in any weight dtype (F16/BF16 widened in registers: half the bytes read).
struct matmul_job {
  const void* w;
  dtype type;
  std::int64_t n;
  float* y;
};

/// Several matrix-vector products with the same x (q/k/v, gate/up) in one
/// parallel region, the threads splitting the rows of all of them: one fork
/// and join instead of one per matrix, which matters when each takes tens of µs.
void gemv_multi(const float* x, std::int64_t k, std::span<const matmul_job> jobs);

/// Sums n floats with four independent vector accumulators: the sequential
/// read that the GEMV is measured against (the memory read bandwidth).
auto read_sum_f32(const float* p, std::int64_t n) -> float;

/// y[m, n] = Σ_k x[m, k] · w[n, k] for any m >= 1, w in any weight dtype
/// (F16/BF16 widened in registers). m = 1 is a gemv_multi of one job; else x
/// is packed into panels of 16 or 32 rows (k-major) that stay in L2 while the
/// weight rows stream past, each weight read from memory once.
void gemm(const float* x, std::int64_t m, const void* w, dtype type, std::int64_t n,
          std::int64_t k, float* y);

/// gemm for several weights sharing x (q/k/v, gate/up): x is packed once and
/// all jobs run in one parallel region.
void gemm_multi(const float* x, std::int64_t m, std::int64_t k, std::span<const matmul_job> jobs);

} // namespace troupe
