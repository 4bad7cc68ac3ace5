#pragma once
// y = x · Wᵀ for any weight dtype, the CPU backend's one matrix product.

#include "engine/model/model_weights.hpp"

#include <cstdint>
#include <initializer_list>
#include <utility>

namespace troupe {

/// y[t, r] = Σ_c x[t, c] · w[r, c] for t < num_tokens, r < w.rows.
/// x: [num_tokens, w.cols], y: [num_tokens, w.rows], both row-major F32 and
/// not aliasing. Weights are used in place in their dtype and layout (see
/// gemm); uses the threads of set_cpu_threads(). Bitwise batch-invariant:
/// a row of x gives the same row of y whatever num_tokens.
void linear(const float* x, std::int64_t num_tokens, const weight_tensor& w, float* y);

/// linear() for several weights sharing the input x, e.g. q/k/v: ys[i] =
/// x · ws[i]ᵀ, at most 4, all of the same input size: x is read (or packed) once and
/// one parallel region runs them all.
void linear_multi(const float* x, std::int64_t num_tokens,
                  std::initializer_list<std::pair<const weight_tensor*, float*>> outputs);

/// out[c] = w[row, c] as F32, for embedding look-ups (either layout).
void load_row(const weight_tensor& w, std::int64_t row, float* out);

} // namespace troupe
