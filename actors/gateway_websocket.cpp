// The gateway's WebSocket protocol at GET /v1/chat/stream (gateway.hpp):
// the upgrade, the messages a client sends, and each request's exchange,
// which turns what its sink writes into messages with the request's id.
// Requests themselves go through gateway::complete, as HTTP ones do.

#include "actors/gateway.hpp"
#include "base/json_text.hpp"
#include "service/http/openai/openai_format.hpp"
#include "service/http/websocket/websocket_api.hpp"

#include <map>

namespace troupe {

/// One request on a WebSocket: the sink's exchange.
class ws_request final : public http::exchange {
public:
  ws_request(std::shared_ptr<gateway::ws_connection> conn, std::string id) : conn_(std::move(conn)), id_(std::move(id)) {}

  void respond(int status, http::header_list headers, std::string body) override;
  void start_stream(int, http::header_list) override {}
  void write(std::string data, delivery_count delivered) override;
  void end_stream() override {
    std::unique_lock lock(mu_);
    if (!ended_) finish(lock, false);
  }
  void on_disconnect(std::function<void()> f) override {
    std::unique_lock lock(mu_);
    if (ended_) {
      lock.unlock();
      if (f) f();
      return;
    }
    on_gone_ = std::move(f);
  }
  void accept_websocket(std::function<http::websocket_handlers(std::shared_ptr<http::websocket>)>) override {}

  /// Ends it from the connection's side (a cancel, the socket closed):
  /// `event`, if any, is its last message; the sink is told to stop.
  void cut(const std::string& event);

private:
  /// Under mu_, not ended: ends it (nothing more is sent for it) and takes
  /// it off the connection; `tell_sink`: the sink is told to stop.
  void finish(std::unique_lock<std::mutex>& lock, bool tell_sink);

  std::shared_ptr<gateway::ws_connection> conn_;
  std::string id_;
  std::mutex mu_; ///< sends happen under it: nothing follows a request's last message
  bool ended_ = false;
  std::function<void()> on_gone_;
};

struct gateway::ws_connection {
  std::shared_ptr<http::websocket> socket;
  std::size_t max_buffered = 0;
  std::shared_ptr<tenant_state> tenant; ///< with tenants: set by the upgrade's key or an auth message
  bool authenticated = false;           ///< (tenants) a key was accepted, or anonymous access
  std::string session, tier;            ///< x-session-id, x-troupe-tier of the upgrade
  std::mutex mu;
  std::map<std::string, std::shared_ptr<ws_request>> live; ///< by id (JSON text)
  bool closed = false;

