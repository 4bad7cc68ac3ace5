#include "sim/cost_model.hpp"

#include "engine/core/expert_load.hpp"
#include "engine/core/step_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace troupe::sim {

auto features_of(const scheduler_output& step) -> step_features {
  step_features f;
  for (const auto& c : step.scheduled) add_chunk(f, c.num_computed_tokens, c.num_tokens, c.sample);
  f.swapped_blocks = static_cast<double>(step.swap_out.size() + step.swap_in.size());
  return f;
}

auto read_step_log(const std::filesystem::path& file) -> std::vector<logged_step> {
  std::ifstream in(file);
  if (!in) throw scenario_error(file.string() + ": cannot read the step log");
  std::vector<logged_step> steps;
  std::string line;
  std::int64_t line_no = 0;
  step_log::step_timing t;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.starts_with("step ")) continue;
    if (const auto why = step_log::parse_step(line, t); !why.empty())
      throw scenario_error(file.string() + ":" + std::to_string(line_no) + ": " + why);
    logged_step s;
    s.start = t.start;
    s.seconds = t.duration;
    s.features.swapped_blocks = static_cast<double>(t.swapped_blocks);
    for (const auto& c : t.chunks) add_chunk(s.features, c.computed, c.tokens, c.sample);
    steps.push_back(s);
  }
  return steps;
}

auto parameter_count(const model_shape& m) -> double {
  const double head_dim = static_cast<double>(m.head_size());
  // q_proj and o_proj: hidden x heads·head_dim each (hidden² where head_dim is hidden / heads).
  const double q = static_cast<double>(m.hidden) * static_cast<double>(m.heads) * head_dim,
               kv = 2.0 * m.hidden * m.kv_heads * head_dim;
  const double mlp = m.experts > 0 ? 3.0 * m.hidden * m.expert_intermediate * static_cast<double>(m.experts) + m.hidden * m.experts
                                   : 3.0 * m.hidden * m.intermediate;
  return static_cast<double>(m.layers) * (2 * q + kv + mlp) + static_cast<double>(m.vocab) * m.hidden;
}

auto active_parameter_count(const model_shape& m) -> double {
  if (m.experts == 0) return parameter_count(m);
  const double idle = 3.0 * m.hidden * m.expert_intermediate * static_cast<double>(m.experts - m.experts_per_token);
  return parameter_count(m) - static_cast<double>(m.layers) * idle;
}

roofline_cost::roofline_cost(const model_shape& m, const hardware_spec& h, std::int32_t block_size) : h_(h) {
  const double head_dim = static_cast<double>(m.head_size());
  params_ = active_parameter_count(m);
  weight_bytes_ = parameter_count(m) * m.weight_bytes;
  if (m.experts > 0) {
    experts_ = m.experts;
    experts_per_token_ = m.experts_per_token;
    expert_bytes_ = 3.0 * m.hidden * m.expert_intermediate * m.weight_bytes;
    layers_ = static_cast<double>(m.layers);
    weight_bytes_ -= layers_ * static_cast<double>(m.experts) * expert_bytes_; // the rest: attention, router, embedding
  }
  // Attention: QK and PV, 4 FLOPs per (query, key) pair per head dimension per layer.
  pair_flops_ = 4.0 * m.layers * m.heads * head_dim;
  kv_per_token_ = 2.0 * m.layers * m.kv_heads * head_dim * m.kv_bytes;
  block_bytes_ = kv_per_token_ * block_size;
}

