#pragma once
#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"
#include "engine/core/fleet_lifecycle.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include <functional>
#include <string>
#include <vector>

namespace troupe {

/// Loads and spawns replica `index` (a cold start: its weights, executor, KV
/// cache and scheduler). Blocking: the autoscaler runs it on a detached actor.
using replica_factory = std::function<started_replica(std::int32_t index)>;

struct autoscaler_options {
  std::string policy;      ///< an autoscaling policy (policies/registry.hpp)
  double target = 0;       ///< the policy's target (<= 0: its default)
  /// The lifecycle's bounds: min and max replicas, the scale-in delay, the
  /// warm pool, the replicas serving from the start (`initial`, never
  /// stopped: parked warm) and the router's slots for it (`slots`).
  fleet_options fleet;
  double interval_s = 5;   ///< a decision this often
  /// Seconds on its clock; empty: a steady clock from spawn. (The tests set
  /// one, with interval_s 0: no ticks of its own, each sent by the test.)
  std::function<double()> clock;
  replica_factory start;
  server_metrics* metrics = nullptr; ///< its series: desired replicas, reason, replicas by state
  router_actor router;
};

/// The autoscaler of one model: every interval it gathers the fleet's load
/// (the router's snapshot: queue depth and age, active sequences, KV use;
/// the metrics' windows: TTFT and TPOT p95, tokens/s) and hands it to the
/// fleet's lifecycle (engine/core/fleet_lifecycle, the simulator's too),
/// which asks the policy for a replica count and says what to do: replicas
/// back into rotation or out of it (the router), cold starts (joining the
/// router once loaded), drained replicas parked in the warm pool or stopped.
auto spawn_autoscaler(caf::actor_system& sys, autoscaler_options options) -> autoscaler_actor;

} // namespace troupe
