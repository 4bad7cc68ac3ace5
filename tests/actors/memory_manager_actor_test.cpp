// A device's memory manager actor, real, with a real replica over it: a
// lease hands out distinct free blocks, at most what it has; a prompt a
// replica has run is probed and matched from its prefix cache afterwards
// (its publishes arrive before the replica's tokens), and the cache's
// queries and hits reach the device's metrics.

#include "actors/wire.hpp"
#include "tests/actors/replica_rig.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <set>

using namespace troupe;
using namespace troupe::testing;

TEST_CASE("a lease hands out distinct free blocks, at most what the device has") {
  caf::actor_system_config cfg;
  add_wire_types(cfg);
  caf::actor_system sys{cfg};
  server_metrics metrics{nullptr, "tiny", "", 1, {"cpu:0"}};
  auto mm = spawn_memory_manager(sys, 32, "lru", &metrics, "cpu:0");
  caf::scoped_actor self{sys};
  std::vector<block_id> a, b;
  self->request(mm, caf::infinite, lease_atom_v, 20).receive([&](std::vector<block_id>& x) { a = x; }, [](caf::error&) {});
  self->request(mm, caf::infinite, lease_atom_v, 20).receive([&](std::vector<block_id>& x) { b = x; }, [](caf::error&) {});
  CHECK(a.size() == 20);
  CHECK(b.size() == 12); // (what was left)
  std::set<block_id> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  CHECK(all.size() == 32);
  caf::anon_send_exit(mm, caf::exit_reason::user_shutdown);
}

TEST_CASE("a prompt a replica ran is found in the device's prefix cache: probed, then matched") {
  caf::actor_system_config cfg;
  add_wire_types(cfg);
  caf::actor_system sys{cfg};
  server_metrics metrics{nullptr, "tiny", "", 1, {"cpu:0"}};
  server_status status;
  auto replica = start_test_replica(sys, metrics, status, 0, router_actor{});
  std::vector<token_id> prompt(70);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<token_id>(10 + i);
  caf::scoped_actor self{sys};
  std::int32_t before = -1;
  self->request(replica.memory, caf::infinite, probe_atom_v, std::uint64_t{7}, prompt, k_block_size)
      .receive([&](std::int32_t n) { before = n; }, [](caf::error&) {});
  CHECK(before == 0);
  auto log = std::make_shared<sink_log>();
  auto undelivered = std::make_shared<std::atomic<std::int32_t>>(0);
  auto sink = sys.spawn(collecting_sink, log, undelivered);
  admission a{-1, ""};
  self->request(replica.scheduler, caf::infinite, submit_atom_v, test_request(1, prompt, 2), sink,
                std::chrono::steady_clock::now(), undelivered)
      .receive([&](admission& x) { a = x; }, [](caf::error&) {});
  REQUIRE(a.status == 0);
  REQUIRE(log->wait_finished() == finish_reason::length);
  std::int32_t after = -1;
  self->request(replica.memory, caf::infinite, probe_atom_v, std::uint64_t{7}, prompt, k_block_size)
      .receive([&](std::int32_t n) { after = n; }, [](caf::error&) {});
  CHECK(after == 4); // (70 tokens: 4 full blocks of 16)
  std::int32_t other = -1; // another tenant's namespace holds none of it
  self->request(replica.memory, caf::infinite, probe_atom_v, std::uint64_t{8}, prompt, k_block_size)
      .receive([&](std::int32_t n) { other = n; }, [](caf::error&) {});
  CHECK(other == 0);
  std::vector<block_id> matched;
  self->request(replica.memory, caf::infinite, match_atom_v, std::uint64_t{7}, prompt, k_block_size, std::int32_t{0})
      .receive([&](std::vector<block_id>& m) { matched = m; }, [](caf::error&) {});
  CHECK(matched.size() == 4);
  const auto text = metrics.serialize();
  CHECK(text.find("troupe_prefix_cache_hits_total") != std::string::npos);
  caf::anon_send_exit(sink, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(replica.scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(replica.memory, caf::exit_reason::user_shutdown);
}