auto roofline_cost::step_seconds(const step_features& f) const -> double {
  // Matmuls: 2 FLOPs per weight per token (every token's logits: an upper
  // bound, the lm_head being a small share); then attention.
  const double pairs = f.decode_context + f.prefill_pairs;
  const double flops = 2 * params_ * f.tokens + pair_flops_ * pairs;
  // Bytes: the weights once, the KV read by decodes, written by every token;
  // a prefill chunk reads its sequence's KV about once.
  const double experts = layers_ * expected_distinct_experts(experts_, experts_per_token_, f.tokens) * expert_bytes_;
  const double bytes = weight_bytes_ + experts + kv_per_token_ * (f.decode_context + f.tokens) +
                       block_bytes_ * f.swapped_blocks;
  const double compute = flops / (h_.peak_tflops * 1e12);
  const double memory = bytes / (h_.memory_bandwidth_gbs * 1e9);
  return h_.step_overhead_us * 1e-6 + std::max(compute, memory);
}

auto roofline_cost::describe() const -> std::string {
  char buf[256];
  if (experts_ > 0)
    std::snprintf(buf, sizeof buf,
                  "roofline: %.2f B params a token (%lld experts, %lld a token), %.0f GB/s, %.0f TFLOP/s, %.0f us per step",
                  params_ / 1e9, static_cast<long long>(experts_), static_cast<long long>(experts_per_token_),
                  h_.memory_bandwidth_gbs, h_.peak_tflops, h_.step_overhead_us);
  else
    std::snprintf(buf, sizeof buf, "roofline: %.2f B params, %.0f GB/s, %.0f TFLOP/s, %.0f us per step",
                  params_ / 1e9, h_.memory_bandwidth_gbs, h_.peak_tflops, h_.step_overhead_us);
  return buf;
}

namespace {

auto terms(const step_features& f) -> std::array<double, calibrated_cost::k_terms> {
  return {1.0, f.tokens, f.seqs, f.decode_context, f.prefill_pairs, f.tokens > 1 ? 1.0 : 0.0, f.swapped_blocks};
}

// The normal equations of the fit, columns scaled to unit size: G = X'X,
// v = X'y, yy = y'y over every logged step.
struct normal_equations {
  static constexpr auto k = calibrated_cost::k_terms;
  std::array<double, k> scale{};
  std::array<std::array<double, k>, k> g{};
  std::array<double, k> v{};
  double yy = 0;

  explicit normal_equations(const std::vector<logged_step>& steps) {
    for (const auto& s : steps) {
      const auto x = terms(s.features);
      for (std::size_t i = 0; i < k; ++i) scale[i] = std::max(scale[i], std::abs(x[i]));
    }
    for (auto& sc : scale) sc = sc > 0 ? sc : 1;
    for (const auto& s : steps) {
      auto x = terms(s.features);
      for (std::size_t i = 0; i < k; ++i) x[i] /= scale[i];
      for (std::size_t i = 0; i < k; ++i) {
        for (std::size_t j = 0; j < k; ++j) g[i][j] += x[i] * x[j];
        v[i] += x[i] * s.seconds;
      }
      yy += s.seconds * s.seconds;
    }
  }

  // Least squares over the terms in `mask` (Gaussian elimination with
  // partial pivoting). Returns false for a singular subsystem.
  auto solve(unsigned mask, std::array<double, k>& coef) const -> bool {
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < k; ++i)
      if (mask & (1u << i)) idx.push_back(i);
    const auto n = idx.size();
    std::vector<double> a(n * (n + 1));
    for (std::size_t r = 0; r < n; ++r) {
      for (std::size_t c = 0; c < n; ++c) a[r * (n + 1) + c] = g[idx[r]][idx[c]];
      a[r * (n + 1) + n] = v[idx[r]];
    }
    for (std::size_t col = 0; col < n; ++col) {
      std::size_t piv = col;
      for (std::size_t r = col + 1; r < n; ++r)
        if (std::abs(a[r * (n + 1) + col]) > std::abs(a[piv * (n + 1) + col])) piv = r;
      if (std::abs(a[piv * (n + 1) + col]) < 1e-12 * (1 + std::abs(g[idx[col]][idx[col]]))) return false;
      for (std::size_t c = 0; c <= n; ++c) std::swap(a[col * (n + 1) + c], a[piv * (n + 1) + c]);
      for (std::size_t r = 0; r < n; ++r) {
        if (r == col) continue;
        const double f = a[r * (n + 1) + col] / a[col * (n + 1) + col];
        for (std::size_t c = col; c <= n; ++c) a[r * (n + 1) + c] -= f * a[col * (n + 1) + c];
      }
    }
    coef.fill(0);
    for (std::size_t r = 0; r < n; ++r) coef[idx[r]] = a[r * (n + 1) + n] / a[r * (n + 1) + r];
    return true;
  }