  void forget(const std::string& id, const ws_request* r) {
    std::lock_guard lock(mu);
    if (const auto it = live.find(id); it != live.end() && it->second.get() == r) live.erase(it);
  }
};

void ws_request::finish(std::unique_lock<std::mutex>& lock, bool tell_sink) {
  ended_ = true;
  auto gone = std::move(on_gone_);
  on_gone_ = nullptr;
  lock.unlock();
  conn_->forget(id_, this);
  if (tell_sink && gone) gone();
}

void ws_request::respond(int status, http::header_list headers, std::string body) {
  std::unique_lock lock(mu_);
  if (ended_) return;
  // An error ({"error":{...}}) becomes an error event; a 429's Retry-After
  // goes with it. (The sink is ending anyway.)
  std::string more;
  if (status == 429)
    for (const auto& [k, v] : headers)
      if (k == "Retry-After") more = R"("retry_after_s":)" + v;
  conn_->socket->send(api::ws_error_event(id_, status, body, more));
  finish(lock, false);
}

void ws_request::write(std::string data, delivery_count delivered) {
  if (delivered) delivered->fetch_sub(1, std::memory_order_relaxed);
  std::unique_lock lock(mu_);
  if (ended_) return;
  std::size_t queued = 0;
  for (std::size_t at = 0; at < data.size();) {
    auto nl = data.find('\n', at);
    if (nl == std::string::npos) nl = data.size();
    if (nl > at) queued = conn_->socket->send(data.substr(at, nl - at));
    at = nl + 1;
  }
  if (queued <= conn_->max_buffered) return;
  // The client does not read: the engine must not wait for it, nor the
  // server hold its tokens without bound.
  const api::api_error e{429,
                         "the client reads too slowly: " + std::to_string(queued) +
                             " bytes wait on its socket (the limit is " + std::to_string(conn_->max_buffered) +
                             "); the request was cancelled",
                         "slow_reader", "", "slow_reader"};
  conn_->socket->send(api::ws_error_event(id_, e.status, api::error_body(e)));
  finish(lock, true);
}

void ws_request::cut(const std::string& event) {
  std::unique_lock lock(mu_);
  if (ended_) return;
  if (!event.empty()) conn_->socket->send(event);
  finish(lock, true);
}

void gateway::accept_stream(const http::request& req, std::shared_ptr<tenant_state> tenant,
                            const std::shared_ptr<http::exchange>& client) {
  auto conn = std::make_shared<ws_connection>();
  conn->max_buffered = options_.websocket_max_buffered;
  conn->tenant = std::move(tenant);
  conn->authenticated = !tenants_ || conn->tenant != nullptr;
  conn->session = req.header("x-session-id");
  conn->tier = req.header("x-troupe-tier");
  client->accept_websocket([this, conn](std::shared_ptr<http::websocket> socket) {
    conn->socket = std::move(socket); // (its requests' sinks count as live requests; an idle socket does not)
    http::websocket_handlers h;
    h.on_message = [this, conn](std::string text) { on_ws_message(conn, std::move(text)); };
    h.on_close = [conn] {
      std::map<std::string, std::shared_ptr<ws_request>> live;
      {
        std::lock_guard lock(conn->mu);
        conn->closed = true;
        live.swap(conn->live);
      }
      for (auto& [id, r] : live) r->cut({});
    };
    return h;
  });
}

void gateway::on_ws_message(const std::shared_ptr<ws_connection>& conn, std::string text) {
  const auto send = [&](std::string m) { conn->socket->send(std::move(m)); };
  const auto error_event = [&](const std::string& id_json, const api::api_error& e) {
    send(api::ws_error_event(id_json, e.status, api::error_body(e)));
  };
  auto parsed = api::parse_ws_envelope(text);
  if (auto* e = std::get_if<api::api_error>(&parsed)) return error_event("", *e);
  auto& env = std::get<api::ws_envelope>(parsed);
  if (env.type == "ping") return send(R"({"type":"pong"})");
  if (env.type == "auth") {
    if (!tenants_) return send(R"({"type":"auth","tenant":"default"})");
    auto t = tenants_->authenticate(env.api_key);
    if (!t) {
      auto e = unauthenticated(!env.api_key.empty());
      e.param = "api_key";
      count_rejection("", e.code);
      return error_event("", e);
    }
    {
      std::lock_guard lock(conn->mu);
      conn->tenant = t;
      conn->authenticated = true;
    }
    return send(R"({"type":"auth","tenant":)" + json_text::quoted(t->name()) + "}");
  }
  if (env.id_json.empty()) return error_event("", {400, "a message needs an id", "invalid_request_error", "id", "missing_field"});
  if (env.type == "cancel") {
    std::shared_ptr<ws_request> r;
    {
      std::lock_guard lock(conn->mu);
      if (const auto it = conn->live.find(env.id_json); it != conn->live.end()) r = it->second;
    }
    if (!r) return error_event(env.id_json, {404, "no request " + env.id_json + " is running on this socket",
                                             "invalid_request_error", "id", "not_found"});
    return r->cut(R"({"type":"cancelled","id":)" + env.id_json + "}");
  }
  // A chat request.
  auto r = std::make_shared<ws_request>(conn, env.id_json);
  std::shared_ptr<tenant_state> tenant;
  {
    std::lock_guard lock(conn->mu);
    if (conn->closed) return;
    if (!conn->authenticated)
      return error_event(env.id_json, {401, "authenticate first: {\"type\":\"auth\",\"api_key\":KEY}",
                                       "authentication_error", "", "missing_api_key"});
    if (conn->live.contains(env.id_json))
      return error_event(env.id_json, {400, "a request with id " + env.id_json + " is already running on this socket",
                                       "invalid_request_error", "id", "duplicate_id"});
    if (status_.draining.load())
      return error_event(env.id_json, {503, "the server is shutting down", "service_unavailable", "", "server_shutdown"});
    tenant = conn->tenant;
    conn->live.emplace(env.id_json, r);
  }
  completion_call call;
  call.protocol = std::make_shared<api::websocket_protocol>(env.id_json);
  call.body = text;
  call.tenant = std::move(tenant);
  call.request_id = "troupe-" + std::to_string(next_id_.fetch_add(1));
  call.headers = {{"x-request-id", call.request_id}};
  call.arrival = std::chrono::steady_clock::now();
  call.session = conn->session;
  call.tier = conn->tier;
  complete(call, r);
}

} // namespace troupe
