#include "engine/core/evictable_set.hpp"
#include "base/rng.hpp"

#include <doctest/doctest.h>

#include <set>

using namespace troupe;

// Against a std::set of (key, slot): the same smallest entry after every
// operation, with keys in order (LRU's ticks), out of order, and mixed.
TEST_CASE("evictable_set: the smallest (key, slot) first, like an ordered set") {
  for (const int mode : {0, 1, 2}) {
    CAPTURE(mode);
    rng g(static_cast<std::uint64_t>(mode) + 3);
    const std::size_t n = 300;
    evictable_set e(n);
    std::set<std::pair<policy::eviction_key, std::size_t>> ref;
    std::vector<policy::eviction_key> key_of(n);
    std::int64_t tick = 0;
    for (int op = 0; op < 60'000; ++op) {
      const auto slot = static_cast<std::size_t>(g.next() % n);
      if (!e.contains(slot)) {
        ++tick;
        policy::eviction_key k{tick, 0};
        if (mode == 1 || (mode == 2 && g.next() % 3 == 0)) k = {static_cast<std::int64_t>(g.next() % 50), tick % 7};
        e.insert(slot, k);
        key_of[slot] = k;
        ref.emplace(k, slot);
      } else if (g.next() % 2 == 0) {
        e.erase(slot);
        ref.erase({key_of[slot], slot});
      } else { // evict the smallest
        const auto m = e.min();
        REQUIRE(m == ref.begin()->second);
        e.erase(m);
        ref.erase(ref.begin());
      }
      REQUIRE(e.size() == ref.size());
      if (!ref.empty()) REQUIRE(e.min() == ref.begin()->second);
      if (op % 997 == 0) e.check_invariants();
    }
  }
}

// A prefix cache's steady state: blocks freed in LRU order, the oldest
// evicted. The FIFO is consumed from its head; what it holds stays bounded
// (it once grew by an entry per block ever freed: 700 MB over a million
// simulated requests).
TEST_CASE("evictable_set: LRU churn keeps its memory bounded") {
  const std::size_t n = 300;
  evictable_set e(n);
  std::int64_t tick = 0;
  for (std::size_t s = 0; s < n; ++s) e.insert(s, {++tick, 0});
  std::size_t most = 0;
  for (int op = 0; op < 200'000; ++op) {
    const auto s = e.min();
    e.erase(s);
    e.insert(s, {++tick, 0}); // allocated, used, freed again: the newest
    most = std::max(most, e.footprint());
    if (op % 9973 == 0) e.check_invariants();
  }
  CHECK(e.size() == n);
  CHECK(most <= 2 * n + 2048);
}
