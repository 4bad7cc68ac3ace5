#include "engine/cpu/linear.hpp"

#include "engine/cpu/gemm.hpp"

#include <algorithm>
#include <vector>

namespace troupe {

void linear(const float* x, std::int64_t num_tokens, const weight_tensor& w, float* y) {
  if (num_tokens > 0 && w.rows > 0) gemm(x, num_tokens, w.data, w.type, w.rows, w.cols, y);
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
  for (std::int64_t c = 0; c < w.cols; ++c) out[c] = load_as_f32(w.type, w.row(row), static_cast<std::size_t>(c));
}

} // namespace troupe
