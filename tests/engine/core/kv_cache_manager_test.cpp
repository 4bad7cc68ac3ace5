#include "engine/core/kv_cache_manager.hpp"
#include "base/rng.hpp"
#include "policies/eviction/lru.hpp"

#include "tests/support/tokens.hpp"

#include <doctest/doctest.h>

#include <map>
#include <numeric>
#include <set>

using namespace troupe;

using troupe::testing::tokens;

TEST_CASE("kv_cache_manager: a shared prefix is computed once") {
  policy::lru_eviction lru;
  prefix_cache cache(16, lru);
  kv_cache_manager m(cache, {16, 0, true});
  auto a = tokens(40);
  CHECK(m.begin(1, 7, 0, a) == 0);
  REQUIRE(m.grow(1, 40, true));
  CHECK(m.blocks(1).size() == 3);
  m.commit(1, a, {}, 40); // two full blocks published
  const auto a_blocks = m.blocks(1);
  m.end(1);
  CHECK(cache.num_evictable() == 2);
  CHECK(cache.num_free() == 14);

  auto b = tokens(32);
  b.push_back(9);
  b.push_back(9); // same 32-token prefix, another tail
  CHECK(m.begin(2, 7, 0, b) == 32);
  CHECK(m.blocks(2) == std::vector<block_id>{a_blocks[0], a_blocks[1]});
  REQUIRE(m.grow(2, 34, true));
  CHECK(m.blocks(2).size() == 3);
  CHECK(cache.num_hits() == 2);

  CHECK(m.begin(3, 8, 0, b) == 0); // another tenant shares nothing
  m.end(3);
  auto whole = tokens(32); // a prompt that is exactly cached: its last block is recomputed
  CHECK(m.begin(4, 7, 0, whole) == 16);
  m.end(4);
  m.end(2);
  cache.check_invariants();
}

TEST_CASE("kv_cache_manager: prefix caching off, and the watermark") {
  policy::lru_eviction lru;
  prefix_cache cache(8, lru);
  kv_cache_manager off(cache, {4, 3, false});
  auto p = tokens(12);
  CHECK(off.begin(1, 0, 0, p) == 0);
  REQUIRE(off.grow(1, 12, true));
  off.commit(1, p, {}, 12);
  CHECK(cache.num_evictable() == 0); // nothing published
  CHECK(off.begin(2, 0, 0, p) == 0);
  CHECK(!off.grow(2, 12, true));  // 5 available - 3 needed < watermark 3
  CHECK(off.grow(2, 12, false));  // a running request may use the reserve
  CHECK(cache.num_available() == 2);
  CHECK(!off.grow(2, 24, false)); // 3 more blocks: not there, nothing taken
  CHECK(cache.num_available() == 2);
  off.end(1);
  off.end(2);
  CHECK(cache.num_free() == 8);
}

TEST_CASE("kv_cache_manager: random requests over three tenants never share across tenants") {
  policy::lru_eviction lru;
  prefix_cache cache(48, lru);
  kv_cache_manager m(cache, {4, 2, true});
  rng g(7);
  struct live {
    std::uint64_t tenant;
    std::vector<token_id> tokens;
    std::int32_t computed;
  };
  std::map<request_id, live> reqs;
  request_id next = 1;
  for (int op = 0; op < 40'000; ++op) {
    const auto r = g.next() % 10;
    if (r < 3 && reqs.size() < 12) {
      // Prompts from a few shared prefixes, so hits are common.
      live l{g.next() % 3, tokens(static_cast<std::int32_t>(4 * (g.next() % 4)), 0), 0};
      for (std::uint64_t i = 0, n = 1 + g.next() % 9; i < n; ++i) l.tokens.push_back(static_cast<token_id>(g.next() % 3));
      l.computed = m.begin(next, l.tenant, 0, l.tokens);
      CHECK(l.computed < static_cast<std::int32_t>(l.tokens.size()));
      reqs.emplace(next++, std::move(l));
    } else if (r < 8 && !reqs.empty()) {
      auto it = std::next(reqs.begin(), static_cast<std::ptrdiff_t>(g.next() % reqs.size()));
      auto& l = it->second;
      const auto target = std::min<std::int32_t>(static_cast<std::int32_t>(l.tokens.size()), l.computed + 5);
      if (m.grow(it->first, target + 1, false)) {
        l.computed = target;
        m.commit(it->first, l.tokens, {}, l.computed);
        l.tokens.push_back(static_cast<token_id>(g.next() % 3)); // the sampled token
      }
    } else if (!reqs.empty()) {
      auto it = std::next(reqs.begin(), static_cast<std::ptrdiff_t>(g.next() % reqs.size()));
      m.end(it->first);
      reqs.erase(it);
    }
    std::map<block_id, std::uint64_t> owner;
    std::int64_t referenced = 0;
    for (const auto& [id, l] : reqs)
      for (const block_id b : m.blocks(id)) {
        const auto [pos, fresh] = owner.emplace(b, l.tenant);
        REQUIRE(pos->second == l.tenant); // no block shared across tenants
        referenced += fresh;
      }
    REQUIRE(cache.num_referenced() == referenced);
    cache.check_invariants();
  }
  for (const auto& [id, l] : reqs) m.end(id);
  CHECK(cache.num_referenced() == 0);
  CHECK(cache.num_hits() > 0);
}

TEST_CASE("kv_cache_manager: with a sliding window, the blocks before the next token's window are released") {
  for (const bool prefix_caching : {false, true}) {
    CAPTURE(prefix_caching);
    policy::lru_eviction lru;
    prefix_cache cache(16, lru);
    kv_cache_options o{4, 0, prefix_caching};
    o.sliding_window_tokens = 6;
    kv_cache_manager m(cache, o);
    const auto a = tokens(20);
    m.begin(1, 7, 0, a);
    auto& e = *m.entry_of(1);
    REQUIRE(m.grow(e, 16, false)); // positions [0, 16): 4 blocks
    const auto held = m.blocks(1);
    m.commit(e, a, {}, 16);
    m.slide(e, 16); // the token at 16 attends to 11..16: block 2 ([8, 12)) on
    CHECK(e.num_dropped == 2);
    CHECK(m.blocks(1) == std::vector<block_id>{kv_entry::no_block, kv_entry::no_block, held[2], held[3]});
    CHECK(cache.num_referenced() == 2);
    m.slide(e, 16); // nothing more
    CHECK(e.num_dropped == 2);
    REQUIRE(m.grow(e, 20, false)); // appended after the dropped ones: indices stay positions
    CHECK(m.blocks(1).size() == 5);
    m.commit(e, a, {}, 19);
    m.slide(e, 19); // from 14 on: block 3
    CHECK(e.num_dropped == 3);
    CHECK(cache.num_referenced() == 2);
    // Swapped out and back: fresh blocks only where the window still is.
    m.drop_blocks(e);
    CHECK(cache.num_referenced() == 0);
    CHECK(m.blocks(1).size() == 3);
    REQUIRE(m.grow(e, 20, false));
    CHECK(m.blocks(1).size() == 5);
    CHECK(cache.num_referenced() == 2);
    m.end(1);
    CHECK(cache.num_referenced() == 0);
    // The published blocks that left the window stay cached for others.
    CHECK(cache.num_evictable() == (prefix_caching ? 4 : 0));
    cache.check_invariants();
  }
}
