// The gateway's routes: one table of {path, methods, what it needs} to a
// handler. handle() finds the route, checks the listener, the method, the
// caller's key and whether the server serves, then calls its handler.

#include "actors/gateway.hpp"

#include "actors/admin_api.hpp"
#include "base/json_text.hpp"
#include "service/http/anthropic/anthropic_protocol.hpp"
#include "service/http/openai/openai_format.hpp"
#include "service/http/openai/openai_protocol.hpp"
#include "service/http/responses/responses_protocol.hpp"
#include "service/http/anthropic/anthropic_api.hpp"
#include "service/http/chat_page.hpp"

#include <cctype>
#include <optional>

namespace troupe {

/// One request on its way through the table.
struct gateway::call_context {
  http::request& req;
  std::shared_ptr<http::exchange> client;
  listener on;
  steady_time arrival;
  std::shared_ptr<const fleet> fl;
  const serving_context* dflt = nullptr; ///< the default model (for requests that name none, and /admin)
  const served_model* named = nullptr;   ///< ?model=NAME
  std::string path, request_id;
  http::header_list headers;
  bool messages_api = false;             ///< Anthropic's error shape
  std::shared_ptr<tenant_state> tenant;  ///< with tenants: the caller

  void reply(int status, std::string content_type, std::string body, http::header_list extra = {}) const {
    auto h = headers;
    h.emplace_back("Content-Type", std::move(content_type));
    for (auto& e : extra) h.push_back(std::move(e));
    client->respond(status, std::move(h), std::move(body));
  }
  void error(int status, std::string message, std::string type = "invalid_request_error", std::string param = {},
             std::string code = {}, http::header_list extra = {}) const {
    api::api_error e{status, std::move(message), std::move(type), std::move(param), std::move(code)};
    reply(status, "application/json", messages_api ? api::anthropic::error_body(e) : api::error_body(e),
          std::move(extra));
  }
  void no_route() const { error(404, "no route for " + path, "invalid_request_error", "", "not_found"); }
  auto get() const -> bool { return req.method == "GET" || req.method == "HEAD"; }
};

/// The handlers (friends of the gateway: they read its tenants, stores and options).
struct gateway_routes {
  using call = gateway::call_context;

  static void page(gateway&, call& c) { c.reply(200, "text/html; charset=utf-8", std::string(chat_page())); }
  static void live(gateway&, call& c) { c.reply(200, "application/json", R"({"status":"live"})"); }

  // Every model has a replica ready (?model=NAME: that model).
  static void ready(gateway& g, call& c) {
    const auto why = g.readiness(c.fl.get(), c.named);
    if (why.empty()) return c.reply(200, "application/json", R"({"status":"ready"})");
    c.reply(503, "application/json", R"({"status":")" + why + R"("})");
  }

  static void metrics(gateway&, call& c) {
    if (!c.dflt) return c.reply(200, "text/plain; version=0.0.4", "");
    c.reply(200, "text/plain; version=0.0.4", c.dflt->metrics->serialize()); // (every model's: one registry)
  }

  static void admin(gateway& g, call& c) {
    if (!g.options_.admin_api) return c.no_route();
    handle_admin(g.sys_, c.path, c.req, g.tenants_.get(), c.named ? c.named->stable.get() : c.dflt, c.client,
                 c.headers);
  }

  // GET or DELETE /v1/responses/{id}: the tenant's own.
  static void stored_response(gateway& g, call& c) {
    const auto id = c.path.substr(std::string_view("/v1/responses/").size());
    const auto owner = c.tenant ? c.tenant->spec()->name : std::string();
    if (c.get()) {
      if (const auto r = g.responses_->get(owner, id, steady_now_s()))
        return c.reply(200, "application/json", r->response_json);
    } else if (g.responses_->erase(owner, id, steady_now_s())) {
      return c.reply(200, "application/json",
                     R"({"id":)" + json_text::quoted(id) + R"(,"object":"response","deleted":true})");
    }
    c.error(404, "no stored response has the id '" + id + "'", "invalid_request_error", "", "not_found");
  }

  static void usage(gateway& g, call& c) {
    if (!g.tenants_)
      return c.error(404, "no tenants are configured (server.tenants)", "invalid_request_error", "", "not_found");
    c.reply(200, "application/json", c.tenant->usage_json(steady_now_s()));
  }

