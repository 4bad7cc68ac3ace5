// Tensor parallelism on the CPU backend: the sharding the CUDA backend uses
// (shard_weights), run by 2 and 4 ranks on threads with the in-process
// all-reduce, against the unsharded model and the double-precision reference.

#include "engine/cpu/cpu_model.hpp"
#include "engine/cpu/local_all_reduce.hpp"
#include "engine/formats/model_error.hpp"
#include "engine/model/presets.hpp"
#include "engine/make_model/random_model.hpp"
#include "engine/model/tensor_parallel.hpp"
#include "base/rng.hpp"
#include "tests/reference/hf_forward.hpp"
#include "tests/support/dequantized.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <thread>

using namespace troupe;

namespace {

auto make_config(std::int64_t vocab, std::int64_t hidden, std::int64_t inter, std::int64_t heads,
                 std::int64_t kv_heads, std::int64_t head_dim) -> model_config {
  auto c = llama_config(vocab, hidden, inter, 2, heads, kv_heads);
  c.head_dim = head_dim;
  c.bos_token_id.reset();
  c.eos_token_ids.clear();
  c.rms_norm_eps = 1e-5;
  return c;
}

auto max_abs(std::span<const float> v) -> double {
  double m = 0;
  for (const float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

// Two steps (a prefill chunk of each sequence, then one decode token each)
// on `world` ranks; returns rank 0's logits of both steps (every position of
// the first, then the decodes), after checking every rank got the same.
auto run_ranks(const model_weights& full, int world, const std::vector<std::vector<token_id>>& prompts,
               const std::vector<token_id>& next) -> std::vector<float> {
  local_all_reduce_group group(world);
  std::vector<model_weights> shards;
  for (int r = 0; r < world; ++r) shards.push_back(shard_weights(full, {r, world}));
  std::vector<std::vector<float>> out(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      cpu_model m(shards[static_cast<std::size_t>(r)], 4, 32, world > 1 ? &group.member(r) : nullptr);
      std::vector<std::vector<block_id>> tables;
      for (std::size_t s = 0; s < prompts.size(); ++s)
        tables.push_back({static_cast<block_id>(10 * s), static_cast<block_id>(10 * s + 1),
                          static_cast<block_id>(10 * s + 2), static_cast<block_id>(10 * s + 3)});
      std::vector<cpu_model::chunk> step;
      for (std::size_t s = 0; s < prompts.size(); ++s) step.push_back({prompts[s], 0, tables[s]});
      auto& got = out[static_cast<std::size_t>(r)];
      m.forward(step, true, got);
      step.clear();
      for (std::size_t s = 0; s < prompts.size(); ++s)
        step.push_back({std::span(next).subspan(s, 1), static_cast<std::int32_t>(prompts[s].size()), tables[s]});
      std::vector<float> decode;
      m.forward(step, false, decode);
      got.insert(got.end(), decode.begin(), decode.end());
    });
  for (auto& t : threads) t.join();
  for (int r = 1; r < world; ++r) CHECK(out[static_cast<std::size_t>(r)] == out[0]); // the replicated head agrees
  return out[0];
}

} // namespace

TEST_CASE("2 and 4 ranks compute the unsharded model's logits") {
  testing::temp_dir tmp;
  struct shape {
    const char* name;
    model_config config;
    dtype type;
  };
  auto llama3 = make_config(89, 64, 96, 8, 4, 8);
  llama3.rope_scaling = rope_scaling_config::llama3(8.0, 1.0, 4.0, 16);
  llama3.tie_word_embeddings = true;
  // The other families: Qwen2's biases follow their rows, per-head norms and
  // Gemma's post norms are replicated, Phi-3's fused projections are sliced.
  const auto family = [](std::string_view arch, std::int64_t heads, std::int64_t kv_heads) {
    auto c = family_config(arch, 83, 64, 96, 2, heads, kv_heads, 16);
    c.bos_token_id.reset();
    c.eos_token_ids.clear();
    c.rms_norm_eps = 1e-5;
    c.sliding_window = c.sliding_window > 0 ? 5 : 0;
    return c;
  };
  auto gemma2 = family("Gemma2ForCausalLM", 8, 4);
  gemma2.attn_logit_softcapping = 2.0;
  gemma2.final_logit_softcapping = 3.0;
  // Mixtures of experts: each expert split as the dense MLP is.
  auto qwen3_moe = with_experts(family("Qwen3MoeForCausalLM", 8, 4), 6, 2, 32, true);
  auto mixtral = with_experts(family("MixtralForCausalLM", 4, 4), 4, 2, 96, true);
  // gpt-oss: sinks sliced with their heads, biases of o_proj and the experts'
  // down projection on rank 0 alone (its MXFP4 experts widened to F32 for
  // the reference).
  auto gpt_oss = with_experts(family("GptOssForCausalLM", 8, 4), 4, 2, 96, false);
  gpt_oss.swiglu_limit = 7.0;
  gpt_oss.mxfp4_experts = true;
  gpt_oss.sliding_window = 5;
  gpt_oss.sliding_layers = {true, false};
  const shape shapes[] = {{"MHA", make_config(97, 64, 128, 4, 4, 16), dtype::f32},
                          {"Qwen3-MoE", qwen3_moe, dtype::bf16},
                          {"gpt-oss", gpt_oss, dtype::f32},
                          {"Mixtral", mixtral, dtype::f32},
                          {"GQA ratio 2, llama3 RoPE, tied", llama3, dtype::f32},
                          {"GQA ratio 2, BF16", make_config(64, 96, 160, 8, 4, 12), dtype::bf16},
                          {"Qwen2", family("Qwen2ForCausalLM", 8, 4), dtype::f32},
                          {"Qwen3", family("Qwen3ForCausalLM", 8, 4), dtype::bf16},
                          {"Gemma 2", gemma2, dtype::f32},
                          {"Gemma 3", family("Gemma3ForCausalLM", 4, 4), dtype::f32},
                          {"Phi-3", family("Phi3ForCausalLM", 4, 4), dtype::f32}};
  std::uint64_t seed = 40;
  for (const auto& sh : shapes) {
    INFO(std::string(sh.name));
    write_random_model(tmp / sh.name, sh.config, {seed++, sh.type, 1.0, {}});
    const auto full = testing::dequantized(model_weights::load(tmp / sh.name));
    rng r(seed++);
    std::vector<std::vector<token_id>> prompts(3);
    for (auto& p : prompts) {
      p.resize(2 + r.next() % 11);
      for (auto& t : p) t = static_cast<token_id>(r.next() % static_cast<std::uint64_t>(sh.config.vocab_size));
    }
    std::vector<token_id> next(prompts.size());
    for (auto& t : next) t = static_cast<token_id>(r.next() % static_cast<std::uint64_t>(sh.config.vocab_size));

    const auto one = run_ranks(full, 1, prompts, next);
    // The reference: each sequence alone in double precision, its decode token appended.
    const auto vocab = static_cast<std::size_t>(sh.config.vocab_size);
    std::vector<double> want_decodes;
    std::size_t row = 0;
    for (std::size_t s = 0; s < prompts.size(); ++s) {
      auto all = prompts[s];
      all.push_back(next[s]);
      const auto ref = reference::hf_forward(tmp / sh.name, all);
      double num = 0, den = 0;
      for (std::size_t i = 0; i < prompts[s].size() * vocab; ++i) {
        num = std::max(num, std::abs(static_cast<double>(one[row * vocab + i]) - ref[i]));
        den = std::max(den, std::abs(ref[i]));
      }
      CHECK(num / den <= 1e-4);
      row += prompts[s].size();
      want_decodes.insert(want_decodes.end(), ref.end() - static_cast<std::ptrdiff_t>(vocab), ref.end());
    }
    for (const int world : {2, 4}) {
      CAPTURE(world);
      const auto got = run_ranks(full, world, prompts, next);
      REQUIRE(got.size() == one.size());
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(got[i] - one[i])));
      CHECK(worst / max_abs(one) <= 1e-5); // only the order of the sums differs
      // The decodes' logits against the reference too, and the same greedy tokens.
      for (std::size_t s = 0; s < prompts.size(); ++s) {
        const auto* g = got.data() + (row + s) * vocab;
        const auto* o = one.data() + (row + s) * vocab;
        CHECK(std::max_element(g, g + vocab) - g == std::max_element(o, o + vocab) - o);
        double num = 0, den = 0;
        for (std::size_t v = 0; v < vocab; ++v) {
          num = std::max(num, std::abs(static_cast<double>(g[v]) - want_decodes[s * vocab + v]));
          den = std::max(den, std::abs(want_decodes[s * vocab + v]));
        }
        CHECK(num / den <= 1e-4);
      }
    }
  }
}

