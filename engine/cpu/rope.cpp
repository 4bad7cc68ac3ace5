#include "engine/cpu/rope.hpp"

#include "engine/cpu/ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace troupe {
namespace {

// θ_i = base^(-2i/dim) / divisor_i.
auto base_frequencies(double base, std::int64_t dim) -> std::vector<double> {
  std::vector<double> f(static_cast<std::size_t>(dim / 2));
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
  return f;
}

// YaRN (Peng et al., 2023): interpolate the low frequencies by `factor`,
// keep the high ones, a linear ramp between the correction dimensions.
auto yarn_frequencies(const model_config& c) -> std::vector<double> {
  const auto& s = c.rope_scaling;
  const auto dim = static_cast<double>(c.head_dim);
  const double orig = static_cast<double>(s.original_max_position_embeddings);
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(orig / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(c.rope_theta));
  };
  // Rounded outwards to whole dimensions unless truncate is off (gpt-oss).
  const double fast = correction_dim(s.beta_fast), slow = correction_dim(s.beta_slow);
  const double low = std::max(s.truncate ? std::floor(fast) : fast, 0.0);
  double high = std::min(s.truncate ? std::ceil(slow) : slow, dim - 1.0);
  if (high == low) high += 0.001;
  auto f = base_frequencies(c.rope_theta, c.head_dim);
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1.0 - ramp;
    f[i] = f[i] / s.factor * (1.0 - extrapolation) + f[i] * extrapolation;
  }
  return f;
}

auto longrope_frequencies(const model_config& c, const std::vector<double>& factors) -> std::vector<double> {
  auto f = base_frequencies(c.rope_theta, c.head_dim);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] /= factors[i];
  return f;
}

} // namespace

rotary_embedding::rotary_embedding(const model_config& c)
  : c_(c), switch_position_(std::numeric_limits<std::int64_t>::max()) {
  const auto& s = c.rope_scaling;
  if (s.type == "yarn") {
    inv_freq_ = yarn_frequencies(c);
    attention_factor_ = s.attention_factor > 0 ? s.attention_factor : s.factor <= 1 ? 1.0 : 0.1 * std::log(s.factor) + 1.0;
  } else if (s.type == "longrope") {
    inv_freq_ = longrope_frequencies(c, s.short_factor);
    long_inv_freq_ = longrope_frequencies(c, s.long_factor);
    switch_position_ = s.original_max_position_embeddings;
    attention_factor_ = s.attention_factor > 0 ? s.attention_factor
                        : s.factor <= 1
                            ? 1.0
                            : std::sqrt(1.0 + std::log(s.factor) /
                                                  std::log(static_cast<double>(s.original_max_position_embeddings)));
  } else if (s.type == "dynamic") {
    inv_freq_ = base_frequencies(c.rope_theta, c.head_dim);
    switch_position_ = c.max_position_embeddings; // the base grows past the trained length
  } else {
    inv_freq_ = rope_inv_freq(c); // none, linear, llama3
  }
}

rotary_embedding::rotary_embedding(const model_config& c, double theta)
  : rotary_embedding([&] {
      auto local = c;
      local.rope_theta = theta;
      local.rope_scaling = {};
      return local;
    }()) {}

void rotary_embedding::frequencies_at(std::int32_t position, std::vector<double>& out) const {
  if (c_.rope_scaling.type == "longrope") {
    out = long_inv_freq_;
    return;
  }
  // Dynamic NTK at sequence length position + 1 > max_position_embeddings.
  const double dim = static_cast<double>(c_.head_dim), factor = c_.rope_scaling.factor;
  const double len = static_cast<double>(position) + 1.0, max_len = static_cast<double>(c_.max_position_embeddings);
  const double base = c_.rope_theta * std::pow(factor * len / max_len - (factor - 1.0), dim / (dim - 2.0));
  out = base_frequencies(base, c_.head_dim);
}

void rotary_embedding::tables(const std::int32_t* positions, std::int64_t num_rows, std::vector<float>& cos,
                              std::vector<float>& sin) const {
  const auto half = static_cast<std::int64_t>(inv_freq_.size());
  cos.resize(static_cast<std::size_t>(num_rows * half));
  sin.resize(cos.size());
  thread_local std::vector<double> other;
  for (std::int64_t t = 0; t < num_rows; ++t) {
    const std::vector<double>* f = &inv_freq_;
    if (positions[t] >= switch_position_) {
      frequencies_at(positions[t], other);
      f = &other;
    }
    for (std::int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(positions[t]) * (*f)[static_cast<std::size_t>(i)];
      cos[static_cast<std::size_t>(t * half + i)] = static_cast<float>(std::cos(a) * attention_factor_);
      sin[static_cast<std::size_t>(t * half + i)] = static_cast<float>(std::sin(a) * attention_factor_);
    }
  }
}

} // namespace troupe