  static void models(gateway&, call& c) {
    if (!c.fl) return c.error(503, "the model is loading", "service_unavailable");
    const auto spec = c.tenant ? c.tenant->spec() : std::make_shared<const tenant_spec>();
    std::vector<api::model_card> cards;
    for (const auto& m : c.fl->models)
      if (spec->allows(m.name)) cards.push_back({m.name, m.stable->max_model_len});
    for (const auto& r : c.fl->routes)
      if (spec->allows(r.name)) cards.push_back({r.name, r.large->stable->max_model_len});
    c.reply(200, "application/json", api::models_list(cards, 0));
  }

  static void tokenize(gateway& g, call& c) { g.tokens(true, c.req.body, *c.fl, c.client, c.headers); }
  static void detokenize(gateway& g, call& c) { g.tokens(false, c.req.body, *c.fl, c.client, c.headers); }
  static void count(gateway& g, call& c) {
    g.count_tokens(c.req.body, c.tenant ? c.tenant->spec()->name : "default", *c.fl, c.client, c.headers);
  }

  static void stream(gateway& g, call& c) {
    if (!c.req.websocket)
      return c.error(426, "GET /v1/chat/stream is a WebSocket: send an Upgrade: websocket request",
                     "invalid_request_error", "", "upgrade_required", {{"Upgrade", "websocket"}});
    g.accept_stream(c.req, std::move(c.tenant), c.client);
  }

  static void completion(gateway& g, call& c, std::shared_ptr<api::wire_protocol> protocol,
                         api::responses_protocol* responses = nullptr) {
    gateway::completion_call call;
    call.protocol = std::move(protocol);
    call.responses = responses;
    call.body = c.req.body;
    call.tenant = std::move(c.tenant);
    call.headers = std::move(c.headers);
    call.request_id = std::move(c.request_id);
    call.arrival = c.arrival;
    call.session = c.req.header("x-session-id");
    if (call.session.empty()) call.session = c.req.header("x-claude-code-session-id");
    call.tier = c.req.header("x-troupe-tier");
    g.complete(call, c.client);
  }
  static void completions(gateway& g, call& c) {
    completion(g, c, std::make_shared<api::openai_protocol>(api::endpoint::completions));
  }
  static void chat(gateway& g, call& c) { completion(g, c, std::make_shared<api::openai_protocol>(api::endpoint::chat)); }
  static void messages(gateway& g, call& c) { completion(g, c, std::make_shared<api::anthropic_protocol>()); }
  static void responses(gateway& g, call& c) {
    auto protocol = std::make_shared<api::responses_protocol>();
    auto* fields = protocol.get();
    completion(g, c, std::move(protocol), fields);
  }
};

namespace {

// The key a request presents: Authorization: Bearer KEY, else x-api-key.
// nullopt: an Authorization header of another scheme.
auto presented_key(const http::request& req) -> std::optional<std::string> {
  if (auto auth = req.header("authorization"); !auth.empty()) {
    constexpr std::string_view bearer = "bearer ";
    if (auth.size() <= bearer.size()) return std::nullopt;
    for (std::size_t i = 0; i < bearer.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(auth[i])) != bearer[i]) return std::nullopt;
    auto key = auth.substr(bearer.size());
    while (!key.empty() && key.front() == ' ') key.erase(0, 1);
    while (!key.empty() && key.back() == ' ') key.pop_back();
    return key;
  }
  return req.header("x-api-key");
}

enum route_needs : unsigned {
  on_metrics_listener = 1, ///< served on the metrics listener too
  caller = 2,              ///< with tenants, an API key (401 without)
  serving = 4,             ///< 503 while the server drains or its models load
};

struct route {
  std::string_view path;
  bool prefix;
  std::string_view allow; ///< the methods (GET includes HEAD); "": any
  unsigned needs;
  void (*handle)(gateway&, gateway::call_context&);
};

using r = gateway_routes;
constexpr route routes[] = {
    {"/", false, "GET", 0, r::page},
    {"/index.html", false, "GET", 0, r::page},
    {"/health/live", false, "GET", on_metrics_listener, r::live},
    {"/health/ready", false, "GET", on_metrics_listener, r::ready},
    {"/metrics", false, "GET", on_metrics_listener, r::metrics},
    {"/admin/", true, "", 0, r::admin},
    {"/v1/completions", false, "POST", caller | serving, r::completions},
    {"/v1/chat/completions", false, "POST", caller | serving, r::chat},
    {"/v1/messages", false, "POST", caller | serving, r::messages},
    {"/v1/messages/count_tokens", false, "POST", caller | serving, r::count},
    {"/v1/responses", false, "POST", caller | serving, r::responses},
    {"/v1/responses/", true, "GET, DELETE", caller, r::stored_response},
    {"/v1/chat/stream", false, "GET", caller | serving, r::stream},
    {"/v1/models", false, "GET", caller, r::models},
    {"/v1/usage", false, "GET", caller, r::usage},
    {"/tokenize", false, "POST", caller | serving, r::tokenize},
    {"/detokenize", false, "POST", caller | serving, r::detokenize},
};

auto find_route(std::string_view path) -> const route* {
  for (const auto& rt : routes)
    if (rt.prefix ? path.starts_with(rt.path) : path == rt.path) return &rt;
  return nullptr;
}

auto method_allowed(const route& rt, const std::string& method) -> bool {
  if (rt.allow.empty()) return true;
  const bool get = method == "GET" || method == "HEAD";
  if (get && rt.allow.starts_with("GET")) return true;
  return method != "GET" && method != "HEAD" && rt.allow.find(method) != std::string_view::npos;
}

} // namespace