TEST_CASE("a rank's shard holds its heads and its share of the MLP") {
  testing::temp_dir tmp;
  const auto cfg = make_config(50, 32, 64, 4, 2, 8);
  write_random_model(tmp.path(), cfg, {3, dtype::f32, 1.0, {}});
  const auto full = model_weights::load(tmp.path());
  const auto s = shard_weights(full, {1, 2});
  CHECK(s.config.num_attention_heads == 2);
  CHECK(s.config.num_key_value_heads == 1);
  CHECK(s.config.intermediate_size == 32);
  CHECK(s.config.head_dim == 8);
  const auto& l = s.layers[0];
  const auto& f = full.layers[0];
  CHECK(l.wq.rows == 16);
  CHECK(l.wq.data == f.wq.row(16)); // rows: views
  CHECK(l.wk.data == f.wk.row(8));
  CHECK(l.w_gate.data == f.w_gate.row(32));
  CHECK(l.wo.rows == 32);
  CHECK(l.wo.cols == 16); // columns: copies
  const auto* wo = static_cast<const float*>(l.wo.data);
  const auto* fo = static_cast<const float*>(f.wo.data);
  for (std::int64_t r = 0; r < 32; ++r)
    for (std::int64_t c = 0; c < 16; ++c) CHECK(wo[r * 16 + c] == fo[r * 32 + 16 + c]);
  CHECK(l.w_down.cols == 32);
  CHECK(static_cast<const float*>(l.w_down.data)[5 * 32 + 7] == static_cast<const float*>(f.w_down.data)[5 * 64 + 32 + 7]);
}

