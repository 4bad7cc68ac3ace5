#include "tests/reference/naive_forward.hpp"

#include <cmath>
#include <numbers>

namespace troupe::reference {
namespace {

using vec = std::vector<double>;

auto at(const weight_tensor& w, std::int64_t r, std::int64_t c) -> double {
  return load_as_f32(w.type, w.data, static_cast<std::size_t>(r * w.cols + c));
}

// y = W x, W: [rows, cols]
auto matvec(const weight_tensor& w, const vec& x) -> vec {
  vec y(static_cast<std::size_t>(w.rows), 0.0);
  for (std::int64_t r = 0; r < w.rows; ++r) {
    double s = 0.0;
    for (std::int64_t c = 0; c < w.cols; ++c) s += at(w, r, c) * x[static_cast<std::size_t>(c)];
    y[static_cast<std::size_t>(r)] = s;
  }
  return y;
}

auto rmsnorm(const vec& x, const weight_tensor& g, double eps) -> vec {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  vec y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * at(g, 0, static_cast<std::int64_t>(i));
  return y;
}

// θ_i with llama3 / linear scaling, written from the Llama 3.1 reference.
auto frequency(const model_config& c, std::int64_t i) -> double {
  double f = 1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / static_cast<double>(c.head_dim));
  const auto& s = c.rope_scaling;
  if (s.type == "linear") return f / s.factor;
  if (s.type != "llama3") return f;
  const double wavelen = 2.0 * std::numbers::pi / f;
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  if (wavelen < old_len / s.high_freq_factor) return f;
  if (wavelen > old_len / s.low_freq_factor) return f / s.factor;
  const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * f / s.factor + smooth * f;
}

void rotate(vec& x, std::int64_t heads, const model_config& c, std::int64_t pos) {
  const std::int64_t hd = c.head_dim, half = hd / 2;
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(pos) * frequency(c, i);
      auto& x1 = x[static_cast<std::size_t>(h * hd + i)];
      auto& x2 = x[static_cast<std::size_t>(h * hd + i + half)];
      const double r1 = x1 * std::cos(a) - x2 * std::sin(a);
      const double r2 = x2 * std::cos(a) + x1 * std::sin(a);
      x1 = r1;
      x2 = r2;
    }
}

} // namespace

auto naive_forward(const model_weights& w, std::span<const token_id> tokens) -> std::vector<double> {
  const auto& c = w.config;
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t d = c.hidden_size, hd = c.head_dim;
  const std::int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads;

  std::vector<vec> h(static_cast<std::size_t>(n), vec(static_cast<std::size_t>(d)));
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < d; ++i)
      h[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)] = at(w.embed, tokens[static_cast<std::size_t>(t)], i);

  for (const auto& lw : w.layers) {
    std::vector<vec> q(static_cast<std::size_t>(n)), k(q.size()), v(q.size());
    for (std::int64_t t = 0; t < n; ++t) {
      const auto xn = rmsnorm(h[static_cast<std::size_t>(t)], lw.attn_norm, c.rms_norm_eps);
      q[static_cast<std::size_t>(t)] = matvec(lw.wq, xn);
      k[static_cast<std::size_t>(t)] = matvec(lw.wk, xn);
      v[static_cast<std::size_t>(t)] = matvec(lw.wv, xn);
      rotate(q[static_cast<std::size_t>(t)], nh, c, t);
      rotate(k[static_cast<std::size_t>(t)], nkv, c, t);
    }
    for (std::int64_t t = 0; t < n; ++t) {
      vec attn(static_cast<std::size_t>(nh * hd), 0.0);
      for (std::int64_t head = 0; head < nh; ++head) {
        const std::int64_t kvh = head * nkv / nh;
        vec p(static_cast<std::size_t>(t + 1));
        double mx = -1e300;
        for (std::int64_t j = 0; j <= t; ++j) {
          double s = 0.0;
          for (std::int64_t i = 0; i < hd; ++i)
            s += q[static_cast<std::size_t>(t)][static_cast<std::size_t>(head * hd + i)] *
                 k[static_cast<std::size_t>(j)][static_cast<std::size_t>(kvh * hd + i)];
          p[static_cast<std::size_t>(j)] = s / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, p[static_cast<std::size_t>(j)]);
        }
        double z = 0.0;
        for (auto& e : p) z += (e = std::exp(e - mx));
        for (std::int64_t j = 0; j <= t; ++j)
          for (std::int64_t i = 0; i < hd; ++i)
            attn[static_cast<std::size_t>(head * hd + i)] +=
                p[static_cast<std::size_t>(j)] / z * v[static_cast<std::size_t>(j)][static_cast<std::size_t>(kvh * hd + i)];
      }
      const auto o = matvec(lw.wo, attn);
      for (std::int64_t i = 0; i < d; ++i) h[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)] += o[static_cast<std::size_t>(i)];
    }
    for (std::int64_t t = 0; t < n; ++t) {
      auto& ht = h[static_cast<std::size_t>(t)];
      const auto xn = rmsnorm(ht, lw.mlp_norm, c.rms_norm_eps);
      auto g = matvec(lw.w_gate, xn);
      const auto u = matvec(lw.w_up, xn);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const auto down = matvec(lw.w_down, g);
      for (std::int64_t i = 0; i < d; ++i) ht[static_cast<std::size_t>(i)] += down[static_cast<std::size_t>(i)];
    }
  }

  std::vector<double> logits;
  logits.reserve(static_cast<std::size_t>(n * c.vocab_size));
  for (std::int64_t t = 0; t < n; ++t) {
    const auto y = matvec(w.lm_head, rmsnorm(h[static_cast<std::size_t>(t)], w.final_norm, c.rms_norm_eps));
    logits.insert(logits.end(), y.begin(), y.end());
  }
  return logits;
}

} // namespace troupe::reference