  /// The sum of squared residuals of scaled coefficients c.
  auto sse(const std::array<double, k>& c) const -> double {
    double e = yy;
    for (std::size_t i = 0; i < k; ++i) {
      e -= 2 * c[i] * v[i];
      for (std::size_t j = 0; j < k; ++j) e += c[i] * g[i][j] * c[j];
    }
    return e;
  }
};

} // namespace

calibrated_cost::calibrated_cost(const std::vector<logged_step>& steps) {
  if (steps.size() < k_terms)
    throw scenario_error("the step log holds " + std::to_string(steps.size()) + " steps; a fit needs at least " +
                         std::to_string(k_terms));
  // Non-negative least squares, exactly: the optimum is the plain least
  // squares fit of some subset of the terms with every coefficient >= 0 (a
  // step cannot get cheaper with more work), so try every subset (2^7).
  const normal_equations eq(steps);
  double best = INFINITY;
  for (unsigned mask = 1; mask < (1u << k_terms); ++mask) {
    std::array<double, k_terms> c{};
    if (!eq.solve(mask, c) || std::any_of(c.begin(), c.end(), [](double x) { return x < 0; })) continue;
    if (const double e = eq.sse(c); e < best) {
      best = e;
      for (std::size_t i = 0; i < k_terms; ++i) coef_[i] = c[i] / eq.scale[i];
    }
  }
  // The server's idle time between back-to-back steps (its actors' turn
  // around; the simulator's steps follow each other at once). Gaps over
  // 50 ms are waits for traffic, not overhead.
  double gaps = 0;
  std::int64_t n = 0;
  for (std::size_t i = 1; i < steps.size(); ++i) {
    const double gap = steps[i].start - (steps[i - 1].start + steps[i - 1].seconds);
    if (gap >= 0 && gap < 0.05) {
      gaps += gap;
      ++n;
    }
  }
  gap_ = n > 0 ? gaps / static_cast<double>(n) : 0.0;
  double err = 0, total = 0;
  for (const auto& s : steps) {
    err += std::abs(step_seconds(s.features) - gap_ - s.seconds);
    total += s.seconds;
  }
  relative_error_ = total > 0 ? err / total : 0;
}

auto calibrated_cost::step_seconds(const step_features& f) const -> double {
  const auto x = terms(f);
  double t = 0;
  for (std::size_t i = 0; i < k_terms; ++i) t += coef_[i] * x[i];
  return std::max(t, 0.0) + gap_; // the simulator keeps every step above zero
}

auto calibrated_cost::describe() const -> std::string {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "calibrated: %.1f us + %.1f us if over one token + %.2f us/token + %.2f us/seq + %.4f us/decode-context"
                " + %.6f us/prefill-pair + %.1f us/swapped block, %.1f us between steps (mean abs error %.1f%%)",
                coef_[0] * 1e6, coef_[5] * 1e6, coef_[1] * 1e6, coef_[2] * 1e6, coef_[3] * 1e6, coef_[4] * 1e6,
                coef_[6] * 1e6, gap_ * 1e6, 100 * relative_error_);
  return buf;
}

auto make_cost_model(const scenario& sc) -> std::unique_ptr<cost_model> {
  if (sc.cost.kind == "calibrated") return std::make_unique<calibrated_cost>(read_step_log(sc.cost.step_log));
  return std::make_unique<roofline_cost>(sc.cost.model, sc.cost.hardware, sc.replicas.front().block_size);
}

} // namespace troupe::sim
