#pragma once
// The HTTP routes: OpenAI's /v1 API, the WebSocket stream, the chat page,
// health and metrics (and /admin/..., admin_api.hpp). Runs on the HTTP
// server's threads; each completion request gets a sink actor.
//
// Tenants (server.tenants): every /v1 call names its tenant by its API key
// (Authorization: Bearer KEY, or x-api-key). The gateway checks the key, the
// model, the token limits and the rate limits before any model work: 401,
// 403, 400, 429 with Retry-After and OpenAI's x-ratelimit-* headers.
//
// GET /v1/chat/stream upgrades to a WebSocket of JSON messages, one request
// or event each. The client sends
//   {"type":"auth","api_key":K}                    (when the upgrade had no key)
//   {"id":ID, "model":..., "messages":[...], ...}  (a chat request: chat-completions fields)
//   {"type":"cancel","id":ID}   {"type":"ping"}
// and gets, per request ID (many run at once on one socket):
//   {"type":"start","id":ID,"model":M}  {"type":"token","id":ID,"n":N,"text":T} ...
//   {"type":"done","id":ID,"finish_reason":R,"usage":{...}}
//   or {"type":"error","id":ID,"error":{"message","type","param","code"}} (ends it)
//   {"type":"cancelled","id":ID}  {"type":"pong"}  {"type":"auth","tenant":NAME}
// N counts the request's tokens so far. A request whose events are not read
// (the socket holds server.websocket_max_buffered unsent bytes) is cancelled
// with an error event, code "slow_reader": the engine never waits for a reader.

#include "actors/http/http_server.hpp"
#include "service/request/wire_encoder.hpp"
#include "service/http/responses/responses_protocol.hpp"
#include "service/http/reasoning_seal.hpp"
#include "actors/serving_context.hpp"
#include "service/tenancy/response_cache.hpp"
#include "service/tenancy/response_store.hpp"
#include "service/tenancy/tenants.hpp"
#include "service/tenancy/tenants_watcher.hpp"

#include <caf/actor_system.hpp>

#include <atomic>
#include <memory>
#include <set>
#include <mutex>
#include <optional>

namespace prometheus {
class Counter;
template <class T>
class Family;
} // namespace prometheus

namespace troupe {

struct gateway_options {
  /// /health/ready is 503 when requests are queued and no step has finished
  /// for this long.
  std::chrono::nanoseconds stall_timeout{std::chrono::seconds(60)};
  bool admin_api = false; ///< /admin/replicas (list, drain, resume, faults), /admin/tenants
  std::string tenants_file; ///< "": no tenants (no keys, no quotas)
  std::size_t response_cache_bytes = 0; ///< 0: no response cache
  double response_cache_ttl_s = 600;
  std::size_t responses_store_bytes = 64 << 20; ///< 0: POST /v1/responses stores nothing
  double responses_ttl_s = 3600;
  std::size_t websocket_max_buffered = 1 << 20;
  /// /metrics is served by a listener of its own (server.metrics_port), and
  /// the main one answers it 404: its series name tenants.
  bool metrics_elsewhere = false;
  /// server.unknown_fields = "refuse": a request field in nobody's table is
  /// a 400 (unknown_parameter); else it is accepted, and shown: a warning
  /// once per name, troupe_unknown_fields_total, a troupe-unknown-fields
  /// response header.
  bool refuse_unknown_fields = false;
  /// The key that seals reasoning for stateless clients (a thinking
  /// signature, encrypted_content); null: a random one.
  std::shared_ptr<const api::reasoning_seal> seal;
};

/// Which listener a request came in on.
enum class listener {
  main,    ///< every route (/metrics unless gateway_options::metrics_elsewhere)
  metrics, ///< /metrics, /health/live and /health/ready only; the rest 404
};

class gateway {
public:
  /// Reads the tenants file, if any (throws config_error when it is invalid).
  gateway(caf::actor_system& sys, server_status& status, gateway_options options);

  /// Until set, completions get 503 "loading" (the models are still loading).
  void set_fleet(std::shared_ptr<const fleet> f);
  /// Handles one request (an http::server's handler) that came in on `on`.
  void handle(http::request req, std::shared_ptr<http::exchange> client, listener on = listener::main);

