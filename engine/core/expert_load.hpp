#pragma once
// What a mixture-of-experts step reads: each token picks per_token of the
// layer's num_experts experts, and a step reads each expert its tokens
// chose once (engine/cpu/moe groups the batch by expert), so its expert
// bytes grow with the distinct experts touched, not with the tokens: a
// batch of 32 on Qwen3-30B-A3B (128 experts, 8 a token) reads about 112
// experts a layer where one token reads 8. The simulator's cost model and
// `troupe bench-engine` (the bytes each batch size's step reads, and so the
// most batch 32 can run at over batch 1 on one bandwidth) share this one
// estimate. Pure arithmetic: deterministic.

#include <cmath>
#include <cstdint>

namespace troupe {

/// The expected number of distinct experts `tokens` tokens route to, each
/// choosing per_token of num_experts alike (uniform, without repeats):
/// num_experts · (1 - (1 - per_token / num_experts)^tokens).
inline auto expected_distinct_experts(std::int64_t num_experts, std::int64_t per_token, double tokens) -> double {
  if (num_experts <= 0 || tokens <= 0) return 0.0;
  const double e = static_cast<double>(num_experts);
  const double miss = 1.0 - static_cast<double>(per_token) / e;
  return e * (1.0 - std::pow(miss, tokens));
}

} // namespace troupe
