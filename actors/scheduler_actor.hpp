#pragma once
#include "actors/interfaces.hpp"
#include "actors/serving_context.hpp"
#include "engine/core/batch_scheduler.hpp"

#include <caf/actor_system.hpp>

namespace troupe {

struct replica_options {
  int replica = 0;                        ///< its index (the metrics' replica label)
  scheduler_limits limits;                ///< queue bounds included (429 beyond them)
  kv_cache_options kv;
  std::string scheduling = "fcfs";        ///< policy names (policies/registry.hpp), checked at start-up
  std::string eviction = "lru";
  std::vector<token_id> eos_ids;
};

/// One replica's scheduler: the batch_scheduler core, its policies and a
/// prefix cache over `lease` (contiguous blocks granted by the device's
/// memory manager), stepping `executor` for as long as it has work and
/// sending each step's tokens to the requests' sinks.
auto spawn_scheduler(caf::actor_system& sys, const replica_options& options, std::vector<block_id> lease,
                     executor_actor executor, server_metrics* metrics, server_status* status) -> scheduler_actor;

} // namespace troupe
