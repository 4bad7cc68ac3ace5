#include "engine/core/batch_scheduler.hpp"
#include "engine/core/leased_blocks.hpp"
#include "engine/core/memory_manager.hpp"
#include "base/rng.hpp"
#include "engine/zero_executor.hpp"
#include "policies/eviction/lru.hpp"
#include "policies/registry.hpp"

#include "tests/support/tokens.hpp"

#include <doctest/doctest.h>

#include <numeric>

using namespace troupe;

using troupe::testing::tokens;

TEST_CASE("memory_manager: leases, publishes through a lease, matches for another replica") {
  policy::lru_eviction lru;
  memory_manager mm(16, lru);
  leased_blocks a(8), b(8);
  a.add(mm.lease(8, 0));
  b.add(mm.lease(8, 0));
  CHECK(mm.lease(1, 0).empty()); // everything is leased
  kv_cache_manager kva(a, {4, 0, true});
  const auto p = tokens(13);
  CHECK(kva.begin(1, 7, 0, p) == 0); // a lease never matches by itself
  REQUIRE(kva.grow(1, 13, true));
  kva.commit(1, p, {}, 13); // 3 full blocks published
  mm.apply(a.take_outbox());
  CHECK(mm.cache().num_evictable() == 0); // still referenced by request 1
  kva.end(1);
  mm.apply(a.take_outbox());
  CHECK(mm.cache().num_evictable() == 3); // cached for anyone of tenant 7
  a.check_invariants();
  CHECK(a.num_held() == 5); // the 5 unpublished stay in the lease

  // Replica b's request shares the prefix: matched once at the manager.
  const auto q0 = mm.cache().num_queries(), h0 = mm.cache().num_hits();
  auto m = mm.match(7, p, 4, 0);
  CHECK(m.size() == 3);
  CHECK(mm.cache().num_queries() - q0 == 3); // 13 tokens: 3 full blocks, all found
  CHECK(mm.cache().num_hits() - h0 == 3);
  CHECK(mm.match(8, p, 4, 0).empty()); // another tenant
  // Every full block counts as a query, past the first miss too: hits over
  // queries is the share of prompt blocks found.
  CHECK(mm.cache().num_queries() - q0 == 6);
  CHECK(mm.cache().num_hits() - h0 == 3);
  kv_cache_manager kvb(b, {4, 0, true});
  CHECK(kvb.begin_matched(2, 7, 0, p, m) == 12);
  REQUIRE(kvb.grow(2, 14, true));
  CHECK(kvb.blocks(2).size() == 4);
  b.check_invariants();
  kvb.end(2);
  mm.apply(b.take_outbox());
  CHECK(mm.cache().num_evictable() == 3);
  // Giving back a lease returns its blocks to the device.
  a.shrink_to(0);
  mm.apply(a.take_outbox());
  CHECK(mm.cache().num_free() == 5);
  mm.cache().check_invariants();
}

TEST_CASE("memory_manager: two leased replicas under random load conserve every block") {
  policy::lru_eviction lru;
  const std::int32_t num_blocks = 64, bs = 4;
  memory_manager mm(num_blocks, lru);
  struct replica {
    leased_blocks lease{32};
    std::unique_ptr<policy::scheduling_policy> policy = policy::make_scheduling_policy("fcfs");
    kv_cache_manager kv{lease, {bs, 0, true}};
    batch_scheduler s{{4, 32, 96}, kv, *policy, {}};
  };
  replica reps[2];
  for (auto& r : reps) r.lease.add(mm.lease(16, 0));
  zero_executor ex({bs, num_blocks, 50, {}, {}});
  rng g(5);
  request_id next = 1;
  std::int64_t tokens_out = 0;
  for (int step = 0; step < 4000; ++step) {
    auto& r = reps[g.next() % 2];
    if (g.next() % 3 == 0 && next < 500) {
      request q;
      q.tenant = g.next() % 2;
      for (int i = 0, n = static_cast<int>(4 + g.next() % 20); i < n; ++i) q.prompt.push_back(static_cast<token_id>(i % 7));
      q.sampling.max_tokens = static_cast<std::int32_t>(1 + g.next() % 12);
      // A quarter are n choices of one prompt: matched once, the others fork.
      const auto n = g.next() % 4 == 0 ? static_cast<std::int32_t>(2 + g.next() % 2) : 1;
      if (n > 1) q.group = next;
      for (std::int32_t c = 0; c < n; ++c) {
        q.id = next++;
        q.choice = c;
        q.matched_blocks = c == 0 ? mm.match(q.tenant, q.prompt, bs, 0) : std::vector<block_id>{}; // the admission round trip
        const auto m = q.matched_blocks;
        if (r.s.submit(q).status != 0)
          for (const block_id b : m) mm.apply(std::vector<block_op>{{block_op::kind::release, b, {}, 0, 0}});
      }
    }
    if (g.next() % 40 == 0 && next > 1) r.s.abort(1 + g.next() % (next - 1));
    auto st = r.s.schedule(step);
    for (const auto& u : r.s.update(st, ex.execute(st))) tokens_out += u.token.has_value();
    // After the step: the outbox to the manager; a refill when low.
    mm.apply(r.lease.take_outbox());
    if (r.lease.num_free() < 4) r.lease.add(mm.lease(8, 0));
    r.s.check_invariants();
    // Conservation: every reference at the manager is held by a lease.
    std::int64_t refs = 0;
    for (block_id b = 0; b < num_blocks; ++b) refs += mm.cache().ref_count(b);
    REQUIRE(refs == reps[0].lease.num_held() + reps[1].lease.num_held());
    mm.cache().check_invariants();
  }
  CHECK(tokens_out > 1000);
  CHECK(mm.cache().num_hits() > 0);
  CHECK(reps[0].s.num_forks() + reps[1].s.num_forks() > 0);
}

TEST_CASE("leased_blocks: a shared block's holders become references at the manager when it is published") {
  policy::lru_eviction lru;
  memory_manager mm(8, lru);
  leased_blocks a(8);
  a.add(mm.lease(4, 0));
  kv_cache_manager kv(a, {4, 0, true});
  const auto p = tokens(9);
  CHECK(kv.begin(1, 7, 0, p) == 0);
  REQUIRE(kv.grow(1, 9, true)); // 3 blocks, 2 full of the prompt
  CHECK(kv.fork(*kv.entry_of(1), 2, 0, p, 2) == 8); // shared before they are published
  CHECK(a.references(kv.blocks(1)[0]) == 2);
  CHECK(a.num_blocks_held() == 4);
  kv.commit(1, p, {}, 9); // request 1 publishes them: two references each at the manager
  mm.apply(a.take_outbox());
  CHECK(mm.cache().ref_count(kv.blocks(1)[0]) == 2);
  CHECK(a.references(kv.blocks(2)[1]) == 2);
  kv.end(1);
  mm.apply(a.take_outbox());
  CHECK(mm.cache().ref_count(kv.blocks(2)[0]) == 1);
  CHECK(kv.fork(*kv.entry_of(2), 3, 0, p, 2) == 8); // shared once published: one more at the manager
  mm.apply(a.take_outbox());
  CHECK(mm.cache().ref_count(kv.blocks(3)[1]) == 2);
  kv.end(2);
  kv.end(3);
  mm.apply(a.take_outbox());
  CHECK(mm.cache().num_evictable() == 2);
  a.check_invariants();
  mm.cache().check_invariants();
}
