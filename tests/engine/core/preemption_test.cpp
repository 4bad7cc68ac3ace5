// Preemption must not show in the output: with a KV pool so small that
// requests keep preempting each other, greedy outputs are token-for-token
// those of a run with room for everyone (the real CPU model), whether the
// victims recompute or swap their KV to host memory and back.

#include "engine/core/batch_scheduler.hpp"
#include "engine/cpu/cpu_executor.hpp"
#include "engine/cpu/cpu_model.hpp"
#include "engine/model/presets.hpp"
#include "engine/make_model/random_model.hpp"
#include "engine/make_model/tiny_model.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "policies/eviction/lru.hpp"
#include "policies/scheduling/fcfs.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>

using namespace troupe;

namespace {

struct outcome {
  std::map<request_id, std::vector<token_id>> tokens;
  std::int64_t preemptions = 0;
  std::uint64_t prefix_hits = 0;
  std::int64_t swap_outs = 0;
  std::int64_t computed_tokens = 0; ///< every step's, summed
  std::map<request_id, std::vector<token_id>> prompts;
  /// With prompt_logprobs: each request's prompt scores (one update carries them).
  std::map<request_id, std::vector<sample_result>> prompt_logprobs;
};

auto run(const model_weights& w, const tokenizer& tok, std::int32_t num_blocks, bool prefix_caching,
         preemption_mode mode = preemption_mode::recompute, std::int32_t prompt_logprobs = -1,
         std::int32_t token_budget = 64, std::int32_t sliding_window_tokens = 0) -> outcome {
  const std::int32_t bs = 4;
  const std::int32_t host_blocks = 64;
  cpu_executor ex(w, {bs, num_blocks, 1, 42, host_blocks});
  policy::lru_eviction lru;
  policy::fcfs_scheduling fcfs;
  prefix_cache cache(num_blocks, lru);
  kv_cache_options kv_opts{bs, 0, prefix_caching};
  kv_opts.sliding_window_tokens = sliding_window_tokens;
  kv_cache_manager kv(cache, kv_opts);
  scheduler_limits lim{8, token_budget, 2048};
  lim.preemption = mode;
  lim.num_host_blocks = host_blocks;
  batch_scheduler s(lim, kv, fcfs, {});
  const char* prompts[] = {"Permission is hereby granted, free of charge,", "This License applies to any program",
                           "THE SOFTWARE IS PROVIDED AS IS", "Permission is hereby granted to use",
                           "You may copy and distribute verbatim copies", "the Licensor"};
  request_id id = 1;
  outcome o;
  for (const char* p : prompts) {
    request r;
    r.id = id++;
    r.prompt = tok.encode(p, true);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 40;
    r.sampling.ignore_eos = true;
    r.sampling.prompt_logprobs = prompt_logprobs;
    o.prompts[r.id] = r.prompt;
    REQUIRE(s.submit(std::move(r)).status == 0);
  }
  for (int step = 0; step < 10'000 && s.has_work(); ++step) {
    const auto out = s.schedule(step);
    o.computed_tokens += out.num_scheduled_tokens();
    const auto result = ex.execute(out);
    const auto ups = s.update(out, result);
    s.check_invariants();
    for (const auto& u : ups) {
      if (u.token) o.tokens[u.id].push_back(u.token->token);
      if (!u.prompt_logprobs.empty()) {
        CHECK(!o.prompt_logprobs.contains(u.id)); // once
        CHECK(o.tokens[u.id].size() == 1);       // with the first token
        o.prompt_logprobs[u.id] = u.prompt_logprobs;
      }
    }
  }
  CHECK(!s.has_work());
  o.preemptions = s.num_preemptions();
  o.prefix_hits = cache.num_hits();
  o.swap_outs = s.num_swap_outs();
  return o;
}

// The tiny preset with fully random weights: its fitted bigram head and damped
// residual make greedy tokens hardly depend on earlier KV, which would hide
// a lost or misplaced block. Here attention carries the context.
void make_context_model(const std::filesystem::path& dir) {
  make_model("tiny", dir, 1);
  write_random_model(dir, *preset_config("tiny"), {7, dtype::f32, 1.0, {}});
}

} // namespace

TEST_CASE("preemption, by recompute or by swap, gives the same greedy tokens as no preemption") {
  testing::temp_dir dir;
  make_context_model(dir.path());
  const auto w = model_weights::load(dir.path());
  const auto tok = tokenizer::load(dir / "tokenizer.model");
  const auto roomy = run(w, tok, 512, false);
  CHECK(roomy.preemptions == 0);
  for (const bool prefix_caching : {false, true}) {
    CAPTURE(prefix_caching);
    const auto tight = run(w, tok, 24, prefix_caching); // about two requests' worth
    CHECK(tight.preemptions > 0);
    CHECK(tight.tokens == roomy.tokens);
    if (prefix_caching) CHECK(tight.prefix_hits > 0); // recomputation found its own blocks again
    else CHECK(tight.computed_tokens > roomy.computed_tokens);
  }
  const auto swap = run(w, tok, 24, false, preemption_mode::swap);
  CHECK(swap.preemptions > 0);
  CHECK(swap.swap_outs == swap.preemptions); // host memory for every victim
  CHECK(swap.tokens == roomy.tokens);
  // Nothing is computed twice: the work is the unpreempted run's.
  CHECK(swap.computed_tokens == roomy.computed_tokens);
}

