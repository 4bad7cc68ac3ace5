#include "engine/cpu/linear.hpp"

#include "engine/check.hpp"
#include "engine/cpu/gemm.hpp"
#include "engine/model/gguf_quant.hpp"

#include <array>
#include <span>

namespace troupe {

void linear(const float* x, std::int64_t num_tokens, const weight_tensor& w, float* y) {
  TROUPE_CHECK(!w.quant, "linear: quantized weights need the quantized kernels");
  if (num_tokens > 0 && w.rows > 0) gemm(x, num_tokens, w.data, w.type, w.rows, w.cols, y, w.layout);
}

void linear_multi(const float* x, std::int64_t num_tokens,
                  std::initializer_list<std::pair<const weight_tensor*, float*>> outputs) {
  if (num_tokens <= 0 || outputs.size() == 0) return;
  TROUPE_CHECK(outputs.size() <= 4, "linear_multi takes at most 4 weights");
  const std::int64_t cols = outputs.begin()->first->cols;
  std::array<matmul_job, 4> jobs;
  std::size_t n = 0;
  for (const auto& [w, y] : outputs) {
    TROUPE_CHECK(w->cols == cols, "linear_multi weights share their input size");
    TROUPE_CHECK(!w->quant, "linear_multi: quantized weights need the quantized kernels");
    jobs[n++] = {w->data, w->type, w->rows, y, w->layout};
  }
  gemm_multi(x, num_tokens, cols, std::span(jobs).first(n));
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
  for (std::int64_t c = 0; c < w.cols; ++c) out[c] = load_as_f32(w.type, w.row(row), static_cast<std::size_t>(c));
}

} // namespace troupe
