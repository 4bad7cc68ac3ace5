#pragma once
#include "actors/http/http_server.hpp"
#include "actors/interfaces.hpp"
#include "actors/serving_context.hpp"
#include "service/request/session.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace troupe {

/// What the gateway knows of a request when it hands it to a sink: its
/// session's request, and a capability route's models.
struct sink_request : session_request {
  /// A capability route (its split is session_request::route): the small
  /// model's context comes first; `served` keeps the route alive.
  const capability_route* capability = nullptr;
  std::shared_ptr<const fleet> served;
};

/// The actor that carries one request from its prompt to its last byte: a
/// shell around its request_session (service/request/session.hpp), which
/// decides; the sink carries out what it says (asks the tokenizer pool, the
/// router and the replica, writes to the client, records the metrics). Quits
/// when the response ends or the client goes away (aborting the request,
/// which frees its KV blocks at the next step).
void spawn_sink(caf::actor_system& sys, std::shared_ptr<serving_context> ctx, server_status* status,
                std::shared_ptr<http::exchange> client, sink_request req);

} // namespace troupe