TEST_CASE("a model that does not divide among the ranks is refused with the reason") {
  testing::temp_dir tmp;
  const auto cfg = make_config(50, 32, 48, 4, 2, 8);
  write_random_model(tmp.path(), cfg, {4, dtype::f32, 1.0, {}});
  const auto full = model_weights::load(tmp.path());
  CHECK_THROWS_WITH_AS(shard_weights(full, {0, 4}),
                       "tensor parallelism over 4 ranks: num_key_value_heads (2) does not divide by 4", model_error);
  CHECK_THROWS_WITH_AS(shard_weights(full, {0, 3}),
                       "tensor parallelism over 3 ranks: num_attention_heads (4) does not divide by 3", model_error);
  CHECK_THROWS_WITH_AS(shard_weights(full, {2, 2}), "tensor parallelism: rank 2 is not in [0, 2)", model_error);
  CHECK_THROWS_AS(check_shardable(cfg, 0), model_error);
  CHECK_NOTHROW(check_shardable(cfg, 2));
  auto moe = *preset_config("qwen3-30b-a3b");
  moe.moe_intermediate_size = 102;
  CHECK_THROWS_WITH_AS(check_shardable(moe, 4),
                       "tensor parallelism over 4 ranks: moe_intermediate_size (102) does not divide by 4", model_error);
  CHECK_THROWS_WITH_AS(check_shardable(*preset_config("olmoe-1b-7b"), 2),
                       "tensor parallelism: OLMoE's q/k norms span every head at once, which troupe does not shard",
                       model_error);
}
