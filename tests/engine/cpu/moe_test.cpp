// The mixture-of-experts MLP's routing and grouping (engine/cpu/moe): the
// router's choice, its ties and weights; each chosen expert run once for all
// of its tokens; a token's output the same bits alone as in any batch. The
// whole layer against transformers' definition is forward_test's.

#include "engine/cpu/moe.hpp"

#include "engine/make_model/random_model.hpp"
#include "engine/model/presets.hpp"
#include "base/rng.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numeric>

using namespace troupe;

TEST_CASE("route_experts: the softmax's k largest, ties to the lower index, renormalised or not") {
  // Experts 1 and 3 tie for the largest; 0, 2 and 4 tie below them.
  const float logits[] = {0.0f, 2.0f, 0.0f, 2.0f, 0.0f, -1.0f};
  std::int32_t ids[3];
  float w[3];
  route_experts(logits, 1, 6, 3, expert_gating::softmax_top_k, false, ids, w);
  CHECK(ids[0] == 1);
  CHECK(ids[1] == 3);
  CHECK(ids[2] == 0);
  double z = 0;
  for (const float l : logits) z += std::exp(static_cast<double>(l));
  CHECK(w[0] == doctest::Approx(std::exp(2.0) / z).epsilon(1e-6));
  CHECK(w[2] == doctest::Approx(1.0 / z).epsilon(1e-6));
  route_experts(logits, 1, 6, 3, expert_gating::softmax_top_k, true, ids, w);
  CHECK(w[0] + w[1] + w[2] == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(w[0] == w[1]);
  CHECK(w[0] / w[2] == doctest::Approx(std::exp(2.0)).epsilon(1e-5));
  // Rows are routed independently.
  const float two[] = {5.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 9.0f};
  std::int32_t ids2[2];
  float w2[2];
  route_experts(two, 2, 6, 1, expert_gating::softmax_top_k, true, ids2, w2);
  CHECK(ids2[0] == 0);
  CHECK(ids2[1] == 5);
  CHECK(w2[0] == 1.0f);
  // gpt-oss: the top k logits, then a softmax over those k alone.
  route_experts(logits, 1, 6, 3, expert_gating::top_k_softmax, false, ids, w);
  CHECK(ids[0] == 1);
  CHECK(ids[1] == 3);
  CHECK(ids[2] == 0);
  const double z3 = 2 * std::exp(2.0) + 1.0;
  CHECK(w[0] == doctest::Approx(std::exp(2.0) / z3).epsilon(1e-6));
  CHECK(w[2] == doctest::Approx(1.0 / z3).epsilon(1e-6));
}

TEST_CASE("moe_mlp: each chosen expert runs once a step for all its tokens, a token's bits the same in any batch") {
  testing::temp_dir tmp;
  const auto c = with_experts(family_config("Qwen3MoeForCausalLM", 64, 64, 96, 1, 4, 2, 16), 16, 2, 32, true);
  write_random_model(tmp.path(), c, {3, dtype::f32, 1.0, {}});
  const auto w = model_weights::load(tmp.path());
  const auto& experts = w.layers[0].experts;
  const std::int64_t d = c.hidden_size, n = 24;
  rng r(9);
  std::vector<float> x(static_cast<std::size_t>(n * d));
  for (auto& v : x) v = static_cast<float>(r.normal());
  // Tokens 0-7 the same row: they share their experts.
  for (std::int64_t t = 1; t < 8; ++t) std::memcpy(x.data() + t * d, x.data(), static_cast<std::size_t>(d) * 4);

  moe_mlp mlp;
  std::vector<float> alone(static_cast<std::size_t>(d)), batch(x.size());
  mlp.forward(c, experts, x.data(), 8, batch.data());
  CHECK(mlp.experts_run() == 2); // eight tokens, two experts, each run once
  mlp.forward(c, experts, x.data(), n, batch.data());
  CHECK(mlp.experts_run() > 2);
  CHECK(mlp.experts_run() <= 16);
  for (std::int64_t t = 0; t < n; ++t) {
    mlp.forward(c, experts, x.data() + t * d, 1, alone.data());
    CHECK(mlp.experts_run() == 2);
    CHECK(std::memcmp(alone.data(), batch.data() + t * d, static_cast<std::size_t>(d) * 4) == 0);
  }
}
