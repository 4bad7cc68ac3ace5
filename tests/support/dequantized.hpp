#pragma once
// A model's quantized matrices widened back to F32: the same weights for the
// float kernels, so a quantized model (gpt-oss's MXFP4 experts, held as
// Q8_0) can be held to the float64 reference without x's 8-bit rounding.

#include "engine/cpu/linear.hpp"
#include "engine/model/model_weights.hpp"

#include <memory>

namespace troupe::testing {

/// Every quantized matrix of q widened to F32 (owned by the copy).
inline auto dequantized(const model_weights& q) -> model_weights {
  model_weights w = q;
  const auto widen = [&](weight_tensor& t) {
    if (!t.quant) return;
    auto values = std::shared_ptr<float[]>(new float[static_cast<std::size_t>(t.rows * t.cols)]);
    for (std::int64_t r = 0; r < t.rows; ++r) load_row(t, r, values.get() + r * t.cols);
    t = {dtype::f32, values.get(), t.rows, t.cols, weight_layout::row_major, {}};
    w.storage.push_back(std::move(values));
  };
  const bool tied = w.lm_head.data == w.embed.data;
  widen(w.embed);
  for (auto& l : w.layers) {
    for (auto* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) widen(*t);
    for (auto* t : l.experts.matrices()) widen(*t);
  }
  if (tied) w.lm_head = w.embed;
  else widen(w.lm_head);
  return w;
}

} // namespace troupe::testing
