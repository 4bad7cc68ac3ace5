#pragma once
#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"

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
  std::int32_t min_replicas = 1, max_replicas = 1;
  double interval_s = 5;   ///< a decision this often
  double scale_in_delay_s = 60; ///< after any change, this long before a scale-in
  std::int32_t warm_pool = 0;   ///< loaded idle replicas kept out of rotation, for bursts
  std::int32_t initial = 1;     ///< replicas 0..initial-1 serve from the start (never stopped: parked warm)
  std::int32_t capacity = 1;    ///< its replicas' indices are below this (the router's slots for it)
  replica_factory start;
  server_metrics* metrics = nullptr; ///< its series: desired replicas, reason, replicas by state
  router_actor router;
};

/// The autoscaler of one model: every interval it gathers the fleet's load
/// (the router's snapshot: queue depth and age, active sequences, KV use;
/// the metrics' windows: TTFT and TPOT p95, tokens/s), asks the policy for
/// a replica count and acts: scale-out at once, from the warm pool first
/// (into rotation at once), then by cold starts that join the router once
/// loaded; scale-in one replica per delay, draining it (no new requests, the
/// ones it has finish) before it is parked in the pool or stopped.
auto spawn_autoscaler(caf::actor_system& sys, autoscaler_options options) -> autoscaler_actor;

} // namespace troupe