void gateway::handle(http::request req, std::shared_ptr<http::exchange> client, listener on) {
  const auto fl = served();
  call_context c{req, std::move(client), on, std::chrono::steady_clock::now(), fl,
                 fl ? fl->models.front().stable.get() : nullptr, nullptr, {}, {}, {}, false, nullptr};
  c.request_id = req.header("x-request-id");
  if (c.request_id.empty()) c.request_id = "troupe-" + std::to_string(next_id_.fetch_add(1));
  c.headers = {{"x-request-id", c.request_id}};
  // The default model's version (a completion's is its own model's).
  if (c.dflt) c.headers.emplace_back("x-model-version", c.dflt->model_version);
  c.path = req.target.substr(0, req.target.find('?'));
  c.messages_api = c.path == "/v1/messages";
  // ?model=NAME (/health/ready, /admin): a model served here, else 404.
  if (const auto q = req.target.find("?model="); q != std::string::npos && c.fl) {
    const auto name = req.target.substr(q + 7);
    c.named = c.fl->find(name);
    if (!c.named)
      return c.error(404, "the model '" + name + "' is not served here", "invalid_request_error", "model",
                     "model_not_found");
  }
  const auto* rt = find_route(c.path);
  if (!rt || (on == listener::metrics && !(rt->needs & on_metrics_listener))) return c.no_route();
  if (rt->handle == r::metrics && on == listener::main && options_.metrics_elsewhere) return c.no_route();
  if (!method_allowed(*rt, req.method))
    return c.error(405, "method " + req.method + " is not allowed on " + c.path, "invalid_request_error", "",
                   "method_not_allowed", {{"Allow", std::string(rt->allow)}});
  if ((rt->needs & caller) && tenants_) {
    const auto key = presented_key(req);
    if (!key)
      return c.error(401, "the Authorization header must be \"Bearer <API key>\"", "authentication_error", "",
                     "invalid_api_key", {{"WWW-Authenticate", "Bearer"}});
    c.tenant = tenants_->authenticate(*key);
    // A WebSocket may authenticate by its first message instead.
    if (!c.tenant && !(rt->handle == r::stream && key->empty())) {
      const auto e = unauthenticated(!key->empty());
      count_rejection("", e.code);
      return c.error(401, e.message, e.type, "", e.code, {{"WWW-Authenticate", "Bearer"}});
    }
  }
  if (rt->needs & serving) {
    if (status_.draining.load())
      return c.error(503, "the server is shutting down", "service_unavailable", "", "server_shutdown");
    if (!c.fl || !status_.ready.load()) return c.error(503, "the model is loading", "service_unavailable");
  }
  rt->handle(*this, c);
}

} // namespace troupe
