// The paged, batched CPU forward against the independent double-precision
// reference, over random model shapes, batch mixes, chunk and block sizes.

#include "engine/cpu/cpu_model.hpp"
#include "engine/cpu/huge_pages.hpp"
#include "engine/cpu/linear.hpp"
#include "engine/cpu/threads.hpp"
#include "engine/model/presets.hpp"
#include "engine/model/quantize_weights.hpp"
#include "engine/make_model/random_model.hpp"
#include "base/rng.hpp"
#include "tests/reference/hf_forward.hpp"
#include "tests/reference/naive_forward.hpp"
#include "tests/support/dequantized.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

using namespace troupe;
using troupe::testing::dequantized;

namespace {

auto make_config(std::int64_t vocab, std::int64_t hidden, std::int64_t inter, std::int64_t layers,
                 std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim) -> model_config {
  auto c = llama_config(vocab, hidden, inter, layers, heads, kv_heads);
  c.head_dim = head_dim;
  c.bos_token_id.reset();
  c.eos_token_ids.clear();
  c.rms_norm_eps = 1e-5;
  return c;
}

// max |a - b| / max |b|: the error relative to the logits' scale.
auto relative_error(std::span<const float> a, std::span<const double> b) -> double {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

// The greedy token of every position is the reference's, wherever the
// reference's best two are apart by more than the tolerance (else either is
// a correct answer).
void check_greedy(std::span<const float> got, std::span<const double> want, std::size_t vocab) {
  double scale = 0.0;
  for (const double x : want) scale = std::max(scale, std::abs(x));
  for (std::size_t row = 0; row * vocab < want.size(); ++row) {
    const auto w = want.subspan(row * vocab, vocab);
    const auto g = got.subspan(row * vocab, vocab);
    const auto best = static_cast<std::size_t>(std::max_element(w.begin(), w.end()) - w.begin());
    double second = -1e300;
    for (std::size_t i = 0; i < vocab; ++i)
      if (i != best) second = std::max(second, w[i]);
    if (w[best] - second > 1e-3 * scale)
      CHECK(static_cast<std::size_t>(std::max_element(g.begin(), g.end()) - g.begin()) == best);
  }
}

struct sequence_plan {
  std::vector<token_id> tokens;
  std::vector<block_id> table;
  std::size_t done = 0;
};

// One mixed step: each unfinished sequence gets a random chunk of 1 to
// max_chunk tokens (1 token = decode-like); owners[b] is chunk b's sequence.
// An empty batch: every sequence is done.
void next_step(std::vector<sequence_plan>& seqs, rng& r, std::size_t max_chunk, std::vector<cpu_model::chunk>& batch,
               std::vector<std::size_t>& owners) {
  batch.clear();
  owners.clear();
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    auto& q = seqs[s];
    if (q.done == q.tokens.size()) continue;
    const std::size_t n = std::min(q.tokens.size() - q.done, 1 + r.next() % max_chunk);
    batch.push_back({std::span(q.tokens).subspan(q.done, n), static_cast<std::int32_t>(q.done), q.table});
    owners.push_back(s);
    q.done += n;
  }
}

// Runs every sequence to its end in mixed steps (next_step). Returns the
// logits of every position of every sequence.
auto run_mixed(cpu_model& m, std::vector<sequence_plan>& seqs, rng& r, std::size_t max_chunk)
    -> std::vector<std::vector<float>> {
  const auto vocab = static_cast<std::size_t>(m.config().vocab_size);
  std::vector<std::vector<float>> out(seqs.size());
  std::vector<float> logits;
  std::vector<cpu_model::chunk> batch;
  std::vector<std::size_t> owners;
  for (;;) {
    next_step(seqs, r, max_chunk, batch, owners);
    if (batch.empty()) return out;
    m.forward(batch, true, logits);
    std::size_t row = 0;
    for (std::size_t b = 0; b < batch.size(); ++b)
      for (std::size_t t = 0; t < batch[b].tokens.size(); ++t, ++row)
        out[owners[b]].insert(out[owners[b]].end(), logits.begin() + static_cast<std::ptrdiff_t>(row * vocab),
                              logits.begin() + static_cast<std::ptrdiff_t>((row + 1) * vocab));
  }
}

// Gives each sequence a block table drawn at random from one shuffled pool,
// so neighbouring positions live in unrelated blocks.
void assign_blocks(std::vector<sequence_plan>& seqs, std::int32_t block_size, rng& r,
                   std::int32_t num_blocks) {
  std::vector<block_id> pool(static_cast<std::size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  for (std::size_t i = pool.size(); i > 1; --i) std::swap(pool[i - 1], pool[r.next() % i]);
  std::size_t next = 0;
  for (auto& s : seqs) {
    const auto need = (s.tokens.size() + static_cast<std::size_t>(block_size) - 1) / static_cast<std::size_t>(block_size);
    s.table.assign(pool.begin() + static_cast<std::ptrdiff_t>(next), pool.begin() + static_cast<std::ptrdiff_t>(next + need));
    next += need;
  }
}

// n sequences of min_len .. min_len + spread - 1 random tokens below vocab,
// their blocks drawn from num_blocks (assign_blocks), all from seed.
auto random_sequences(std::size_t n, std::uint64_t min_len, std::uint64_t spread, std::uint64_t vocab,
                      std::int32_t block_size, std::int32_t num_blocks, std::uint64_t seed)
    -> std::vector<sequence_plan> {
  rng r(seed);
  std::vector<sequence_plan> seqs(n);
  for (auto& q : seqs) {
    q.tokens.resize(min_len + r.next() % spread);
    for (auto& t : q.tokens) t = static_cast<token_id>(r.next() % vocab);
  }
  assign_blocks(seqs, block_size, r, num_blocks);
  return seqs;
}

// run_mixed on a fresh copy of the plans, its steps drawn from seed.
auto run_copy(cpu_model& m, std::vector<sequence_plan> seqs, std::uint64_t seed, std::size_t max_chunk)
    -> std::vector<std::vector<float>> {
  rng steps(seed);
  return run_mixed(m, seqs, steps, max_chunk);
}

struct shape_case {
  const char* name;
  model_config config;
  dtype type;
};

auto cases() -> std::vector<shape_case> {
  std::vector<shape_case> v;
  v.push_back({"MHA, GQA ratio 1", make_config(97, 64, 96, 2, 4, 4, 16), dtype::f32});
  auto b = make_config(131, 64, 128, 3, 8, 2, 8);
  b.rope_theta = 500000.0;
  b.rope_scaling = rope_scaling_config::llama3(8.0, 1.0, 4.0, 16);
  b.tie_word_embeddings = true;
  v.push_back({"GQA ratio 4, llama3 RoPE, tied", b, dtype::f32});
  v.push_back({"GQA ratio 8, BF16", make_config(64, 96, 160, 2, 8, 1, 12), dtype::bf16});
  auto d = make_config(80, 48, 64, 2, 4, 1, 24);
  d.rope_scaling = rope_scaling_config::linear(2.0);
  v.push_back({"GQA ratio 4, F16, linear RoPE, head_dim != hidden/heads", d, dtype::f16});
  return v;
}

auto family(std::string_view arch, std::int64_t vocab, std::int64_t hidden, std::int64_t inter, std::int64_t layers,
            std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim) -> model_config {
  auto c = family_config(arch, vocab, hidden, inter, layers, heads, kv_heads, head_dim);
  c.bos_token_id.reset();
  c.eos_token_ids.clear();
  c.rms_norm_eps = 1e-5;
  return c;
}

// One small mixture of experts per family.
void expert_cases(std::vector<shape_case>& v) {
  // A router's top k of the experts, renormalised or not; a sequence's
  // tokens spread over the experts, some left unchosen.
  auto qwen3_moe = with_experts(family("Qwen3MoeForCausalLM", 97, 64, 96, 2, 4, 2, 16), 8, 3, 32, true);
  v.push_back({"Qwen3-MoE: 8 experts, top 3 renormalised, per-head q/k norms, BF16", qwen3_moe, dtype::bf16});
  auto mixtral = with_experts(family("MixtralForCausalLM", 80, 64, 48, 2, 4, 2, 16), 4, 2, 48, true);
  v.push_back({"Mixtral: 4 experts, top 2", mixtral, dtype::f32});
  auto olmoe = with_experts(family("OlmoeForCausalLM", 90, 48, 64, 2, 4, 4, 12), 6, 2, 64, false);
  v.push_back({"OLMoE: 6 experts, top 2 not renormalised, whole-width q/k norms, F16", olmoe, dtype::f16});
  auto gpt_oss = with_experts(family("GptOssForCausalLM", 83, 64, 64, 2, 4, 2, 16), 4, 2, 64, false);
  gpt_oss.swiglu_limit = 7.0;
  gpt_oss.mxfp4_experts = true;
  gpt_oss.sliding_window = 5;
  gpt_oss.sliding_layers = {true, false};
  gpt_oss.rope_theta = 150000.0;
  gpt_oss.max_position_embeddings = 256;
  gpt_oss.rope_scaling.type = "yarn";
  gpt_oss.rope_scaling.factor = 4.0;
  gpt_oss.rope_scaling.original_max_position_embeddings = 64;
  gpt_oss.rope_scaling.truncate = false;
  v.push_back({"gpt-oss: biases, sinks, window 5, YaRN untruncated, MXFP4 experts routed by top-k logits, clamped SwiGLU",
               gpt_oss, dtype::f32});
}

// One small model per family and per RoPE scaling type, each exercising what
// it adds to Llama; windows and RoPE switch points fall inside the sequences.
auto family_cases() -> std::vector<shape_case> {
  std::vector<shape_case> v;
  auto qwen2 = family("Qwen2ForCausalLM", 97, 64, 96, 2, 4, 2, 16);
  qwen2.rope_theta = 1000000.0;
  qwen2.tie_word_embeddings = true;
  v.push_back({"Qwen2: q/k/v biases, tied, BF16", qwen2, dtype::bf16});
  v.push_back({"Qwen3: q/k norms, head_dim 24 != hidden/heads", family("Qwen3ForCausalLM", 89, 48, 80, 2, 4, 2, 24),
               dtype::f32});
  auto mistral = family("MistralForCausalLM", 80, 64, 96, 2, 4, 2, 16);
  mistral.sliding_window = 5;
  v.push_back({"Mistral: sliding window 5", mistral, dtype::f32});
  auto gemma2 = family("Gemma2ForCausalLM", 90, 32, 64, 3, 4, 2, 16);
  gemma2.sliding_window = 4;
  gemma2.query_pre_attn_scalar = 24;
  gemma2.attn_logit_softcapping = 1.5;
  gemma2.final_logit_softcapping = 2.0;
  v.push_back({"Gemma 2: GeGLU, soft-caps, alternating window 4, BF16", gemma2, dtype::bf16});
  auto gemma3 = family("Gemma3ForCausalLM", 77, 48, 64, 3, 4, 1, 16);
  gemma3.sliding_window = 3;
  gemma3.sliding_layers = {true, false, true};
  gemma3.rope_theta = 1000000.0;
  gemma3.rope_scaling = rope_scaling_config::linear(8.0);
  v.push_back({"Gemma 3: q/k norms, local RoPE base, global linear RoPE, F16", gemma3, dtype::f16});
  for (const std::int64_t original : {64, 2}) {
    auto phi3 = family("Phi3ForCausalLM", 70, 64, 96, 2, 4, 4, 16);
    phi3.max_position_embeddings = 4096;
    auto& s = phi3.rope_scaling;
    s.type = "longrope";
    s.original_max_position_embeddings = original;
    s.factor = 4096.0 / static_cast<double>(original);
    for (int i = 0; i < 8; ++i) {
      s.short_factor.push_back(1.0 + 0.1 * i);
      s.long_factor.push_back(1.0 + 3.0 * i);
    }
    v.push_back({original == 64 ? "Phi-3: fused projections, longrope short factors, BF16"
                                : "Phi-3: longrope long factors from position 2",
                 phi3, original == 64 ? dtype::bf16 : dtype::f32});
  }
  expert_cases(v);
  auto dynamic = make_config(71, 64, 96, 2, 4, 2, 16);
  dynamic.max_position_embeddings = 8;
  dynamic.rope_scaling.type = "dynamic";
  dynamic.rope_scaling.factor = 2.0;
  v.push_back({"Llama: dynamic NTK past position 8", dynamic, dtype::f32});
  auto yarn = make_config(71, 64, 96, 2, 4, 2, 16);
  yarn.max_position_embeddings = 64;
  yarn.rope_scaling.type = "yarn";
  yarn.rope_scaling.factor = 4.0;
  yarn.rope_scaling.original_max_position_embeddings = 16;
  v.push_back({"Llama: YaRN", yarn, dtype::f32});
  return v;
}

} // namespace

TEST_CASE("paged batched forward matches the double-precision reference") {
  testing::temp_dir tmp;
  std::uint64_t seed = 11;
  auto all = cases();
  const auto num_llama = all.size();
  for (auto& f : family_cases()) all.push_back(f);
  for (std::size_t ci = 0; ci < all.size(); ++ci) {
    const auto& sc = all[ci];
    INFO(std::string(sc.name));
    const auto dir = tmp / sc.name;
    write_random_model(dir, sc.config, {seed++, sc.type, 1.0, {}});
    // MXFP4 experts (gpt-oss) widened to F32: the reference multiplies the
    // exact weights by unrounded activations (the quantized path's 8-bit
    // activations are the last test's).
    const auto w = dequantized(model_weights::load(dir));
    for (std::int32_t block_size : {1, 3, 16}) {
      for (std::size_t max_chunk : {std::size_t{1}, std::size_t{5}, std::size_t{64}}) {
        CAPTURE(block_size);
        CAPTURE(max_chunk);
        rng r(seed++);
        std::vector<sequence_plan> seqs(1 + r.next() % 4);
        for (auto& s : seqs) {
          s.tokens.resize(1 + r.next() % 24);
          for (auto& t : s.tokens) t = static_cast<token_id>(r.next() % static_cast<std::uint64_t>(sc.config.vocab_size));
        }
        const std::int32_t num_blocks = 4 * 24 / block_size + 8;
        assign_blocks(seqs, block_size, r, num_blocks);
        cpu_model m(w, block_size, num_blocks);
        const auto got = run_mixed(m, seqs, r, max_chunk);
        for (std::size_t s = 0; s < seqs.size(); ++s) {
          // Every case against the reference written from transformers'
          // definitions; Llama's also against the original one.
          const auto want = reference::hf_forward(dir, seqs[s].tokens);
          REQUIRE(got[s].size() == want.size());
          CHECK(relative_error(got[s], want) <= 1e-4);
          if (ci < num_llama) CHECK(relative_error(got[s], reference::naive_forward(w, seqs[s].tokens)) <= 1e-4);
          check_greedy(got[s], want, static_cast<std::size_t>(sc.config.vocab_size));
        }
      }
    }
  }
}

TEST_CASE("a sequence's logits are bitwise the same alone, in any batch mix, at any position and any chunking") {
  // Batch invariance (see gemm.hpp): what else shares a step, where the
  // sequence sits in it, how its prompt is chunked and how many threads run
  // change nothing, to the last bit. Random mixes of prefill chunks and
  // single tokens, in both weight layouts, on 1 and 2 threads.
  testing::temp_dir tmp;
  std::uint64_t seed = 101;
  auto shapes = cases();
  auto ragged = make_config(90, 72, 100, 2, 6, 2, 12); // hidden and intermediate not 16-multiples
  shapes.push_back({"ragged sizes, BF16", ragged, dtype::bf16});
  for (auto& f : family_cases()) shapes.push_back(f);
  for (const auto& sc : shapes) {
    INFO(std::string(sc.name));
    const auto dir = tmp / sc.name;
    write_random_model(dir, sc.config, {seed++, sc.type, 1.0, {}});
    const auto mapped = model_weights::load(dir);
    auto packed = model_weights::load(dir);
    place_in_huge_pages(packed);
    const auto vocab = static_cast<std::size_t>(sc.config.vocab_size);
    rng r(seed++);
    std::vector<sequence_plan> seqs(5);
    for (auto& q : seqs) {
      q.tokens.resize(1 + r.next() % 40);
      for (auto& t : q.tokens) t = static_cast<token_id>(r.next() % static_cast<std::uint64_t>(sc.config.vocab_size));
    }
    constexpr std::int32_t block_size = 4;
    const std::int32_t num_blocks = 5 * 40 / block_size + 8;
    // Each sequence alone, its whole prompt in one step: the reference.
    std::vector<std::vector<float>> want(seqs.size());
    for (std::size_t q = 0; q < seqs.size(); ++q) {
      assign_blocks(seqs, block_size, r, num_blocks);
      cpu_model m(packed, block_size, num_blocks);
      const cpu_model::chunk solo[] = {{seqs[q].tokens, 0, seqs[q].table}};
      m.forward(solo, true, want[q]);
    }
    for (int trial = 0; trial < 8; ++trial) {
      CAPTURE(trial);
      set_cpu_threads(1 + trial % 2);
      const auto& w = trial % 3 == 2 ? mapped : packed;
      // A random subset in a random order: each sequence is alone in some
      // trials and at every position in others.
      std::vector<sequence_plan> mix;
      std::vector<std::size_t> which;
      for (std::size_t q = 0; q < seqs.size(); ++q)
        if (trial == 0 ? q == 0 : r.next() % 3 != 0) {
          const auto at = r.next() % (mix.size() + 1);
          mix.insert(mix.begin() + static_cast<std::ptrdiff_t>(at), seqs[q]);
          which.insert(which.begin() + static_cast<std::ptrdiff_t>(at), q);
        }
      if (mix.empty()) continue;
      for (auto& q : mix) q.done = 0;
      assign_blocks(mix, block_size, r, num_blocks);
      cpu_model m(w, block_size, num_blocks);
      const std::size_t max_chunk = std::array<std::size_t, 4>{1, 3, 7, 64}[static_cast<std::size_t>(trial % 4)];
      // Step by step, as the executor does: one logits row per chunk (its
      // last token), set against the reference at that position.
      std::vector<float> logits;
      std::vector<cpu_model::chunk> batch;
      std::vector<std::size_t> owners;
      for (;;) {
        next_step(mix, r, max_chunk, batch, owners);
        if (batch.empty()) break;
        m.forward(batch, false, logits);
        for (std::size_t b = 0; b < batch.size(); ++b) {
          const auto& ref = want[which[owners[b]]];
          const auto pos = mix[owners[b]].done - 1;
          CHECK(std::memcmp(logits.data() + b * vocab, ref.data() + pos * vocab, vocab * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("weights moved into huge pages give the same logits") {
  testing::temp_dir tmp;
  auto cfg = make_config(61, 32, 48, 2, 4, 2, 8);
  cfg.tie_word_embeddings = true;
  write_random_model(tmp.path(), cfg, {21, dtype::bf16, 1.0, {}});
  const auto mapped = model_weights::load(tmp.path());
  auto moved = model_weights::load(tmp.path());
  place_in_huge_pages(moved);
  CHECK(moved.embed.data != mapped.embed.data);
  CHECK(moved.lm_head.data == moved.embed.data); // still tied
  REQUIRE(moved.storage.size() == 1);
  const std::vector<token_id> toks{3, 1, 4, 1, 5, 9, 2, 6};
  const std::vector<block_id> table{0};
  std::vector<float> a, b;
  cpu_model ma(mapped, 8, 1), mb(moved, 8, 1);
  const cpu_model::chunk c[] = {{toks, 0, table}};
  ma.forward(c, true, a);
  mb.forward(c, true, b);
  CHECK(a == b);
}

TEST_CASE("only the last token of each chunk reaches the head unless all logits are asked") {
  testing::temp_dir tmp;
  const auto cfg = make_config(50, 32, 48, 1, 4, 2, 8);
  write_random_model(tmp.path(), cfg, {9, dtype::f32, 1.0, {}});
  const auto w = model_weights::load(tmp.path());
  const std::vector<token_id> a{1, 2, 3, 4, 5}, b{6, 7};
  const std::vector<block_id> ta{0}, tb{1};
  cpu_model m1(w, 8, 2), m2(w, 8, 2);
  std::vector<float> all, last;
  const cpu_model::chunk batch[] = {{a, 0, ta}, {b, 0, tb}};
  m1.forward(batch, true, all);
  m2.forward(batch, false, last);
  REQUIRE(all.size() == 7 * 50);
  REQUIRE(last.size() == 2 * 50);
  for (std::size_t v = 0; v < 50; ++v) {
    CHECK(last[v] == doctest::Approx(all[4 * 50 + v]).epsilon(1e-5));
    CHECK(last[50 + v] == doctest::Approx(all[6 * 50 + v]).epsilon(1e-5));
  }
  // A chunk may ask for all its rows alone (prompt logprobs): a's five, then
  // b's last; the same bits as the whole batch's rows.
  cpu_model m3(w, 8, 2);
  std::vector<float> mixed;
  const cpu_model::chunk some[] = {{a, 0, ta, true}, {b, 0, tb}};
  m3.forward(some, false, mixed);
  REQUIRE(mixed.size() == 6 * 50);
  CHECK(std::equal(mixed.begin(), mixed.begin() + 5 * 50, all.begin()));
  CHECK(std::equal(mixed.begin() + 5 * 50, mixed.end(), all.begin() + 6 * 50));
}

TEST_CASE("a KV cache of each type stores what it is given within its rounding, and swaps whole") {
  // One kv head of head_dim 64 in blocks of 4: every slot written, read back
  // through the F32 tiles attention uses, against the values' own rounding.
  constexpr std::int64_t hd = 64;
  constexpr std::int32_t bs = 4;
  rng r(7);
  std::vector<float> k(hd * bs), v(hd * bs);
  for (auto& x : k) x = static_cast<float>(r.uniform() * 4.0 - 2.0);
  for (auto& x : v) x = static_cast<float>(r.uniform() * 4.0 - 2.0);
  for (const auto type : {kv_dtype::f32, kv_dtype::bf16, kv_dtype::f16, kv_dtype::q8_0}) {
    CAPTURE(kv_dtype_name(type));
    paged_kv_cache cache(2, 3, bs, 1, hd, type);
    CHECK(cache.block_bytes() == kv_block_bytes(type, 2, 1, hd, bs));
    for (std::int32_t slot = 0; slot < bs; ++slot) cache.write(1, 2, 0, slot, k.data() + slot * hd, v.data() + slot * hd);
    // Half a step of each type for |x| <= 2: bf16 2^-8 relative, f16 2^-11,
    // Q8_0 half of a block's largest magnitude / 127, widened by a tenth for
    // its F16 scale's rounding (at most 2^-11 of the scale, times 127 steps).
    const double tol = type == kv_dtype::f32    ? 0.0
                       : type == kv_dtype::bf16 ? 2.0 / 256
                       : type == kv_dtype::f16  ? 2.0 / 2048
                                                : 1.1 * 2.0 / 254;
    std::vector<float> scratch(hd * bs);
    const float* kt = cache.keys(1, 2, 0, scratch.data());
    for (std::int64_t i = 0; i < hd; ++i)
      for (std::int32_t j = 0; j < bs; ++j) CHECK(std::abs(kt[i * bs + j] - k[static_cast<std::size_t>(j * hd + i)]) <= tol);
    const float* vt = cache.values(1, 2, 0, scratch.data());
    for (std::int64_t i = 0; i < hd * bs; ++i) CHECK(std::abs(vt[i] - v[static_cast<std::size_t>(i)]) <= tol);
    // Swapped out and into another block: the same bytes, so the same floats.
    std::vector<std::byte> host(static_cast<std::size_t>(cache.block_bytes()));
    cache.save_block(2, host.data());
    cache.load_block(0, host.data());
    std::vector<float> a(hd * bs), b(hd * bs);
    std::memcpy(a.data(), cache.values(1, 2, 0, scratch.data()), a.size() * sizeof(float));
    std::memcpy(b.data(), cache.values(1, 0, 0, scratch.data()), b.size() * sizeof(float));
    CHECK(a == b);
  }
}

TEST_CASE("a model over a 16-bit or Q8_0 KV cache: logits near the F32 cache's, bitwise batch-invariant") {
  testing::temp_dir tmp;
  auto cfg = make_config(97, 64, 96, 2, 4, 2, 32);
  write_random_model(tmp.path(), cfg, {31, dtype::f32, 1.0, {}});
  const auto w = model_weights::load(tmp.path());
  constexpr std::int32_t bs = 4, num_blocks = 64;
  const auto seqs = random_sequences(4, 5, 30, 97, bs, num_blocks, 5);
  const auto run = [&](kv_dtype type, std::size_t max_chunk) {
    cpu_model m(w, bs, num_blocks, nullptr, type);
    return run_copy(m, seqs, 9 + max_chunk, max_chunk);
  };
  const auto exact = run(kv_dtype::f32, 64);
  for (const auto type : {kv_dtype::bf16, kv_dtype::f16, kv_dtype::q8_0}) {
    CAPTURE(kv_dtype_name(type));
    const auto whole = run(type, 64), pieces = run(type, 3);
    for (std::size_t q = 0; q < seqs.size(); ++q) {
      // Each position's logits the same bits however the prompts were cut
      // and batched: a cached value is rounded once, when written.
      CHECK(whole[q] == pieces[q]);
      // And close to the F32 cache's: the rounding of the keys and values,
      // relative to the logits' scale (measured on this model, largest of
      // the four sequences: bf16 6.3e-3, f16 5.8e-4, Q8_0 1.8e-2), with room
      // of about 2x.
      std::vector<double> ref(exact[q].begin(), exact[q].end());
      const double tol = type == kv_dtype::bf16 ? 1.5e-2 : type == kv_dtype::f16 ? 1.5e-3 : 4e-2;
      CHECK(relative_error(whole[q], ref) <= tol);
    }
  }
}

TEST_CASE("a model of quantized weights: bitwise batch-invariant, and its float twin's logits but for x's 8 bits") {
  // Q8_0 and Q4_K matrices (quantize_weights, as engine.weight_dtype does)
  // through the quantized kernels: each position's logits the same bits
  // however prompts are cut and batched, on 1 and 2 threads; and close to
  // the same weights widened to F32 through the float kernels, the only
  // difference being x rounded to 8 bits per block.
  testing::temp_dir tmp;
  auto cfg = make_config(300, 256, 512, 2, 8, 4, 32);
  write_random_model(tmp.path(), cfg, {41, dtype::f32, 1.0, {}});
  constexpr std::int32_t bs = 4, num_blocks = 96;
  const auto seqs = random_sequences(4, 5, 40, 300, bs, num_blocks, 17);
  const auto run = [&](const model_weights& w, std::size_t max_chunk) {
    cpu_model m(w, bs, num_blocks);
    return run_copy(m, seqs, 3 + max_chunk, max_chunk);
  };
  for (const auto type : {gguf::tensor_type::q8_0, gguf::tensor_type::q4_k}) {
    CAPTURE(gguf::type_name(type));
    auto w = model_weights::load(tmp.path());
    quantize_weights(w, type);
    REQUIRE(w.layers[0].w_down.quant == type);
    set_cpu_threads(2);
    const auto whole = run(w, 64);
    const auto twin = run(dequantized(w), 64);
    set_cpu_threads(1);
    const auto pieces = run(w, 3);
    set_cpu_threads(2);
    for (std::size_t q = 0; q < seqs.size(); ++q) {
      CHECK(whole[q] == pieces[q]);
      // x's rounding to 8 bits (half a step: 1/254 of a block's largest
      // value) through two layers of random weights: measured at most
      // 2.4e-2 (Q8_0) and 3.3e-2 (Q4_K) of the logits' scale; room of 2x.
      std::vector<double> ref(twin[q].begin(), twin[q].end());
      CHECK(relative_error(whole[q], ref) <= 7e-2);
    }
  }
}
