#include "engine/cpu/ops.hpp"

#include "base/vec_exp.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace troupe {

void rms_norm(const float* x, const float* w, std::int64_t num_rows, std::int64_t dim, double eps,
              float* out) {
#pragma omp parallel for schedule(static) if (num_rows > 8)
  for (std::int64_t t = 0; t < num_rows; ++t) {
    const float* xr = x + t * dim;
    float* o = out + t * dim;
    // One summation order whatever the row's address or the batch (a
    // vectorised reduction may peel a different head for another alignment):
    // eight lanes by i mod 8, a fixed tree, then the tail in order.
    double lanes[8] = {};
    std::int64_t i = 0;
    for (; i + 8 <= dim; i += 8)
      for (int l = 0; l < 8; ++l) lanes[l] += static_cast<double>(xr[i + l]) * xr[i + l];
    double ss = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
    for (; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const auto scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(dim) + eps));
#pragma omp simd
    for (std::int64_t j = 0; j < dim; ++j) o[j] = xr[j] * scale * w[j];
  }
}

auto rope_inv_freq(const model_config& c) -> std::vector<double> {
  const std::int64_t half = c.head_dim / 2;
  std::vector<double> f(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    f[static_cast<std::size_t>(i)] =
        std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
  const auto& s = c.rope_scaling;
  if (s.type == "linear") {
    for (auto& x : f) x /= s.factor;
  } else if (s.type == "freq_factors") {
    // GGUF's rope_freqs tensor: llama.cpp's per-dimension divisors (Llama
    // 3.1's scaling, computed by its converter).
    for (std::size_t i = 0; i < f.size(); ++i) f[i] /= s.short_factor[i];
  } else if (s.type == "llama3") {
    // Llama 3.1: long wavelengths slowed by `factor`, short ones kept, a
    // smooth blend between the two bands.
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_wavelen = old_len / s.low_freq_factor;
    const double high_wavelen = old_len / s.high_freq_factor;
    for (auto& x : f) {
      const double wavelen = 2.0 * std::numbers::pi / x;
      if (wavelen > low_wavelen) {
        x /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        x = (1.0 - smooth) * x / s.factor + smooth * x;
      }
    }
  }
  return f;
}

void rope_tables(const std::vector<double>& inv_freq, const std::int32_t* positions,
                 std::int64_t num_rows, std::vector<float>& cos, std::vector<float>& sin) {
  const auto half = static_cast<std::int64_t>(inv_freq.size());
  cos.resize(static_cast<std::size_t>(num_rows * half));
  sin.resize(cos.size());
  for (std::int64_t t = 0; t < num_rows; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(positions[t]) * inv_freq[static_cast<std::size_t>(i)];
      cos[static_cast<std::size_t>(t * half + i)] = static_cast<float>(std::cos(a));
      sin[static_cast<std::size_t>(t * half + i)] = static_cast<float>(std::sin(a));
    }
}

void apply_rope(float* x, std::int64_t num_rows, std::int64_t num_heads, std::int64_t head_dim,
                const float* cos, const float* sin) {
  const std::int64_t half = head_dim / 2;
  for (std::int64_t t = 0; t < num_rows; ++t) {
    const float* c = cos + t * half;
    const float* s = sin + t * half;
    for (std::int64_t h = 0; h < num_heads; ++h) {
      float* v = x + (t * num_heads + h) * head_dim;
#pragma omp simd
      for (std::int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

void silu_mul(float* gate, const float* up, std::int64_t n) {
  // Serial on purpose: vectorised it takes a few µs, and GCC 12 does not
  // vectorise the body of an OpenMP `parallel for simd` holding fast_exp.
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + fast_exp(-gate[i])) * up[i];
}

void clamped_swiglu(float* gate, const float* up, std::int64_t n, float limit) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
    gate[i] = g / (1.0f + fast_exp(-1.702f * g)) * (u + 1.0f);
  }
}

void gelu_tanh_mul(float* gate, const float* up, std::int64_t n) {
  // tanh(u) = 1 - 2 / (e^(2u) + 1): fast_exp keeps the loop vectorised.
  constexpr float k = 0.7978845608028654f; // sqrt(2 / pi)
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float u = k * (x + 0.044715f * x * x * x);
    const float th = 1.0f - 2.0f / (fast_exp(2.0f * u) + 1.0f);
    gate[i] = 0.5f * x * (1.0f + th) * up[i];
  }
}

void add_bias(float* x, const float* bias, std::int64_t num_rows, std::int64_t dim) {
  for (std::int64_t t = 0; t < num_rows; ++t) add_in_place(x + t * dim, bias, dim);
}

void soft_cap(float* x, std::int64_t n, float cap) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void scale_in_place(float* x, std::int64_t n, float s) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) x[i] *= s;
}

void add_in_place(float* y, const float* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) y[i] += x[i];
}

} // namespace troupe
