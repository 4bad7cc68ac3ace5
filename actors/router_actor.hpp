#pragma once
#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"
#include "engine/core/router_core.hpp"

#include <caf/actor_system.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

struct router_options {
  std::string policy = "round_robin"; ///< a routing policy (policies/registry.hpp), checked at start-up
  std::vector<double> weights;        ///< the replicas' capacities (empty: equal)
  /// Replica slots kept for the autoscaler (indices below it): remote
  /// workers' replicas get indices from here up.
  std::size_t slots = 0;
  health_options health;
  double check_interval_s = 5.0; ///< a deep check per replica this often
  double check_timeout_s = 30.0; ///< a check not answered within this fails
  /// The deep check's prompt: a one-token inference (max_tokens 1).
  std::vector<token_id> check_prompt;
  server_metrics* metrics = nullptr; ///< the replicas' ready gauges (may be null)
  std::int32_t block_size = 16; ///< the KV cache's, for the dispatches' prefix probes
  /// Kept equal to the replicas in rotation (read by /health/ready).
  std::shared_ptr<std::atomic<std::int32_t>> num_ready;
};

/// The router of one model's replicas. Each request's dispatch comes to it:
/// it probes the devices' prefix caches (where the policy weighs them),
/// picks the replica and hands the submission on to its scheduler, which
/// answers the request's sink. Replicas report their load to it and
/// join it once loaded; it monitors each (one that dies leaves rotation),
/// runs a deep check on each every interval (a real one-token inference,
/// submitted at top priority), takes a replica out after unhealthy_after
/// consecutive failures (evacuating its requests so that they move
/// elsewhere) and brings it back after healthy_after passes.
auto spawn_router(caf::actor_system& sys, router_options options) -> router_actor;

} // namespace troupe
