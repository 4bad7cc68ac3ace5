#include "engine/cpu/linear.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace troupe {
namespace {

void widen(dtype t, const void* src, std::int64_t n, float* out) {
  const auto* h = static_cast<const std::uint16_t*>(src);
  if (t == dtype::bf16) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(h[i]);
  } else if (t == dtype::f16) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(h[i]);
  } else {
    std::memcpy(out, src, static_cast<std::size_t>(n) * 4);
  }
}

// A half-precision matrix is widened kRows rows at a time into a scratch tile
// that stays in L2, then multiplied there.
constexpr std::int64_t k_tile_rows = 128;

void linear_half(const float* x, std::int64_t num_tokens, const weight_tensor& w, float* y) {
  const std::int64_t cols = w.cols;
  std::vector<float> tile(static_cast<std::size_t>(k_tile_rows * cols));
  std::vector<float> out(static_cast<std::size_t>(num_tokens * k_tile_rows));
  for (std::int64_t r0 = 0; r0 < w.rows; r0 += k_tile_rows) {
    const std::int64_t n = std::min(k_tile_rows, w.rows - r0);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < n; ++r) widen(w.type, w.row(r0 + r), cols, tile.data() + r * cols);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(num_tokens),
                static_cast<int>(n), static_cast<int>(cols), 1.0f, x, static_cast<int>(cols),
                tile.data(), static_cast<int>(cols), 0.0f, out.data(), static_cast<int>(n));
    for (std::int64_t t = 0; t < num_tokens; ++t)
      std::memcpy(y + t * w.rows + r0, out.data() + t * n, static_cast<std::size_t>(n) * 4);
  }
}

} // namespace

void linear(const float* x, std::int64_t num_tokens, const weight_tensor& w, float* y) {
  if (num_tokens <= 0 || w.rows == 0) return;
  if (w.type != dtype::f32) {
    linear_half(x, num_tokens, w, y);
    return;
  }
  const auto* a = static_cast<const float*>(w.data);
  const int rows = static_cast<int>(w.rows), cols = static_cast<int>(w.cols);
  if (num_tokens == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, cols, 1.0f, a, cols, x, 1, 0.0f, y, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(num_tokens), rows, cols,
              1.0f, x, cols, a, cols, 0.0f, y, rows);
}

void load_row(const weight_tensor& w, std::int64_t row, float* out) {
  widen(w.type, w.row(row), w.cols, out);
}

} // namespace troupe
