#pragma once
// Element-wise and row-wise operations of the decoders, F32 on the CPU.

#include "engine/model/model_config.hpp"

#include <cstdint>
#include <vector>

namespace troupe {

/// out[t] = x[t] / sqrt(mean(x[t]²) + eps) * w, for num_rows rows of `dim`.
/// out may alias x.
void rms_norm(const float* x, const float* w, std::int64_t num_rows, std::int64_t dim, double eps,
              float* out);

/// Rotary frequencies θ_i = rope_theta^(-2i/head_dim), i < head_dim/2, with
/// the config's rope_scaling ("llama3" or "linear") applied.
auto rope_inv_freq(const model_config& c) -> std::vector<double>;

/// cos/sin of position · θ_i for each row: [num_rows, head_dim/2] each.
void rope_tables(const std::vector<double>& inv_freq, const std::int32_t* positions,
                 std::int64_t num_rows, std::vector<float>& cos, std::vector<float>& sin);

/// Rotates each head of x in place, Hugging Face's rotate-half pairing
/// (i, i + head_dim/2). x: [num_rows, num_heads * head_dim].
void apply_rope(float* x, std::int64_t num_rows, std::int64_t num_heads, std::int64_t head_dim,
                const float* cos, const float* sin);

/// gate[i] = silu(gate[i]) · up[i] for n elements.
void silu_mul(float* gate, const float* up, std::int64_t n);

/// gpt-oss's SwiGLU: g = min(gate[i], limit), u = clamp(up[i], -limit,
/// limit), gate[i] = g · σ(1.702 · g) · (u + 1) for n elements.
void clamped_swiglu(float* gate, const float* up, std::int64_t n, float limit);

/// gate[i] = gelu_tanh(gate[i]) · up[i] for n elements (GeGLU with the tanh
/// approximation: transformers' gelu_pytorch_tanh).
void gelu_tanh_mul(float* gate, const float* up, std::int64_t n);

/// x[t, i] += bias[i] for num_rows rows of `dim`.
void add_bias(float* x, const float* bias, std::int64_t num_rows, std::int64_t dim);

/// x[i] = cap · tanh(x[i] / cap) for n elements (Gemma 2's soft-capping).
void soft_cap(float* x, std::int64_t n, float cap);

/// x[i] *= s for n elements.
void scale_in_place(float* x, std::int64_t n, float s);

/// y[i] += x[i] for n elements.
void add_in_place(float* y, const float* x, std::int64_t n);

} // namespace troupe
