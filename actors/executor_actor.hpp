#pragma once
#include "actors/interfaces.hpp"
#include "engine/executor.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace troupe {

/// A detached actor (its own thread: a step blocks for its whole compute)
/// owning `ex`.
auto spawn_executor(caf::actor_system& sys, std::shared_ptr<executor> ex) -> executor_actor;

} // namespace troupe
