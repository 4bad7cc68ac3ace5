#include "engine/cpu/linear.hpp"

#include "engine/cpu/gemm.hpp"

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

// A half-precision matrix is widened k_tile_rows rows at a time into a scratch tile
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
    gemm_f32(x, num_tokens, tile.data(), n, cols, out.data());
    for (std::int64_t t = 0; t < num_tokens; ++t)
      std::memcpy(y + t * w.rows + r0, out.data() + t * n, static_cast<std::size_t>(n) * 4);
  }
}

} // namespace

void linear(const float* x, std::int64_t num_tokens, const weight_tensor& w, float* y) {
  if (num_tokens <= 0 || w.rows == 0) return;
  if (num_tokens == 1) {
    const gemv_job job{w.data, w.type, w.rows, y};
    gemv_multi(x, w.cols, std::span(&job, 1));
    return;
  }
  if (w.type != dtype::f32) {
    linear_half(x, num_tokens, w, y);
    return;
  }
  gemm_f32(x, num_tokens, static_cast<const float*>(w.data), w.rows, w.cols, y);
}

void linear_multi(const float* x, std::int64_t num_tokens,
                  std::initializer_list<std::pair<const weight_tensor*, float*>> outputs) {
  const bool fused = num_tokens == 1 && std::all_of(outputs.begin(), outputs.end(), [&](const auto& o) {
    return o.first->cols == outputs.begin()->first->cols;
  });
  if (!fused) {
    for (const auto& [w, y] : outputs) linear(x, num_tokens, *w, y);
    return;
  }
  std::vector<gemv_job> jobs;
  for (const auto& [w, y] : outputs) jobs.push_back({w->data, w->type, w->rows, y});
  gemv_multi(x, outputs.begin()->first->cols, jobs);
}

void load_row(const weight_tensor& w, std::int64_t row, float* out) {
  widen(w.type, w.row(row), w.cols, out);
}

} // namespace troupe
