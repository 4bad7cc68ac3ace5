// The router's bookkeeping: load reports, what is in flight, readiness.

#include "engine/core/router_core.hpp"
#include "policies/registry.hpp"

#include <doctest/doctest.h>

using namespace troupe;

TEST_CASE("what was routed counts as in flight until a report covers it") {
  router_core r(policy::make_routing_policy("least_requests"), 3);
  policy::route_request q;
  q.prompt_tokens = 100;
  CHECK(r.route(q, 0) == 0);
  CHECK(r.view(0).in_flight == 1);
  CHECK(r.view(0).in_flight_tokens == 100);
  CHECK(r.route(q, 0) == 1); // replica 0 has one in flight now
  CHECK(r.route(q, 0) == 2);
  CHECK(r.route(q, 0) == 0);
  CHECK(r.view(0).in_flight == 2);
  // Replica 0 reports: it received one of the two, which runs.
  replica_report rep;
  rep.running = 1;
  rep.submitted = 1;
  rep.submitted_tokens = 100;
  r.report(0, rep);
  CHECK(r.view(0).in_flight == 1);
  CHECK(r.view(0).in_flight_tokens == 100);
  CHECK(r.view(0).requests() == 2);
  // A report that counts more than was routed (another router's) never goes negative.
  rep.submitted = 9;
  rep.submitted_tokens = 900;
  r.report(0, rep);
  CHECK(r.view(0).in_flight == 0);
  CHECK(r.view(0).in_flight_tokens == 0);
}

TEST_CASE("replicas out of rotation get nothing; with none ready the router declines") {
  router_core r(policy::make_routing_policy("round_robin"), 2, {2.0, 1.0});
  CHECK(r.view(0).weight == 2.0);
  CHECK(r.num_ready() == 2);
  r.set_draining(0, true);
  CHECK(r.num_ready() == 1);
  policy::route_request q;
  for (int i = 0; i < 4; ++i) CHECK(r.route(q, 0) == 1);
  r.set_dead(1);
  CHECK(r.route(q, 0) == policy::no_replica);
  r.set_draining(0, false);
  CHECK(r.route(q, 0) == 0);
  // A replica to avoid (where the request just failed) is skipped this once.
  r.join(1);
  const std::int32_t avoid[] = {0};
  CHECK(r.route(q, 0, {}, avoid) == 1);
  CHECK(r.route(q, 0, {}, avoid) == 1);
  CHECK(r.view(0).ready);
  const std::int32_t both[] = {0, 1};
  CHECK(r.route(q, 0, {}, both) == policy::no_replica);
}

TEST_CASE("health: out after N consecutive failed checks, back after M passes") {
  router_core r(policy::make_routing_policy("round_robin"), 2, {}, {3, 2});
  CHECK(r.record_check(0, false) == health_change::none);
  CHECK(r.record_check(0, false) == health_change::none);
  CHECK(r.record_check(0, true) == health_change::none); // a pass resets the run
  CHECK(r.record_check(0, false) == health_change::none);
  CHECK(r.record_check(0, false) == health_change::none);
  CHECK(r.view(0).ready);
  CHECK(r.record_check(0, false) == health_change::out);
  CHECK_FALSE(r.view(0).ready);
  CHECK(r.health(0).failed_checks == 5);
  policy::route_request q;
  for (int i = 0; i < 3; ++i) CHECK(r.route(q, 0) == 1);
  CHECK(r.record_check(0, false) == health_change::none);
  CHECK(r.record_check(0, true) == health_change::none);
  CHECK(r.record_check(0, true) == health_change::back);
  CHECK(r.view(0).ready);
  // A dead replica stays out whatever its checks say, until it joins again.
  r.set_dead(1);
  CHECK(r.record_check(1, true) == health_change::none);
  CHECK_FALSE(r.view(1).ready);
  r.join(1);
  CHECK(r.view(1).ready);
}

TEST_CASE("a slot joined again starts afresh: nothing in flight from its last life") {
  router_core r(policy::make_routing_policy("least_requests"), 2);
  policy::route_request q;
  q.prompt_tokens = 10;
  for (int i = 0; i < 4; ++i) (void)r.route(q, 0);
  CHECK(r.view(0).in_flight == 2);
  r.set_dead(0);
  r.join(0); // a new replica in the old slot: its reports count from 0
  CHECK(r.view(0).in_flight == 0);
  CHECK(r.view(0).in_flight_tokens == 0);
  replica_report rep;
  rep.submitted = 1;
  rep.submitted_tokens = 10;
  CHECK(r.route(q, 1) == 0);
  r.report(0, rep);
  CHECK(r.view(0).in_flight == 0);
}

TEST_CASE("replicas added later are out of rotation until they join") {
  router_core r(policy::make_routing_policy("least_requests"), 1);
  const auto i = r.add_replica(2.0);
  CHECK(i == 1);
  CHECK_FALSE(r.view(1).ready);
  CHECK(r.num_ready() == 1);
  r.join(1);
  CHECK(r.view(1).weight == 2.0);
  CHECK(r.num_ready() == 2);
  r.join(3); // a join past the end grows the replicas
  CHECK(r.num_replicas() == 4);
  CHECK_FALSE(r.view(2).ready);
  CHECK(r.view(3).ready);
}

TEST_CASE("a replica that joins drained (the warm pool) is never routed to until it resumes") {
  router_core r(policy::make_routing_policy("least_requests"), 1);
  r.add_replica();
  r.join(1, true);
  CHECK(r.health(1).joined);
  CHECK(r.health(1).draining);
  CHECK_FALSE(r.view(1).ready);
  policy::route_request q;
  for (int i = 0; i < 8; ++i) CHECK(r.route(q, 0) == 0);
  r.set_draining(1, false);
  CHECK(r.view(1).ready);
  CHECK(r.route(q, 0) == 1); // least requests: 8 in flight on replica 0
}

TEST_CASE("a route no report covers within the TTL is taken as abandoned") {
  router_core r(policy::make_routing_policy("least_requests"), 2);
  policy::route_request q;
  q.prompt_tokens = 50;
  CHECK(r.route(q, 0.0) == 0); // its client then leaves before the submission: never reported
  CHECK(r.view(0).in_flight == 1);
  CHECK(r.route(q, 1.0) == 1);
  // Past the TTL the first no longer counts; the second (routed later) is still in flight.
  CHECK(r.route(q, 10.5) == 0);
  CHECK(r.view(0).in_flight == 1);
  CHECK(r.view(0).in_flight_tokens == 50);
  CHECK(r.view(1).in_flight == 1);
  CHECK(r.route(q, 11.5) == 1); // replica 1's route expired: none in flight there, one at replica 0
  CHECK(r.view(1).in_flight == 1);
  CHECK(r.view(1).in_flight_tokens == 50);
}
