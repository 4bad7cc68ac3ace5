#pragma once
#include "actors/interfaces.hpp"

#include <caf/actor_system.hpp>

#include <string>
#include <vector>

namespace troupe {

/// The router of one model's replicas: `policy` names a routing policy
/// (policies/registry.hpp, checked at start-up); `weights` are the
/// replicas' capacities (empty: equal). Replicas report their load to it.
auto spawn_router(caf::actor_system& sys, const std::string& policy, std::size_t replicas,
                  std::vector<double> weights = {}) -> router_actor;

} // namespace troupe
