#include "policies/registry.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

using namespace troupe::policy;

TEST_CASE("registry: every built-in eviction policy by name") {
  CHECK(eviction_policy_names() == std::vector<std::string>{"lru", "lfu", "priority"});
  for (const auto& n : eviction_policy_names()) CHECK(make_eviction_policy(n)->name() == n);
  CHECK_THROWS_WITH_AS(make_eviction_policy("fifo"), "unknown eviction policy 'fifo' (known: lru, lfu, priority)",
                       std::invalid_argument);
}
