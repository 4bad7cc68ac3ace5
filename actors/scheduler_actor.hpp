#pragma once
#include "actors/interfaces.hpp"
#include "actors/serving_context.hpp"
#include "engine/core/batch_scheduler.hpp"
#include "engine/core/step_log.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace troupe {

struct replica_options {
  int replica = 0;                        ///< its index (the metrics' replica label)
  scheduler_limits limits;                ///< queue bounds included (429 beyond them)
  kv_cache_options kv;
  std::string scheduling = "fcfs";        ///< a policy name (policies/registry.hpp), checked at start-up
  std::int64_t share = 0;                 ///< the device blocks this replica may lease, at most (> 0)
  std::vector<token_id> eos_ids;
  /// null: none; else where every event and step goes, for `troupe sim`
  /// (opened by the caller, so a bad path stops start-up with its reason).
  std::shared_ptr<step_log::writer> step_log;
  /// Where its load goes after each step (an invalid handle: nowhere).
  router_actor router;
};

/// One replica's scheduler: the batch_scheduler core and its policy over
/// blocks leased from the device's memory manager (`lease` to start with,
/// refilled in batches ahead of need), stepping `executor` for as long as
/// it has work and sending each step's tokens to the requests' sinks.
/// Prompts are matched against the device's prefix cache once, at submission.
auto spawn_scheduler(caf::actor_system& sys, const replica_options& options, std::vector<block_id> lease,
                     executor_actor executor, memory_manager_actor memory, server_metrics* metrics,
                     server_status* status) -> scheduler_actor;

} // namespace troupe
