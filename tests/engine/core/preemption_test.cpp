// Preemption by recompute must not show in the output: with a KV pool so
// small that requests keep preempting each other, greedy outputs are
// token-for-token those of a run with room for everyone (the real CPU model).

#include "engine/core/batch_scheduler.hpp"
#include "engine/cpu/cpu_executor.hpp"
#include "engine/model/tiny_model.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "policies/eviction/lru.hpp"
#include "policies/scheduling/fcfs.hpp"
#include "tests/support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <map>

using namespace troupe;

namespace {

struct outcome {
  std::map<request_id, std::vector<token_id>> tokens;
  std::int64_t preemptions = 0;
  std::uint64_t prefix_hits = 0;
};

auto run(const model_weights& w, const tokenizer& tok, std::int32_t num_blocks, bool prefix_caching) -> outcome {
  const std::int32_t bs = 4;
  cpu_executor ex(w, {bs, num_blocks, 1, 42});
  policy::lru_eviction lru;
  policy::fcfs_scheduling fcfs;
  prefix_cache cache(num_blocks, lru);
  kv_cache_manager kv(cache, {bs, 0, prefix_caching});
  batch_scheduler s({8, 64, 2048}, kv, fcfs, {});
  const char* prompts[] = {"Permission is hereby granted, free of charge,", "This License applies to any program",
                           "THE SOFTWARE IS PROVIDED AS IS", "Permission is hereby granted to use",
                           "You may copy and distribute verbatim copies", "the Licensor"};
  request_id id = 1;
  for (const char* p : prompts) {
    request r;
    r.id = id++;
    r.prompt = tok.encode(p, true);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 40;
    r.sampling.ignore_eos = true;
    REQUIRE(s.submit(std::move(r)).status == 0);
  }
  outcome o;
  for (int step = 0; step < 10'000 && s.has_work(); ++step) {
    const auto out = s.schedule(step);
    for (const auto& u : s.update(out, ex.execute(out)))
      if (u.token) o.tokens[u.id].push_back(u.token->token);
  }
  CHECK(!s.has_work());
  o.preemptions = s.num_preemptions();
  o.prefix_hits = cache.num_hits();
  return o;
}

} // namespace

TEST_CASE("preemption by recompute gives the same greedy tokens as no preemption") {
  testing::temp_dir dir;
  make_model("tiny", dir.path(), 1);
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
  }
}
