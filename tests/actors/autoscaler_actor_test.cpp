// The server's autoscaler actor and the simulator's autoscaled fleet drive
// one lifecycle (engine/core/fleet_lifecycle): given the same loads at the
// same instants they take the same decisions. The actor is the real one,
// with its real cold starts; a scripted router stands in for the replicas'
// load reports, and its clock is the script's.

#include "actors/autoscaler_actor.hpp"
#include "actors/type_ids.hpp"
#include "actors/wire.hpp"
#include "sim/autoscaled_fleet.hpp"

#include <caf/all.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace troupe;

namespace {

constexpr std::size_t k_slots = 4;
constexpr double k_interval = 1.0;

/// (running, waiting) per slot at one decision; the rest of a replica's
/// report is derived (queue age 0.5 s where it has waiting requests).
using tick_loads = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Bursts, quiet spells between them, a draining replica taken back.
const std::vector<tick_loads> k_script = {
    {{2, 6}, {0, 0}, {0, 0}, {0, 0}}, // 1: 8 requests for a target of 2: out to 4 (pool, then cold starts)
    {{2, 0}, {2, 0}, {2, 0}, {2, 0}}, // 2: on target
    {{1, 0}, {0, 0}, {1, 0}, {0, 0}}, // 3: under: the wait starts
    {{1, 0}, {0, 0}, {1, 0}, {0, 0}}, // 4
    {{1, 0}, {0, 0}, {1, 0}, {0, 0}}, // 5: a drain (the least loaded, the highest index among equals)
    {{1, 0}, {0, 0}, {1, 0}, {0, 0}}, // 6: it is idle: parked (the pool is short)
    {{1, 0}, {0, 0}, {1, 0}, {0, 0}}, // 7: another drain
    {{1, 0}, {0, 0}, {1, 0}, {0, 0}}, // 8: idle, the pool full: stopped
    {{4, 4}, {0, 0}, {2, 0}, {0, 0}}, // 9: a burst: the warm replica, then a cold start
    {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, // 10: quiet
    {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, // 11
    {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, // 12: a drain
    {{4, 6}, {0, 0}, {0, 0}, {3, 0}}, // 13: a burst while it drains (busy): it serves again
    {{2, 0}, {2, 0}, {2, 0}, {2, 0}}, // 14
};

auto options() -> fleet_options {
  fleet_options o;
  o.min_replicas = 1;
  o.max_replicas = 4;
  o.scale_in_delay_s = 2;
  o.warm_pool = 1;
  o.initial = 1;
  o.slots = k_slots;
  return o;
}

/// What a decision left: "desired|reason|state,state,...", the states of
/// the slots used so far.
auto line(std::int32_t desired, const std::string& reason, const std::vector<std::string>& states) -> std::string {
  std::string out = std::to_string(desired) + "|" + reason + "|";
  for (std::size_t i = 0; i < states.size(); ++i) out += (i ? "," : "") + states[i];
  return out;
}

auto trimmed(std::vector<std::string> states) -> std::vector<std::string> {
  while (!states.empty() && states.back() == "off") states.pop_back();
  return states;
}

// The simulator's side: its autoscaled fleet, probed with the script.
auto through_the_simulator() -> std::vector<std::string> {
  sim::autoscaler_spec as;
  const auto o = options();
  as.policy = "queue_depth";
  as.target = 2;
  as.min_replicas = o.min_replicas;
  as.max_replicas = o.max_replicas;
  as.interval_s = k_interval;
  as.cold_start_s = k_interval / 2; // loaded before the next decision, as the actor's below
  as.scale_in_delay_s = o.scale_in_delay_s;
  as.warm_pool = o.warm_pool;
  sim::run_result out;
  sim::autoscaled_fleet fleet(as, k_slots, out);
  std::vector<std::string> lines;
  std::vector<std::size_t> stopped;
  for (std::size_t k = 0; k < k_script.size(); ++k) {
    while (fleet.next_ready().first < fleet.next_tick()) {
      const auto [t, i] = fleet.next_ready();
      fleet.ready(i, t);
    }
    const double now = fleet.next_tick();
    REQUIRE(now == static_cast<double>(k + 1) * k_interval);
    const auto& script = k_script[k];
    const auto d = fleet.tick(
        [&](std::size_t i) {
          sim::autoscaled_fleet::replica_load l;
          l.running = script[i].first;
          l.waiting = script[i].second;
          l.oldest_arrival = l.waiting > 0 ? now - 0.5 : INFINITY;
          return l;
        },
        stopped);
    std::vector<std::string> states;
    for (std::size_t i = 0; i < k_slots; ++i) states.emplace_back(replica_state_name(fleet.state(i)));
    lines.push_back(line(d.desired, std::string(d.reason), trimmed(states)));
  }
  return lines;
}

// The server's side: the autoscaler actor, asking a scripted router.
struct script_state {
  std::mutex mutex;
  std::size_t tick = 0;                 ///< the script's row the router answers with
  std::map<std::int32_t, bool> draining; ///< as the autoscaler told the router
  std::atomic<double> now{0.0};
  /// Cold starts finish only while open: the test reads each decision's
  /// states before its replicas load.
  std::condition_variable gate;
  bool open = false;
};

auto scripted_router(router_actor::pointer self, std::shared_ptr<script_state> s) -> router_actor::behavior_type {
  (void)self;
  return {
      [](dispatch_atom, const request&, const policy::route_request&, const std::vector<std::int32_t>&, bool,
         const sink_actor&, steady_time, const delivery_count&) -> placement {
        return placement{admission{0, {}, true}, -1, {}, false};
      },
      [](device_atom, std::int32_t, const memory_manager_actor&) {},
      [](load_atom, std::int32_t, const replica_report&) {},
      [s](join_atom, std::int32_t replica, const scheduler_actor&, bool drained, bool) {
        std::lock_guard lock(s->mutex);
        s->draining[replica] = drained;
      },
      [](join_atom) { return std::int32_t{-1}; },
      [s](drain_atom, std::int32_t replica, bool draining) {
        std::lock_guard lock(s->mutex);
        s->draining[replica] = draining;
      },
      [](status_atom) { return std::string("[]"); },
      [s](fleet_atom) {
        std::lock_guard lock(s->mutex);
        const auto& script = k_script.at(s->tick);
        fleet_snapshot out(k_slots);
        for (std::size_t i = 0; i < k_slots; ++i) {
          auto& r = out[i];
          r.alive = r.ready = r.healthy = true;
          r.draining = s->draining[static_cast<std::int32_t>(i)];
          r.running = script[i].first;
          r.waiting = script[i].second;
          r.queue_age_s = r.waiting > 0 ? 0.5 : 0.0;
        }
        return out;
      },
      [](fault_atom, std::int32_t, const std::string&) {},
      [](tick_atom) {},
      [](checked_atom, std::int32_t, std::uint64_t, bool) {},
      [](timeout_atom, std::int32_t, std::uint64_t) {},
  };
}

/// The value of "key": in the autoscaler's status JSON, up to the next , or }.
auto field(const std::string& json, const std::string& key) -> std::string {
  const auto at = json.find("\"" + key + "\":");
  REQUIRE(at != std::string::npos);
  auto from = at + key.size() + 3;
  if (json[from] == '"') return json.substr(from + 1, json.find('"', from + 1) - from - 1);
  if (json[from] == '[') return json.substr(from + 1, json.find(']', from) - from - 1);
  return json.substr(from, json.find_first_of(",}", from) - from);
}

auto states_of(const std::string& json) -> std::vector<std::string> {
  std::vector<std::string> out;
  const auto list = field(json, "replicas");
  for (std::size_t at = list.find('"'); at != std::string::npos; at = list.find('"', list.find('"', at + 1) + 1))
    out.push_back(list.substr(at + 1, list.find('"', at + 1) - at - 1));
  return out;
}

auto through_the_actor() -> std::vector<std::string> {
  caf::actor_system_config cfg;
  add_wire_types(cfg);
  caf::actor_system sys{cfg};
  auto script = std::make_shared<script_state>();
  auto router = sys.spawn(scripted_router, script);
  autoscaler_options ao;
  ao.policy = "queue_depth";
  ao.target = 2;
  ao.fleet = options();
  ao.interval_s = 0; // no ticks of its own: the test sends each
  ao.router = router;
  ao.clock = [script] { return script->now.load(); };
  // A cold start that loads once the gate opens: a replica of one
  // placeholder actor.
  ao.start = [&sys, script](std::int32_t) {
    {
      std::unique_lock lock(script->mutex);
      script->gate.wait(lock, [&] { return script->open; });
    }
    started_replica r;
    r.scheduler = sys.spawn([] { return caf::behavior{[](std::int32_t) {}}; });
    r.actors = {r.scheduler};
    return r;
  };
  auto scaler = spawn_autoscaler(sys, ao);
  caf::scoped_actor me{sys};
  const auto status = [&] {
    std::string json;
    me->request(scaler, std::chrono::seconds(10), status_atom_v)
        .receive([&](const std::string& s) { json = s; }, [&](caf::error& e) { FAIL(caf::to_string(e)); });
    return json;
  };
  // Waits (bounded) for a state of the actor's: its decisions and cold
  // starts run on messages of their own.
  const auto wait_until = [&](auto done, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (auto json = status(); !done(json); json = status()) {
      if (std::chrono::steady_clock::now() > deadline) FAIL(what << "; last status " << json);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  const auto loaded = [&](const std::string& json) {
    const auto s = states_of(json);
    return std::find(s.begin(), s.end(), "starting") == s.end();
  };
  const auto open_gate = [&](bool open) {
    {
      std::lock_guard lock(script->mutex);
      script->open = open;
    }
    script->gate.notify_all();
  };
  std::vector<std::string> lines;
  for (std::size_t k = 0; k < k_script.size(); ++k) {
    open_gate(true);
    wait_until(loaded, "cold starts load before the next decision");
    {
      std::lock_guard lock(script->mutex);
      script->tick = k;
      script->open = false;
    }
    script->now = static_cast<double>(k + 1) * k_interval;
    caf::anon_send(scaler, tick_atom_v);
    wait_until([&](const std::string& json) { return field(json, "decisions") == std::to_string(k + 1); },
               "the decision is taken");
    const auto json = status();
    lines.push_back(line(std::stoi(field(json, "desired")), field(json, "reason"), trimmed(states_of(json))));
  }
  open_gate(true);
  caf::anon_send_exit(scaler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
  return lines;
}

} // namespace

TEST_CASE("the autoscaler actor and the simulator take the same decisions on the same loads") {
  const auto sim = through_the_simulator();
  const auto actor = through_the_actor();
  REQUIRE(sim.size() == k_script.size());
  REQUIRE(actor.size() == k_script.size());
  for (std::size_t k = 0; k < k_script.size(); ++k) {
    INFO("decision " << k + 1);
    CHECK(actor[k] == sim[k]);
  }
  // And the script reaches every rule (the simulator's side, spelled out).
  CHECK(sim[0] == "4|requests per replica over target|serving,serving,starting,starting");
  CHECK(sim[4] == "1|requests per replica under target|serving,serving,serving,draining");
  CHECK(sim[5] == "1|requests per replica under target|serving,serving,serving,warm");
  CHECK(sim[6] == "1|requests per replica under target|serving,draining,serving,warm");
  CHECK(sim[7] == "1|requests per replica under target|serving,off,serving,warm");
  CHECK(sim[8] == "4|requests per replica over target|serving,starting,serving,serving");
  CHECK(sim[11] == "1|requests per replica under target|serving,serving,serving,draining");
  CHECK(sim[12] == "4|requests per replica over target|serving,serving,serving,serving");
}
