// The fleet's lifecycle rules, one by one (engine/core/fleet_lifecycle.hpp).

#include "engine/core/fleet_lifecycle.hpp"
#include "policies/registry.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace troupe;
using kind = fleet_action::kind;

namespace {

/// A policy that asks for what the test says.
class asked final : public policy::autoscaling_policy {
public:
  explicit asked(const std::int32_t& n) : n_(n) {}
  auto name() const -> std::string_view override { return "asked"; }
  auto decide(const policy::fleet_view&) -> policy::scale_decision override { return {n_, "asked"}; }

private:
  const std::int32_t& n_;
};

auto states(const fleet_lifecycle& f, std::size_t n) -> std::string {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? "," : "") + std::string(replica_state_name(f.state(i)));
  return out;
}

auto idle(std::size_t n) -> std::vector<replica_load> {
  std::vector<replica_load> l(n);
  for (auto& r : l) r.idle = true;
  return l;
}

} // namespace

TEST_CASE("scale-out takes draining replicas, then the warm pool, then a pool-bound start, then cold starts") {
  std::int32_t want = 1;
  fleet_options o;
  o.max_replicas = 6;
  o.warm_pool = 1;
  o.slots = 6;
  o.scale_in_delay_s = 0;
  fleet_lifecycle f(std::make_unique<asked>(want), o);
  CHECK(f.start() == std::vector<fleet_action>{{kind::start, 1, true}});
  CHECK(f.loaded(1) == replica_state::warm);
  want = 3;
  auto d = f.decide(1, idle(6), {});
  // The pool's replica serves, one cold start, and the pool refills.
  CHECK(d.actions == std::vector<fleet_action>{{kind::serve, 1}, {kind::start, 2, false}, {kind::start, 3, true}});
  f.loaded(2);
  want = 2;
  std::vector<replica_load> busy(6);
  busy[0].running = 3;
  busy[1].running = 2;
  busy[2].running = 1;
  d = f.decide(2, busy, {});
  CHECK(d.actions == std::vector<fleet_action>{{kind::drain, 2}}); // the least loaded
  // Slot 3 is still starting for the pool: a scale-out takes the draining
  // replica back, then re-targets slot 3 to the rotation, then starts more.
  want = 5;
  d = f.decide(3, busy, {});
  CHECK(d.actions == std::vector<fleet_action>{{kind::serve, 2}, {kind::start, 4, false}, {kind::start, 5, true}});
  CHECK(f.loaded(3) == replica_state::serving);
  CHECK(states(f, 6) == "serving,serving,serving,serving,starting,starting");
  // No slot left: the decision says so.
  want = 6;
  d = f.decide(4, busy, {});
  CHECK(d.out_of_slots);
  CHECK(d.desired == 6);
  CHECK(f.scale_outs() == 3);
}

TEST_CASE("scale-in waits for desired to stay below the fleet for the delay, one replica per delay, never below "
          "min_replicas; a drained replica retires at a later decision") {
  std::int32_t want = 3;
  fleet_options o;
  o.min_replicas = 2;
  o.max_replicas = 4;
  o.initial = 4;
  o.slots = 4;
  o.scale_in_delay_s = 10;
  fleet_lifecycle f(std::make_unique<asked>(want), o);
  auto d = f.decide(0, idle(4), {});
  CHECK(d.actions.empty()); // below since 0
  d = f.decide(5, idle(4), {});
  CHECK(d.actions.empty());
  want = 4; // back on target: the wait restarts
  CHECK(f.decide(8, idle(4), {}).actions.empty());
  want = 1; // clamped to min_replicas
  d = f.decide(9, idle(4), {});
  CHECK(d.desired == 2);
  CHECK(d.actions.empty());
  d = f.decide(19, idle(4), {});
  CHECK(d.actions == std::vector<fleet_action>{{kind::drain, 3}}); // all idle: the highest index
  d = f.decide(20, idle(4), {});
  // An initial replica is never stopped: parked; the next drain waits a delay.
  CHECK(d.actions == std::vector<fleet_action>{{kind::park, 3}});
  CHECK(f.decide(28, idle(4), {}).actions.empty());
  CHECK(f.decide(29, idle(4), {}).actions == std::vector<fleet_action>{{kind::drain, 2}});
  CHECK(f.decide(40, idle(4), {}).actions == std::vector<fleet_action>{{kind::park, 2}});
  // Two serving: min_replicas.
  CHECK(f.decide(60, idle(4), {}).actions.empty());
  CHECK(states(f, 4) == "serving,serving,warm,warm");
  CHECK(f.scale_ins() == 2);
}

