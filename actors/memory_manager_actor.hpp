#pragma once
#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"

#include <caf/actor_system.hpp>

#include <string>

namespace troupe {

/// The KV memory of one device, blocks [0, num_blocks), its prefix cache
/// evicting by the named policy (checked by the caller). Prefix-cache
/// queries and hits go to `metrics` under the device's name.
auto spawn_memory_manager(caf::actor_system& sys, std::int32_t num_blocks, const std::string& eviction,
                          server_metrics* metrics, const std::string& device) -> memory_manager_actor;

} // namespace troupe
