#include "policies/registry.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

using namespace troupe::policy;

namespace {

auto env(const char* name) -> std::string {
  const char* v = std::getenv(name);
  REQUIRE(v != nullptr);
  return v;
}

} // namespace

TEST_CASE("an out-of-tree scheduling policy loads by path and decides") {
  auto p = make_scheduling_policy(env("EXAMPLE_POLICY"));
  CHECK(p->name() == "longest_wait_first");
  request_view a, b, c;
  a.arrival_s = 0;
  a.num_prompt_tokens = 99; // waited 10 s, long prompt: ratio 0.11
  b.arrival_s = 5;
  b.num_prompt_tokens = 4; // waited 5 s, short prompt: ratio 1.2
  c.arrival_s = 9;
  c.num_prompt_tokens = 1; // waited 1 s: ratio 1.0
  const std::vector<request_view> waiting{a, b, c};
  CHECK(p->admission_order({10, waiting, {}}) == std::vector<std::size_t>{1, 2, 0});
  request_view r1, r2;
  r1.max_tokens = 10;
  r2.max_tokens = 50;
  const std::vector<request_view> running{r1, r2};
  CHECK(p->preemption_victim({10, {}, running}) == 1);
}

TEST_CASE("a library built against another policy ABI is refused") {
  const auto path = env("EXAMPLE_POLICY_ABI999");
  CHECK_THROWS_WITH_AS(make_scheduling_policy(path),
                       ("scheduling policy " + path + ": built against policy ABI 999, this troupe has " +
                        std::to_string(abi_version)).c_str(),
                       std::invalid_argument);
}

TEST_CASE("a missing library or one without the entry point is refused with its path") {
  CHECK_THROWS_AS(make_scheduling_policy("/nonexistent/libnope.so"), std::invalid_argument);
  try {
    (void)make_eviction_policy(env("EXAMPLE_POLICY")); // a scheduling policy only
    FAIL("loaded an eviction policy from a library that has none");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("exports no troupe_policy_abi_version or troupe_make_eviction_policy") !=
          std::string::npos);
  }
}

TEST_CASE("an out-of-tree routing policy loads by path, declares that it reads cached blocks and routes") {
  auto p = make_routing_policy(env("EXAMPLE_ROUTING_POLICY"));
  CHECK(p->name() == "most_cached");
  CHECK(p->reads_cached_blocks());
  CHECK_FALSE(make_routing_policy("round_robin")->reads_cached_blocks());
  CHECK(make_routing_policy("prefix_affinity")->reads_cached_blocks());
  std::vector<replica_view> r(3);
  r[0].cached_blocks = 4;
  r[0].ready = false; // caches the most, but out of rotation
  r[1].cached_blocks = 2;
  r[1].running = 3;
  r[2].cached_blocks = 2;
  r[2].running = 1;
  CHECK(p->route({0.0, {}, r}) == 2); // the most cached among the ready, then the fewest requests
  r[1].cached_blocks = r[2].cached_blocks = 0;
  CHECK(p->route({0.0, {}, r}) == 1); // nothing cached: the ready ones in turn
  CHECK(p->route({0.0, {}, r}) == 2);
  CHECK(p->route({0.0, {}, r}) == 1);
  r[1].ready = r[2].ready = false;
  CHECK(p->route({0.0, {}, r}) == no_replica);
}
