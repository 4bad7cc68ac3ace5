#pragma once
#include "actors/interfaces.hpp"

#include <caf/actor_system.hpp>

namespace troupe {

/// The KV block pool of one device, blocks [0, num_blocks). Minimal: leases
/// and returns; the prefix cache and eviction arrive with issue 4.
auto spawn_memory_manager(caf::actor_system& sys, std::int32_t num_blocks) -> memory_manager_actor;

} // namespace troupe
