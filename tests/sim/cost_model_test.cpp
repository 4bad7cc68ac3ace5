// The simulator's cost model for a mixture of experts (sim/cost_model): a
// step reads its attention, router and embedding once and each distinct
// expert its tokens chose once (engine/core/expert_load), so its bytes grow
// with the experts touched; a token's FLOPs are its own experts'.

#include "engine/core/expert_load.hpp"
#include "sim/cost_model.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace troupe;
using namespace troupe::sim;

TEST_CASE("expected_distinct_experts: k for one token, the mean of a uniform router's draws, all at most") {
  CHECK(expected_distinct_experts(128, 8, 1) == doctest::Approx(8.0));
  CHECK(expected_distinct_experts(128, 8, 0) == 0.0);
  CHECK(expected_distinct_experts(8, 2, 1e6) == doctest::Approx(8.0));
  // Qwen3-30B-A3B at batch 32: 128 · (1 - (120/128)^32) ≈ 112.
  CHECK(expected_distinct_experts(128, 8, 32) == doctest::Approx(128.0 * (1 - std::pow(120.0 / 128.0, 32))));
  CHECK(expected_distinct_experts(128, 8, 32) == doctest::Approx(111.8).epsilon(1e-3));
  // The mean over a seeded uniform router's steps (without repeats per token).
  std::uint64_t x = 7;
  const auto next = [&x] { return x = x * 6364136223846793005ull + 1442695040888963407ull, x >> 33; };
  double sum = 0;
  constexpr int trials = 2000;
  for (int t = 0; t < trials; ++t) {
    std::uint64_t seen[2] = {0, 0};
    for (int token = 0; token < 32; ++token) {
      std::uint64_t mine[2] = {0, 0};
      for (int k = 0; k < 8;) {
        const auto e = next() % 128;
        if (mine[e / 64] >> (e % 64) & 1) continue;
        mine[e / 64] |= 1ull << (e % 64);
        ++k;
      }
      seen[0] |= mine[0], seen[1] |= mine[1];
    }
    sum += __builtin_popcountll(seen[0]) + __builtin_popcountll(seen[1]);
  }
  CHECK(sum / trials == doctest::Approx(expected_distinct_experts(128, 8, 32)).epsilon(0.01));
}

TEST_CASE("the roofline of a mixture of experts: batch 1 reads its k experts, batch 32 the distinct ones") {
  model_shape m; // Qwen3-30B-A3B
  m.layers = 48, m.hidden = 2048, m.intermediate = 6144, m.heads = 32, m.kv_heads = 4, m.head_dim = 128;
  m.vocab = 151936, m.experts = 128, m.experts_per_token = 8, m.expert_intermediate = 768;
  m.weight_bytes = 0.5, m.kv_bytes = 2;
  hardware_spec h;
  h.memory_bandwidth_gbs = 100, h.peak_tflops = 1e6, h.step_overhead_us = 0; // memory-bound throughout
  roofline_cost c(m, h, 16);
  const double expert = 3.0 * 2048 * 768 * 0.5;
  const double attention = 48.0 * (2 * 2048.0 * 32 * 128 + 2 * 2048.0 * 4 * 128 + 2048.0 * 128) * 0.5;
  const double embedding = 151936.0 * 2048 * 0.5;
  const double kv_token = 2.0 * 48 * 4 * 128 * 2;
  step_features one;
  add_chunk(one, 0, 1, true);
  CHECK(c.step_seconds(one) == doctest::Approx((attention + embedding + 48 * 8 * expert + 2 * kv_token) / 100e9));
  step_features batch;
  for (int s = 0; s < 32; ++s) add_chunk(batch, 0, 1, true);
  const double distinct = expected_distinct_experts(128, 8, 32);
  CHECK(c.step_seconds(batch) ==
        doctest::Approx((attention + embedding + 48 * distinct * expert + 64 * kv_token) / 100e9));
  // 3.04 B parameters read a token (the published 3.3 B active counts the
  // 0.31 B embedding matrix too, of which a token reads one row), 30.5 B in all.
  CHECK(active_parameter_count(m) / 1e9 == doctest::Approx(3.04).epsilon(0.01));
  CHECK(parameter_count(m) / 1e9 == doctest::Approx(30.5).epsilon(0.02));
}
