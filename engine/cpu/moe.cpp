#include "engine/cpu/moe.hpp"

#include "base/check.hpp"
#include "engine/cpu/linear.hpp"
#include "engine/cpu/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace troupe {
namespace {

// Row r of an F32 bias matrix.
auto bias_row(const weight_tensor& b, std::int64_t r) -> const float* { return static_cast<const float*>(b.row(r)); }

auto resize(std::vector<float>& v, std::int64_t n) -> float* {
  v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// The softmax as llama.cpp computes it: exp(x - max), summed in double.
void softmax(float* x, std::int64_t n) {
  const float mx = *std::max_element(x, x + n);
  double sum = 0.0;
  for (std::int64_t e = 0; e < n; ++e) sum += x[e] = std::exp(x[e] - mx);
  const auto inv = static_cast<float>(1.0 / sum);
  for (std::int64_t e = 0; e < n; ++e) x[e] *= inv;
}

} // namespace

void route_experts(const float* logits, std::int64_t rows, std::int64_t num_experts, std::int64_t per_token,
                   expert_gating gating, bool normalize, std::int32_t* ids, float* weights) {
  TROUPE_CHECK(per_token >= 1 && per_token <= num_experts, "route_experts: per_token outside [1, num_experts]");
  // Kept across calls (a layer's routing each step): no allocation.
  thread_local std::vector<float> p;
  thread_local std::vector<std::int32_t> order;
  p.resize(static_cast<std::size_t>(num_experts));
  order.resize(static_cast<std::size_t>(num_experts));
  for (std::int64_t t = 0; t < rows; ++t) {
    std::copy_n(logits + t * num_experts, num_experts, p.begin());
    if (gating == expert_gating::softmax_top_k) softmax(p.data(), num_experts);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + per_token, order.end(), [&](std::int32_t a, std::int32_t b) {
      const float pa = p[static_cast<std::size_t>(a)], pb = p[static_cast<std::size_t>(b)];
      return pa > pb || (pa == pb && a < b);
    });
    float total = 0.0f;
    for (std::int64_t s = 0; s < per_token; ++s) {
      const auto e = order[static_cast<std::size_t>(s)];
      ids[t * per_token + s] = e;
      total += weights[t * per_token + s] = p[static_cast<std::size_t>(e)];
    }
    if (gating == expert_gating::top_k_softmax) softmax(weights + t * per_token, per_token);
    else if (normalize)
      for (std::int64_t s = 0; s < per_token; ++s) weights[t * per_token + s] /= total;
  }
}

void moe_mlp::forward(const model_config& c, const expert_weights& w, const float* xn, std::int64_t num_tokens,
                      float* out) {
  const std::int64_t d = c.hidden_size, inter = c.moe_intermediate_size;
  const std::int64_t ne = c.num_experts, k = c.num_experts_per_tok;
  float* logits = resize(logits_, num_tokens * ne);
  linear(xn, num_tokens, w.router, logits);
  const bool gpt_oss = c.family() == model_family::gpt_oss;
  if (w.router_bias.data != nullptr) add_bias(logits, bias_row(w.router_bias, 0), num_tokens, ne);
  ids_.resize(static_cast<std::size_t>(num_tokens * k));
  float* weight = resize(weights_, num_tokens * k);
  route_experts(logits, num_tokens, ne, k, gpt_oss ? expert_gating::top_k_softmax : expert_gating::softmax_top_k,
                c.norm_topk_prob, ids_.data(), weight);

  // Group the (token, slot) pairs by expert, each group in token order.
  count_.assign(static_cast<std::size_t>(ne), 0);
  for (const auto e : ids_) ++count_[static_cast<std::size_t>(e)];
  start_.assign(static_cast<std::size_t>(ne) + 1, 0);
  for (std::int64_t e = 0; e < ne; ++e) start_[static_cast<std::size_t>(e) + 1] = start_[static_cast<std::size_t>(e)] + count_[static_cast<std::size_t>(e)];
  order_.resize(ids_.size());
  next_.assign(start_.begin(), start_.end() - 1);
  for (std::size_t i = 0; i < ids_.size(); ++i)
    order_[static_cast<std::size_t>(next_[static_cast<std::size_t>(ids_[i])]++)] = static_cast<std::int32_t>(i);

  // Each (token, slot)'s expert output, weighted, then summed per token in
  // slot order: llama.cpp's order (so its rounding), whatever the batch.
  float* slots = resize(slots_, num_tokens * k * d);
  experts_run_ = 0;
  for (std::int64_t e = 0; e < ne; ++e) {
    const std::int64_t n = count_[static_cast<std::size_t>(e)];
    if (n == 0) continue;
    ++experts_run_;
    const std::int32_t* pairs = order_.data() + start_[static_cast<std::size_t>(e)];
    float* xg = resize(xg_, n * d);
    for (std::int64_t i = 0; i < n; ++i) std::memcpy(xg + i * d, xn + (pairs[i] / k) * d, static_cast<std::size_t>(d) * sizeof(float));
    const auto x = static_cast<std::size_t>(e);
    float* gate = resize(gate_, n * inter);
    float* up = resize(up_, n * inter);
    linear_multi(xg, n, {{&w.gate[x], gate}, {&w.up[x], up}});
    if (w.gate_bias.data != nullptr) {
      add_bias(gate, bias_row(w.gate_bias, e), n, inter);
      add_bias(up, bias_row(w.up_bias, e), n, inter);
    }
    if (c.swiglu_limit > 0)
      clamped_swiglu(gate, up, n * inter, static_cast<float>(c.swiglu_limit));
    else
      silu_mul(gate, up, n * inter);
    float* y = resize(y_, n * d);
    linear(gate, n, w.down[x], y);
    if (w.down_bias.data != nullptr) add_bias(y, bias_row(w.down_bias, e), n, d);
    for (std::int64_t i = 0; i < n; ++i) {
      const float g = weight[pairs[i]];
      float* o = slots + pairs[i] * d;
      const float* yi = y + i * d;
      for (std::int64_t j = 0; j < d; ++j) o[j] = g * yi[j];
    }
  }
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    float* o = out + t * d;
    const float* first = slots + t * k * d;
    std::memcpy(o, first, static_cast<std::size_t>(d) * sizeof(float));
    for (std::int64_t s = 1; s < k; ++s)
      for (std::int64_t j = 0; j < d; ++j) o[j] += first[s * d + j];
  }
}

} // namespace troupe
