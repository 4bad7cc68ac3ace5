#include "engine/core/prefix_cache.hpp"
#include "base/rng.hpp"
#include "policies/eviction/lfu.hpp"
#include "policies/eviction/lru.hpp"
#include "policies/eviction/priority.hpp"

#include <doctest/doctest.h>

#include <map>

using namespace troupe;

namespace {

auto key(std::uint64_t tenant, block_hash parent, std::vector<token_id> tokens) -> block_key {
  return {tenant, parent, std::move(tokens)};
}

} // namespace

TEST_CASE("hash_block: equal keys hash equal; tenant, parent and tokens all count") {
  const auto a = key(1, 0, {1, 2, 3});
  CHECK(hash_block(a) == hash_block(key(1, 0, {1, 2, 3})));
  CHECK(hash_block(a) != hash_block(key(2, 0, {1, 2, 3})));
  CHECK(hash_block(a) != hash_block(key(1, 7, {1, 2, 3})));
  CHECK(hash_block(a) != hash_block(key(1, 0, {1, 2, 4})));
  CHECK(hash_block(a) != 0);
}

TEST_CASE("prefix_cache: free, referenced, cached, evicted") {
  policy::lru_eviction lru;
  prefix_cache c(3, lru);
  auto a = c.allocate(0), b = c.allocate(0), d = c.allocate(0);
  REQUIRE((a && b && d));
  CHECK(*a == 0);
  CHECK(!c.allocate(0)); // all referenced
  CHECK(c.publish(*a, key(1, 0, {5, 6}), 0));
  CHECK(!c.publish(*b, key(1, 0, {5, 6}), 0)); // same content already cached elsewhere
  c.release(*b);                                // unpublished: straight back to free
  CHECK(c.num_free() == 1);
  c.release(*a); // published: stays cached
  CHECK(c.num_evictable() == 1);
  c.check_invariants();

  // A hit takes it back out of the evictable set; another tenant misses.
  CHECK(!c.acquire_cached(key(2, 0, {5, 6}), 0));
  auto hit = c.acquire_cached(key(1, 0, {5, 6}), 0);
  REQUIRE(hit);
  CHECK(*hit == *a);
  CHECK(c.ref_count(*a) == 1);
  CHECK(c.num_hits() == 1);
  CHECK(c.num_queries() == 2);
  c.release(*a);
  // Free blocks go before cached ones; then the cache gives way.
  auto e = c.allocate(0);
  REQUIRE(e);
  CHECK(*e == *b);
  CHECK(c.num_evictable() == 1);
  auto f = c.allocate(0);
  REQUIRE(f);
  CHECK(*f == *a);
  CHECK(c.num_evictions() == 1);
  CHECK(!c.acquire_cached(key(1, 0, {5, 6}), 0)); // evicted: gone from the index
  c.check_invariants();
}

TEST_CASE("prefix_cache: a cold start drops what is cached, not what is referenced") {
  policy::lru_eviction lru;
  prefix_cache c(3, lru);
  auto a = c.allocate(0), b = c.allocate(0);
  REQUIRE((a && b));
  CHECK(c.publish(*a, key(1, 0, {5, 6}), 0));
  CHECK(c.publish(*b, key(1, 0, {7, 8}), 0));
  c.release(*a); // cached, unreferenced
  c.drop_cached();
  CHECK(c.num_evictable() == 0);
  CHECK(c.num_free() == 2);
  CHECK(!c.acquire_cached(key(1, 0, {5, 6}), 0));
  auto still = c.acquire_cached(key(1, 0, {7, 8}), 0); // referenced: kept
  REQUIRE(still);
  CHECK(*still == *b);
  c.check_invariants();
}

TEST_CASE("eviction policies choose the prefix cache's victims") {
  // A: priority 9, hit once, released first. B: priority 0, hit twice,
  // released second. C: priority 0, never hit, released last.
  const auto victim = [](const policy::eviction_policy& p) {
    prefix_cache c(3, p);
    const block_id a = *c.allocate(9), b = *c.allocate(0), d = *c.allocate(0);
    CHECK(c.publish(a, key(1, 0, {1}), 0));
    CHECK(c.publish(b, key(1, 0, {2}), 0));
    CHECK(c.publish(d, key(1, 0, {3}), 0));
    c.release(a);
    CHECK(c.acquire_cached(key(1, 0, {1}), 0) == a);
    c.release(b);
    CHECK(c.acquire_cached(key(1, 0, {2}), 0) == b);
    c.release(b);
    CHECK(c.acquire_cached(key(1, 0, {2}), 0) == b);
    c.release(a);
    c.release(b);
    c.release(d);
    return *c.allocate(0);
  };
  CHECK(victim(policy::lru_eviction()) == 0);      // A: least recently used
  CHECK(victim(policy::lfu_eviction()) == 2);      // C: never hit
  CHECK(victim(policy::priority_eviction()) == 1); // B: priority 0, older than C
}

