#include "engine/cpu/linear.hpp"

#include "base/check.hpp"
#include "engine/cpu/gemm.hpp"
#include "engine/cpu/quant_gemm.hpp"
#include "engine/formats/gguf_quant.hpp"

#include <array>
#include <span>

namespace troupe {

void linear(const float* x, std::int64_t num_tokens, const weight_tensor& w, float* y) {
  if (num_tokens <= 0 || w.rows <= 0) return;
  if (w.quant)
    quant_gemm(x, num_tokens, static_cast<const std::byte*>(w.data), *w.quant, w.rows, w.cols, y);
  else
    gemm(x, num_tokens, w.data, w.type, w.rows, w.cols, y, w.layout);
}

void linear_multi(const float* x, std::int64_t num_tokens,
                  std::initializer_list<std::pair<const weight_tensor*, float*>> outputs) {
  if (num_tokens <= 0 || outputs.size() == 0) return;
  TROUPE_CHECK(outputs.size() <= 4, "linear_multi takes at most 4 weights");
  const std::int64_t cols = outputs.begin()->first->cols;
  std::array<matmul_job, 4> jobs;
  std::array<quant_job, 4> quant_jobs;
  std::size_t n = 0, nq = 0;
  for (const auto& [w, y] : outputs) {
    TROUPE_CHECK(w->cols == cols, "linear_multi weights share their input size");
    if (w->quant)
      quant_jobs[nq++] = {static_cast<const std::byte*>(w->data), *w->quant, w->rows, y};
    else
      jobs[n++] = {w->data, w->type, w->rows, y, w->layout};
  }
  // A model's matrices are all float or all quantized, but for a float
  // matrix among quantized ones (a GGUF file may keep one in F16): each kind
  // in its own region.
  if (n > 0) gemm_multi(x, num_tokens, cols, std::span(jobs).first(n));
  if (nq > 0) quant_gemm_multi(x, num_tokens, cols, std::span(quant_jobs).first(nq));
}

void load_row(const weight_tensor& w, std::int64_t row, float* out) {
  if (w.quant) {
    gguf::dequantize_row(*w.quant, static_cast<const std::byte*>(w.row(row)), out, w.cols);
    return;
  }
  if (w.layout == weight_layout::packed16) {
    for (std::int64_t c = 0; c < w.cols; ++c) out[c] = packed16_at(w.data, w.type, w.cols, row, c);
    return;
  }
  const void* src = w.row(row);
  for (std::int64_t c = 0; c < w.cols; ++c) out[c] = load_as_f32(w.type, src, static_cast<std::size_t>(c));
}

} // namespace troupe
