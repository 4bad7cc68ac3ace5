#pragma once
// Replicas on other machines (troupe worker --join HOST:PORT) through CAF's
// own network layer. The router node publishes a door; a worker asks it for
// a replica index and the model's router, starts its replica, and attaches
// an endpoint actor for it. On the router node a local proxy stands for the
// remote replica (it is a scheduler_actor, so the router and the sinks treat
// it as a local one); proxy and endpoint carry submissions, aborts and
// tokens between them, and the worker's scheduler sends its load reports
// to the router directly. When the worker dies or its connection drops, the
// proxy goes down with it: the router takes the replica out, the sinks
// retry or end their requests.

#include "actors/interfaces.hpp"
#include "service/server_config.hpp"
#include "actors/serving_context.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <memory>
#include <string>

namespace troupe {

// (Its actors' interfaces, endpoint_actor, door_actor and proxy_actor, are
// in actors/interfaces.hpp with every other.)

/// The fleet's secret from config.router.worker_secret_file (trailing
/// whitespace dropped). Throws config_error, one line naming the key: no
/// file given, unreadable, or under 16 bytes. The secret is never logged.
auto read_worker_secret(const server_config& config) -> std::string;

/// A worker's proof for a challenge: HMAC-SHA256 of it under the secret, hex.
auto worker_proof(std::string_view secret, std::string_view challenge) -> std::string;

/// Registers the types and interfaces that cross the network (both ends).
void add_wire_types(caf::actor_system_config& cfg);

/// The door to the fleet's models (kept alive by the caller's handle);
/// workers must prove they know `secret`.
auto spawn_door(caf::actor_system& sys, std::shared_ptr<const fleet> models, std::string secret) -> door_actor;

/// A worker's endpoint for its local scheduler.
auto spawn_endpoint(caf::actor_system& sys, scheduler_actor scheduler) -> endpoint_actor;

} // namespace troupe