TEST_CASE("prefix_cache: 100,000 random operations keep every invariant") {
  policy::lru_eviction lru;
  policy::lfu_eviction lfu;
  policy::priority_eviction prio;
  const policy::eviction_policy* policies[] = {&lru, &lfu, &prio};
  for (const auto* p : policies) {
    prefix_cache c(64, *p);
    rng g(42);
    std::vector<std::pair<block_id, std::uint64_t>> held; // (block, tenant that holds it)
    std::map<block_id, int> expected_refs;
    for (int op = 0; op < 35'000; ++op) {
      const auto tenant = g.next() % 3;
      const auto content = key(tenant, 0, {static_cast<token_id>(g.next() % 40)});
      switch (g.next() % 6) {
        case 5: // a fork: one more holder of a held block
          if (!held.empty()) {
            const auto h = held[g.next() % held.size()];
            c.share(h.first);
            CHECK(c.references(h.first) == ++expected_refs[h.first]);
            held.push_back(h);
          }
          break;
        case 0:
        case 1:
          if (auto b = c.allocate(static_cast<std::int32_t>(g.next() % 3))) {
            held.emplace_back(*b, tenant);
            ++expected_refs[*b];
            if (g.next() % 2) (void)c.publish(*b, content, 0);
          }
          break;
        case 2:
          if (auto b = c.acquire_cached(content, 0)) {
            CHECK(c.tenant_of(*b) == tenant); // never across tenants
            held.emplace_back(*b, tenant);
            ++expected_refs[*b];
          }
          break;
        default:
          if (!held.empty()) {
            const auto i = g.next() % held.size();
            const block_id b = held[i].first;
            held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
            c.release(b);
            if (--expected_refs[b] == 0) expected_refs.erase(b);
          }
      }
      for (const auto& [b, n] : expected_refs) REQUIRE(c.ref_count(b) == n);
      REQUIRE(c.num_referenced() == static_cast<std::int64_t>(expected_refs.size()));
      c.check_invariants();
    }
  }
}

TEST_CASE("block_index: colliding hashes, erasure by backward shift") {
  block_index idx(8);
  idx.insert(42, 1);
  idx.insert(42, 2); // same hash, another key
  idx.insert(7, 3);
  CHECK(idx.find(42, [](block_id b) { return b == 2; }) == 2);
  CHECK(idx.find(42, [](block_id) { return false; }) == -1);
  idx.erase(42, 1);
  CHECK(idx.find(42, [](block_id b) { return b == 2; }) == 2); // shifted back into the hole
  CHECK(idx.size() == 2);
  CHECK(!idx.insert_unless(42, 5, [](block_id b) { return b == 2; })); // one probe finds it
  CHECK(idx.insert_unless(42, 5, [](block_id) { return false; }));
  idx.erase(42, 5);
  // Random churn on a small table (chains wrap around its end) against a
  // reference multimap: every entry stays findable.
  rng g(5);
  block_index small(16); // 32 slots
  std::multimap<std::uint64_t, block_id> ref;
  for (int op = 0; op < 20000; ++op) {
    if (ref.size() < 16 && g.next() % 2 == 0) {
      const auto h = g.next() % 40; // few hashes: long chains and equal hashes
      const auto b = static_cast<block_id>(op);
      small.insert(h, b);
      ref.emplace(h, b);
    } else if (!ref.empty()) {
      auto it = ref.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(g.next() % ref.size()));
      small.erase(it->first, it->second);
      ref.erase(it);
    }
    REQUIRE(small.size() == static_cast<std::int64_t>(ref.size()));
    for (const auto& [h, b] : ref) REQUIRE(small.find(h, [b = b](block_id c) { return c == b; }) == b);
  }
}
