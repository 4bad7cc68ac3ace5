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
#include "actors/server_config.hpp"
#include "actors/serving_context.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <memory>
#include <string>

namespace troupe {

/// On the worker: one replica's side of the wire. Submissions come with
/// their age (clocks differ between machines); tokens go back to whoever
/// submitted. It is its local scheduler's sink for every remote request.
using endpoint_actor = caf::typed_actor<
    caf::replies_to<rsubmit_atom, request, std::int64_t>::with<admission>,
    caf::reacts_to<abort_atom, request_id>,
    caf::reacts_to<evacuate_atom>,
    caf::reacts_to<fault_atom, std::string>,
    caf::reacts_to<tokens_atom, request_update>,
    caf::reacts_to<gone_atom>>;

/// On the router node, published at router.worker_port: where workers join.
/// A worker proves it knows the fleet's secret (router.worker_secret_file)
/// before it gets anything: a stranger who reaches the port learns nothing
/// and reaches no actor but this one.
using door_actor = caf::typed_actor<
    /// A challenge: a fresh nonce (hex), good for one join within a minute.
    caf::replies_to<hello_atom>::with<std::string>,
    /// A worker asks for a replica of this model, with a challenge it was
    /// given and its proof (worker_proof): the replica's index, the router
    /// (its load reports' address) and a ticket for the replica's endpoint;
    /// or an error (wrong proof, unknown model: naming the served ones).
    caf::replies_to<join_atom, std::string, std::string, std::string>::with<std::int32_t, router_actor,
                                                                          std::string>,
    /// The replica (index, model) is loaded: here is its endpoint, with the
    /// ticket its join got (one use).
    caf::reacts_to<join_atom, std::int32_t, std::string, endpoint_actor, std::string>>;

/// The fleet's secret from config.router.worker_secret_file (trailing
/// whitespace dropped). Throws config_error, one line naming the key: no
/// file given, unreadable, or under 16 bytes. The secret is never logged.
auto read_worker_secret(const server_config& config) -> std::string;

/// A worker's proof for a challenge: HMAC-SHA256 of it under the secret, hex.
auto worker_proof(std::string_view secret, std::string_view challenge) -> std::string;

/// The remote replica's stand-in on the router node.
using proxy_actor = scheduler_actor::extend<caf::reacts_to<tokens_atom, request_update>>;

/// Registers the types and interfaces that cross the network (both ends).
void add_wire_types(caf::actor_system_config& cfg);

/// The door to the fleet's models (kept alive by the caller's handle);
/// workers must prove they know `secret`.
auto spawn_door(caf::actor_system& sys, std::shared_ptr<const fleet> models, std::string secret) -> door_actor;

/// A worker's endpoint for its local scheduler.
auto spawn_endpoint(caf::actor_system& sys, scheduler_actor scheduler) -> endpoint_actor;

} // namespace troupe