TEST_CASE("a sliding window's blocks are released as requests go: the same greedy tokens, fewer preemptions") {
  // Mistral's shape: every layer attends to the last 6 positions, so a
  // request needs two or three blocks of 4 at a time, not all of its own.
  testing::temp_dir dir;
  make_model("tiny", dir.path(), 1);
  auto c = *preset_config("tiny");
  c.architecture = "MistralForCausalLM";
  c.sliding_window = 6;
  write_random_model(dir.path(), c, {7, dtype::f32, 1.0, {}});
  const auto w = model_weights::load(dir.path());
  const auto tok = tokenizer::load(dir / "tokenizer.model");
  const auto keep_all = run(w, tok, 512, false);
  CHECK(keep_all.preemptions == 0);
  const auto tight_keep = run(w, tok, 24, false); // every block kept: preempts
  CHECK(tight_keep.preemptions > 0);
  CHECK(tight_keep.tokens == keep_all.tokens);
  for (const bool prefix_caching : {false, true}) {
    CAPTURE(prefix_caching);
    const auto tight = run(w, tok, 24, prefix_caching, preemption_mode::recompute, -1, 64, 6);
    CHECK(tight.preemptions < tight_keep.preemptions);
    CHECK(tight.tokens == keep_all.tokens);
    // So few blocks that even released ones cannot keep everyone running.
    const auto tighter = run(w, tok, 6, prefix_caching, preemption_mode::recompute, -1, 4, 6);
    CHECK(tighter.preemptions > 0);
    CHECK(tighter.tokens == keep_all.tokens);
  }
  const auto swap = run(w, tok, 6, false, preemption_mode::swap, -1, 4, 6);
  CHECK(swap.swap_outs > 0);
  CHECK(swap.tokens == keep_all.tokens);
}

TEST_CASE("prompt logprobs: every prompt token scored once, as the whole prompt's logits say, through chunking, "
          "preemption and the prefix cache") {
  testing::temp_dir dir;
  make_context_model(dir.path());
  const auto w = model_weights::load(dir.path());
  const auto tok = tokenizer::load(dir / "tokenizer.model");
  const auto plain = run(w, tok, 512, false);
  const auto roomy = run(w, tok, 512, true, preemption_mode::recompute, 3);
  CHECK(roomy.tokens == plain.tokens); // scoring changes no sampled token
  REQUIRE(roomy.prompt_logprobs.size() == roomy.prompts.size());
  for (const auto& [id, prompt] : roomy.prompts) {
    CAPTURE(id);
    const auto& got = roomy.prompt_logprobs.at(id);
    REQUIRE(got.size() + 1 == prompt.size());
    // The reference: the prompt alone, a logits row per position, log_softmax in double.
    cpu_model m(w, 4, 64);
    std::vector<block_id> table(16);
    for (std::size_t b = 0; b < table.size(); ++b) table[b] = static_cast<block_id>(b);
    const cpu_model::chunk solo[] = {{prompt, 0, table}};
    std::vector<float> logits;
    m.forward(solo, true, logits);
    const auto vocab = static_cast<std::size_t>(w.config.vocab_size);
    for (std::size_t i = 0; i + 1 < prompt.size(); ++i) {
      CAPTURE(i);
      const float* row = logits.data() + i * vocab;
      double max = row[0], sum = 0;
      for (std::size_t v = 0; v < vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
      for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
      const auto lp = [&](token_id t) { return static_cast<double>(row[t]) - max - std::log(sum); };
      CHECK(got[i].token == prompt[i + 1]);
      CHECK(got[i].logprob == doctest::Approx(lp(prompt[i + 1])).epsilon(1e-5));
      REQUIRE(got[i].top_logprobs.size() == 3);
      const auto best = std::max_element(row, row + vocab) - row;
      CHECK(got[i].top_logprobs[0].token == best);
      for (const auto& t : got[i].top_logprobs) CHECK(t.logprob == doctest::Approx(lp(t.token)).epsilon(1e-5));
      CHECK(got[i].top_logprobs[0].logprob >= got[i].top_logprobs[1].logprob);
    }
  }
  // Prompts split over steps, requests preempted and recomputed, a prefix
  // cache full of their blocks: the same scores to the bit, each sent once.
  for (const bool prefix_caching : {false, true}) {
    CAPTURE(prefix_caching);
    const auto tight = run(w, tok, 24, prefix_caching, preemption_mode::recompute, 3, 5);
    CHECK(tight.preemptions > 0);
    CHECK(tight.tokens == plain.tokens);
    REQUIRE(tight.prompt_logprobs.size() == roomy.prompt_logprobs.size());
    for (const auto& [id, want] : roomy.prompt_logprobs) {
      const auto& got = tight.prompt_logprobs.at(id);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        CHECK(got[i].token == want[i].token);
        CHECK(got[i].logprob == want[i].logprob);
      }
    }
  }
}