  /// Reads the tenants file again. An invalid file keeps the tenants in
  /// force and logs the key and the reason. `why` names the trigger in the log.
  auto reload_tenants(const char* why) -> bool { return watcher_ && watcher_->reload(why); }
  /// Watches the tenants file (its modification time and size, every
  /// `period`) on a thread of its own, reloading when it changes.
  void watch_tenants(std::chrono::milliseconds period) {
    if (watcher_) watcher_->watch(period);
  }

  struct ws_connection;
  struct call_context; ///< one HTTP request on its way through the routes (gateway_routes.cpp)

  /// What complete() needs of a request, from HTTP or a WebSocket message.
  struct completion_call {
    /// The wire protocol the route speaks: it reads the body and writes the answer.
    std::shared_ptr<api::wire_protocol> protocol;
    api::responses_protocol* responses = nullptr; ///< the Responses API's (its store), else null
    std::string_view body;
    std::shared_ptr<tenant_state> tenant; ///< null: no tenants
    http::header_list headers;            ///< x-request-id, x-model-version
    std::string request_id;
    steady_time arrival;
    std::string session, tier;            ///< x-session-id, x-troupe-tier
  };

private:
  friend struct gateway_routes; ///< the routes' handlers (gateway_routes.cpp)
  auto served() -> std::shared_ptr<const fleet>;
  /// "" when ready, else why not: every model (or `model`) has a replica ready.
  auto readiness(const fleet* f, const served_model* model) const -> std::string;
  /// POST /tokenize (tokenize) or /detokenize: parsed, then answered.
  void count_tokens(std::string_view body, const std::string& tenant, const fleet& fl,
                    const std::shared_ptr<http::exchange>& client, const http::header_list& headers);
  void tokens(bool tokenize, std::string_view body, const fleet& fl, const std::shared_ptr<http::exchange>& client,
              const http::header_list& headers);
  /// A completion, from HTTP or a WebSocket: checks, then a sink.
  void complete(completion_call& call, const std::shared_ptr<http::exchange>& client);
  /// The tenant's checks (tenants_->admit) and what its spec sets on the request.
  auto admit_tenant(const completion_call& call, const std::string& model_name, api::generation_request& body,
                    struct sink_request& sr, http::header_list& headers) -> std::optional<api::api_error>;
  // The WebSocket protocol (gateway_websocket.cpp): the upgrade, each message.
  void accept_stream(const http::request& req, std::shared_ptr<tenant_state> tenant,
                     const std::shared_ptr<http::exchange>& client);
  void on_ws_message(const std::shared_ptr<ws_connection>& conn, std::string text);
  /// The 401 for a key not given, or not valid.
  static auto unauthenticated(bool key_given) -> api::api_error;
  void count_rejection(const std::string& tenant, const std::string& reason);
  /// Fields in nobody's table: counted, logged once a name; then the 400
  /// (server.unknown_fields = "refuse"), or the troupe-unknown-fields header
  /// added (names shown as [A-Za-z0-9_.-], 64 characters at most).
  auto check_unknown_fields(std::string_view api, const std::vector<std::string>& fields, http::header_list& headers)
      -> std::optional<api::api_error>;

  caf::actor_system& sys_;
  server_status& status_;
  gateway_options options_;
  std::mutex mutex_;
  std::shared_ptr<const fleet> fleet_;
  std::atomic<std::uint64_t> next_id_{1};
  std::unique_ptr<tenant_registry> tenants_; ///< null: no tenants
  std::optional<tenants_watcher> watcher_;   ///< with tenants (declared after them: stops first)
  std::unique_ptr<response_cache> cache_;    ///< null: off
  std::unique_ptr<response_store> responses_; ///< POST /v1/responses' ids and store
  prometheus::Family<prometheus::Counter>* rejections_ = nullptr; ///< troupe_tenant_rejections_total
  prometheus::Family<prometheus::Counter>* unknown_fields_ = nullptr; ///< troupe_unknown_fields_total
  std::set<std::string> unknown_seen_; ///< "api field" logged (at most max_unknown_names)
};

} // namespace troupe
