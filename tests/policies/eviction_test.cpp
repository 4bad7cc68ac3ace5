// The eviction policies (policies/eviction/): their keys, and the registry's
// names. (Which block each makes the prefix cache give up:
// tests/engine/core/prefix_cache_test.cpp.)

#include "policies/eviction/lfu.hpp"
#include "policies/eviction/lru.hpp"
#include "policies/eviction/priority.hpp"
#include "policies/registry.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

using namespace troupe::policy;

TEST_CASE("eviction policies: exact keys") {
  block_view v{3, 10, 4, 2, 5};
  CHECK(lru_eviction().key(v) == eviction_key{10, -5});
  CHECK(lfu_eviction().key(v) == eviction_key{4, 10});
  CHECK(priority_eviction().key(v) == eviction_key{2, 10});
}

TEST_CASE("registry: every built-in eviction policy by name") {
  CHECK(eviction_policy_names() == std::vector<std::string>{"lru", "lfu", "priority"});
  for (const auto& n : eviction_policy_names()) CHECK(make_eviction_policy(n)->name() == n);
  CHECK_THROWS_WITH_AS(make_eviction_policy("fifo"), "unknown eviction policy 'fifo' (known: lru, lfu, priority)",
                       std::invalid_argument);
}
