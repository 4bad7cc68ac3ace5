#pragma once
#include "actors/http/http_server.hpp"
#include "service/http/openai_api.hpp"
#include "service/http/reasoning_seal.hpp"
#include "actors/interfaces.hpp"
#include "actors/serving_context.hpp"
#include "service/tenancy/response_cache.hpp"
#include "service/tenancy/response_store.hpp"
#include "service/tenancy/tenants.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace troupe {

/// What the gateway knows of a request when it hands it to a sink.
struct sink_request {
  api::completion_request body;
  std::string request_id;       ///< the x-request-id echoed on the response
  http::header_list headers;    ///< sent with every response
  steady_time arrival;
  /// The session key's hash (x-session-id, else the OpenAI `user`, else the
  /// conversation's first messages), for session-affine routing.
  bool has_session = false;
  std::uint64_t session = 0;
  /// A capability route: the small model's context comes first; the sink
  /// moves the request to the large one when the encoded prompt (or the
  /// tier) says so. `served` keeps the route alive.
  const capability_route* route = nullptr;
  std::shared_ptr<const fleet> served;
  std::string tier; ///< x-troupe-tier
  std::shared_ptr<const api::reasoning_seal> seal; ///< the server's key for sealed reasoning

  // The tenant (a tenants file configured; else the defaults below).
  std::shared_ptr<tenant_ticket> ticket; ///< its hold on the tenant: released when the sink ends
  std::string tenant = "default";        ///< the metrics' tenant label
  /// The prefix-cache namespace and vtc account (hashes), the vtc weight and
  /// the priority. Without tenants: the namespace is the OpenAI `user`, the
  /// account 0 (the namespace's), and the priority the request's own.
  std::optional<std::uint64_t> cache_namespace;
  std::uint64_t account = 0;
  double weight = 1.0;
  std::optional<std::int32_t> priority;
  std::int32_t max_input_tokens = 0; ///< > 0: a longer prompt gets 400
  /// The response cache, for a cacheable request of a tenant that opted in.
  response_cache* cache = nullptr;
  sha256_digest cache_key{};
  /// A WebSocket request: its id as the client wrote it (JSON text). Its
  /// events are WebSocket messages, one JSON object a line (see gateway.hpp).
  std::string ws_id;
  /// A Responses request with store: true: the store, the tenant's name in
  /// it, and the conversation to keep with the answer (its input, earlier
  /// turns included, without the instructions).
  response_store* responses = nullptr;
  std::string store_tenant;
  std::vector<chat_message> conversation;
};

/// The actor that carries one request from its prompt to its last byte:
/// encodes it (tokenizer pool), submits it (a replica's scheduler), then
/// turns each step's tokens into text and writes it to the client (SSE when
/// streaming). Quits when the response ends or the client goes away
/// (aborting the request, which frees its KV blocks at the next step).
void spawn_sink(caf::actor_system& sys, std::shared_ptr<serving_context> ctx, server_status* status,
                std::shared_ptr<http::exchange> client, sink_request req);

} // namespace troupe