TEST_CASE("scale-in drains the fleet's own replicas before the initial ones, however busy") {
  std::int32_t want = 3;
  fleet_options o;
  o.max_replicas = 3;
  o.initial = 1;
  o.slots = 3;
  o.scale_in_delay_s = 0;
  fleet_lifecycle f(std::make_unique<asked>(want), o);
  auto d = f.decide(0, idle(3), {});
  CHECK(d.actions == std::vector<fleet_action>{{kind::start, 1, false}, {kind::start, 2, false}});
  f.loaded(1);
  f.loaded(2);
  want = 1;
  std::vector<replica_load> busy(3);
  busy[1].running = 4; // the initial replica 0 is the least busy
  busy[2].running = 5;
  CHECK(f.decide(1, busy, {}).actions == std::vector<fleet_action>{{kind::drain, 1}});
  busy[1] = {};
  busy[1].idle = true;
  CHECK(f.decide(2, busy, {}).actions == std::vector<fleet_action>{{kind::drain, 2}, {kind::stop, 1}});
  CHECK(states(f, 3) == "serving,off,draining");
}

TEST_CASE("a drained replica the fleet started stops once the pool is full; a lost one frees its slot") {
  std::int32_t want = 3;
  fleet_options o;
  o.max_replicas = 3;
  o.slots = 3;
  o.scale_in_delay_s = 0;
  fleet_lifecycle f(std::make_unique<asked>(want), o);
  auto d = f.decide(0, idle(3), {});
  CHECK(d.actions == std::vector<fleet_action>{{kind::start, 1, false}, {kind::start, 2, false}});
  f.loaded(1);
  f.lost(2); // failed to start
  CHECK(f.state(2) == replica_state::off);
  want = 1;
  CHECK(f.decide(1, idle(3), {}).actions == std::vector<fleet_action>{{kind::drain, 1}});
  std::vector<replica_load> busy = idle(3);
  busy[1].idle = false; // still finishing its requests
  CHECK(f.decide(2, busy, {}).actions.empty());
  CHECK(f.decide(3, idle(3), {}).actions == std::vector<fleet_action>{{kind::stop, 1}});
  CHECK(states(f, 3) == "serving,off,off");
  CHECK(f.slots_used() == 3);
}

TEST_CASE("a replica the fleet starts in a lost initial replica's slot stops like any it started") {
  std::int32_t want = 2;
  fleet_options o;
  o.max_replicas = 2;
  o.initial = 2;
  o.slots = 2;
  o.scale_in_delay_s = 0;
  fleet_lifecycle f(std::make_unique<asked>(want), o);
  f.lost(1); // died
  CHECK(f.decide(0, idle(2), {}).actions == std::vector<fleet_action>{{kind::start, 1, false}});
  f.loaded(1);
  want = 1;
  CHECK(f.decide(1, idle(2), {}).actions == std::vector<fleet_action>{{kind::drain, 1}});
  CHECK(f.decide(2, idle(2), {}).actions == std::vector<fleet_action>{{kind::stop, 1}}); // not parked for ever
}

TEST_CASE("the policy sees the fleet: serving and rotation-bound starting replicas, queues of serving and draining "
          "ones, KV use of serving ones, the window") {
  fleet_options o;
  o.max_replicas = 4;
  o.initial = 3;
  o.slots = 4;
  o.scale_in_delay_s = 100;
  fleet_lifecycle f(policy::make_autoscaling_policy("queue_depth", 2), o);
  std::vector<replica_load> l(4);
  l[0] = {2, 1, 1, 0.5, 0.5, false};
  l[1] = {1, 0, 0, 2.0, 0.25, false};
  l[2] = {0, 0, 0, 0, 0, true};
  auto d = f.decide(1, l, {0.2, 0.03, 500});
  CHECK(d.view.serving == 3);
  CHECK(d.view.queue_depth == 2);
  CHECK(d.view.active_seqs == 3);
  CHECK(d.view.queue_age_s == 2.0);
  CHECK(d.view.kv_use == doctest::Approx(0.25));
  CHECK(d.view.ttft_p95_s == 0.2);
  CHECK(d.view.tokens_per_s == 500);
  CHECK(d.desired == 3); // 5 requests for a target of 2
  CHECK(d.reason == "requests per replica on target");
}
