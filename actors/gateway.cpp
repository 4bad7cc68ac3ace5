#include "actors/gateway.hpp"

#include "actors/http/chat_page.hpp"
#include "actors/http/openai_api.hpp"
#include "actors/sink_actor.hpp"

#include <caf/all.hpp>
#include <prometheus/counter.h>
#include <prometheus/family.h>

#include <cstdio>

namespace troupe {

namespace {

auto hash_of(std::string_view s) -> std::uint64_t { return std::hash<std::string_view>{}(s) | 1; }

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

// What makes a deterministic request's answer: every field that shapes it.
// "" when the request is not cacheable (sampled without a seed; logprobs).
auto canonical_request(const api::completion_request& r, const std::string& version) -> std::string {
  const auto& s = r.sampling;
  if (!(s.temperature == 0 || s.seed) || r.want_logprobs) return {};
  std::string k = version;
  k += r.kind == api::endpoint::chat ? "\nchat\n" : "\ncompletion\n";
  const auto field = [&](std::string_view text) {
    k += std::to_string(text.size());
    k += ':';
    k += text;
  };
  for (const auto& m : r.messages) {
    field(m.role);
    field(m.content);
  }
  field(r.prompt);
  for (auto t : r.prompt_tokens) k += std::to_string(t) + ",";
  char nums[256];
  std::snprintf(nums, sizeof nums, "|%a|%d|%a|%a|%a|%a|%a|%llu|%d|%d|%d|", static_cast<double>(s.temperature), s.top_k,
                static_cast<double>(s.top_p), static_cast<double>(s.min_p), static_cast<double>(s.repetition_penalty),
                static_cast<double>(s.presence_penalty), static_cast<double>(s.frequency_penalty),
                static_cast<unsigned long long>(s.seed.value_or(0)), s.seed ? 1 : 0, r.max_tokens.value_or(-1),
                s.ignore_eos ? 1 : 0);
  k += nums;
  for (const auto& stop : s.stop) field(stop);
  for (auto t : s.stop_token_ids) k += std::to_string(t) + ",";
  return k;
}

} // namespace

/// One request on a WebSocket: the sink's exchange, turning what the sink
/// writes into messages with the request's id.
class ws_request final : public http::exchange {
public:
  ws_request(std::shared_ptr<gateway::ws_connection> conn, std::string id) : conn_(std::move(conn)), id_(std::move(id)) {}

  void respond(int status, http::header_list headers, std::string body) override;
  void start_stream(int, http::header_list) override {}
  void write(std::string data, delivery_count delivered) override;
  void end_stream() override;
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
  void end(std::unique_lock<std::mutex>& lock);

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

void ws_request::end(std::unique_lock<std::mutex>& lock) {
  ended_ = true;
  auto gone = std::move(on_gone_);
  on_gone_ = nullptr;
  lock.unlock();
  conn_->forget(id_, this);
  if (gone) gone();
}

void ws_request::respond(int status, http::header_list headers, std::string body) {
  std::unique_lock lock(mu_);
  if (ended_) return;
  // An error ({"error":{...}}) becomes an error event; a 429's Retry-After
  // goes with it.
  std::string event = R"({"type":"error","id":)" + id_;
  if (status == 429)
    for (const auto& [k, v] : headers)
      if (k == "Retry-After") event += R"(,"retry_after_s":)" + v;
  event += R"(,"status":)" + std::to_string(status) + "," + (body.size() > 1 ? body.substr(1) : "}");
  conn_->socket->send(std::move(event));
  ended_ = true;
  on_gone_ = nullptr; // (the sink is ending anyway)
  lock.unlock();
  conn_->forget(id_, this);
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
  api::api_error e{429, "the client reads too slowly: " + std::to_string(queued) +
                            " bytes wait on its socket (the limit is " + std::to_string(conn_->max_buffered) +
                            "); the request was cancelled",
                   "slow_reader", "", "slow_reader"};
  conn_->socket->send(R"({"type":"error","id":)" + id_ + "," + api::error_body(e).substr(1));
  end(lock);
}

void ws_request::end_stream() {
  std::unique_lock lock(mu_);
  if (ended_) return;
  ended_ = true;
  on_gone_ = nullptr;
  lock.unlock();
  conn_->forget(id_, this);
}

void ws_request::cut(const std::string& event) {
  std::unique_lock lock(mu_);
  if (ended_) return;
  if (!event.empty()) conn_->socket->send(event);
  end(lock);
}

/// What complete() needs of a request, from HTTP or a WebSocket message.
struct gateway::completion_call {
  api::endpoint kind = api::endpoint::chat;
  std::string_view body;
  std::shared_ptr<tenant_state> tenant; ///< null: no tenants
  http::header_list headers;            ///< x-request-id, x-model-version
  std::string request_id;
  steady_time arrival;
  std::string session, tier;            ///< x-session-id, x-troupe-tier
  std::string ws_id;                    ///< a WebSocket request's id ("" for HTTP)
};

gateway::gateway(caf::actor_system& sys, server_status& status, gateway_options options)
  : sys_(sys), status_(status), options_(std::move(options)) {
  if (!options_.tenants_file.empty()) {
    tenants_ = std::make_unique<tenant_registry>(load_tenants(options_.tenants_file), now_s());
    std::error_code ec;
    seen_mtime_ = std::filesystem::last_write_time(options_.tenants_file, ec);
    seen_size_ = std::filesystem::file_size(options_.tenants_file, ec);
  }
  if (options_.response_cache_bytes > 0)
    cache_ = std::make_unique<response_cache>(options_.response_cache_bytes, options_.response_cache_ttl_s);
}

gateway::~gateway() {
  {
    std::lock_guard lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

auto gateway::now_s() -> double {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

auto gateway::reload_tenants(const char* why) -> bool {
  if (!tenants_) return false;
  try {
    auto c = load_tenants(options_.tenants_file);
    const auto n = c.tenants.size();
    tenants_->reload(std::move(c), now_s());
    std::fprintf(stderr, "troupe: tenants: reloaded %s (%s): %zu tenant(s)\n", options_.tenants_file.c_str(), why, n);
    return true;
  } catch (const std::exception& e) {
    // (config_error's text names the file, the key and the reason; never a key's value.)
    std::fprintf(stderr, "troupe: tenants: not reloaded (%s): %s; the previous tenants stay in force\n", why, e.what());
    return false;
  }
}

void gateway::watch_tenants(std::chrono::milliseconds period) {
  if (!tenants_ || period.count() <= 0 || watcher_.joinable()) return;
  watcher_ = std::thread([this, period] {
    std::unique_lock lock(watch_mu_);
    while (!watch_cv_.wait_for(lock, period, [this] { return stopping_; })) {
      std::error_code ec1, ec2;
      const auto mtime = std::filesystem::last_write_time(options_.tenants_file, ec1);
      const auto size = std::filesystem::file_size(options_.tenants_file, ec2);
      if (ec1 || ec2 || (mtime == seen_mtime_ && size == seen_size_)) continue;
      seen_mtime_ = mtime;
      seen_size_ = size;
      reload_tenants("the file changed");
    }
  });
}

void gateway::set_fleet(std::shared_ptr<const fleet> f) {
  std::lock_guard lock(mutex_);
  if (f && !rejections_)
    rejections_ = &prometheus::BuildCounter()
                       .Name("troupe_tenant_rejections_total")
                       .Help("Requests refused by the gateway, by tenant and reason.")
                       .Register(*f->models.front().stable->metrics->registry());
  fleet_ = std::move(f);
}

void gateway::count_rejection(const std::string& tenant, const std::string& reason) {
  prometheus::Family<prometheus::Counter>* family;
  {
    std::lock_guard lock(mutex_);
    family = rejections_;
  }
  if (family) family->Add({{"tenant", tenant}, {"reason", reason}}).Increment();
}

auto gateway::served() -> std::shared_ptr<const fleet> {
  std::lock_guard lock(mutex_);
  return fleet_;
}

auto gateway::readiness(const fleet* f, const served_model* model) const -> std::string {
  if (status_.draining.load()) return "draining";
  if (!status_.ready.load() || !f) return "loading";
  if (model ? !model->ready() : !std::all_of(f->models.begin(), f->models.end(), [](const auto& m) { return m.ready(); }))
    return "no replica ready";
  if (status_.num_queued.load() > 0) {
    const auto last = std::chrono::nanoseconds(status_.last_progress_ns.load());
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    if (now - last > options_.stall_timeout) return "stalled";
  }
  return {};
}


void gateway::handle(http::request req, std::shared_ptr<http::exchange> client) {
  const auto arrival = std::chrono::steady_clock::now();
  const auto fl = served();
  // The default model (for requests that name none, and /admin).
  const serving_context* const dflt = fl ? fl->models.front().stable.get() : nullptr;
  std::string request_id = req.header("x-request-id");
  if (request_id.empty()) request_id = "troupe-" + std::to_string(next_id_.fetch_add(1));
  http::header_list headers{{"x-request-id", request_id}};
  // The default model's version (a completion's is its own model's, below).
  if (dflt) headers.emplace_back("x-model-version", dflt->model_version);
  const auto reply = [&](int status, std::string content_type, std::string body, http::header_list extra = {}) {
    auto h = headers;
    h.emplace_back("Content-Type", std::move(content_type));
    for (auto& e : extra) h.push_back(std::move(e));
    client->respond(status, std::move(h), std::move(body));
  };
  const auto error = [&](int status, std::string message, std::string type = "invalid_request_error",
                         std::string param = {}, std::string code = {}, http::header_list extra = {}) {
    api::api_error e{status, std::move(message), std::move(type), std::move(param), std::move(code)};
    reply(status, "application/json", api::error_body(e), std::move(extra));
  };

  std::string path = req.target.substr(0, req.target.find('?'));
  // ?model=NAME (/health/ready, /admin): a model served here, else 404.
  const served_model* named = nullptr;
  if (const auto q = req.target.find("?model="); q != std::string::npos && fl) {
    const auto name = req.target.substr(q + 7);
    named = fl->find(name);
    if (!named)
      return error(404, "the model '" + name + "' is not served here", "invalid_request_error", "model",
                   "model_not_found");
  }
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  const auto wrong_method = [&](const char* allow) {
    error(405, "method " + req.method + " is not allowed on " + path, "invalid_request_error", "", "method_not_allowed",
          {{"Allow", allow}});
  };

  if (path == "/" || path == "/index.html")
    return get ? reply(200, "text/html; charset=utf-8", std::string(chat_page())) : wrong_method("GET");
  if (path == "/health/live") return get ? reply(200, "application/json", R"({"status":"live"})") : wrong_method("GET");
  if (path == "/health/ready") {
    if (!get) return wrong_method("GET");
    // Every model has a replica ready (?model=NAME: that model).
    const auto why = readiness(fl.get(), named);
    if (why.empty()) return reply(200, "application/json", R"({"status":"ready"})");
    return reply(503, "application/json", R"({"status":")" + why + R"("})");
  }
  if (path == "/metrics") {
    if (!get) return wrong_method("GET");
    if (!dflt) return reply(200, "text/plain; version=0.0.4", "");
    return reply(200, "text/plain; version=0.0.4", dflt->metrics->serialize()); // (every model's: one registry)
  }
  if (path.starts_with("/admin/")) {
    if (!options_.admin_api) return error(404, "no route for " + path, "invalid_request_error", "", "not_found");
    if (path == "/admin/tenants") {
      if (!get) return wrong_method("GET");
      if (!tenants_) return error(404, "no tenants are configured (server.tenants)", "invalid_request_error", "", "not_found");
      std::string body = R"({"object":"list","unauthenticated":)" + std::to_string(tenants_->unauthenticated()) +
                         R"(,"data":[)";
      bool first = true;
      for (const auto& t : tenants_->tenants()) {
        body += (first ? "" : ",") + t->usage_json(now_s());
        first = false;
      }
      return reply(200, "application/json", body + "]}");
    }
    if (!fl) return error(503, "the model is loading", "service_unavailable");
    return admin(path, req, named ? *named->stable : *fl->models.front().stable, client, headers);
  }

  const bool completions = path == "/v1/completions";
  const bool chat = path == "/v1/chat/completions";
  const bool stream = path == "/v1/chat/stream";
  const bool models = path == "/v1/models";
  const bool usage = path == "/v1/usage";
  if (!completions && !chat && !stream && !models && !usage)
    return error(404, "no route for " + path, "invalid_request_error", "", "not_found");
  if ((completions || chat) && !post) return wrong_method("POST");
  if ((stream || models || usage) && !get) return wrong_method("GET");

  // Who is calling: with tenants, a key (or anonymous access) is needed.
  std::shared_ptr<tenant_state> tenant;
  if (tenants_) {
    const auto key = presented_key(req);
    if (!key)
      return error(401, "the Authorization header must be \"Bearer <API key>\"", "authentication_error", "",
                   "invalid_api_key", {{"WWW-Authenticate", "Bearer"}});
    tenant = tenants_->authenticate(*key);
    // A WebSocket may authenticate by its first message instead.
    if (!tenant && !(stream && key->empty())) {
      count_rejection("", key->empty() ? "missing_api_key" : "invalid_api_key");
      return error(401,
                   key->empty() ? "an API key is required (Authorization: Bearer <key>)" : "the API key is not valid",
                   "authentication_error", "", key->empty() ? "missing_api_key" : "invalid_api_key",
                   {{"WWW-Authenticate", "Bearer"}});
    }
  }
  if (usage) {
    if (!tenants_) return error(404, "no tenants are configured (server.tenants)", "invalid_request_error", "", "not_found");
    return reply(200, "application/json", tenant->usage_json(now_s()));
  }
  if (models) {
    if (!fl) return error(503, "the model is loading", "service_unavailable");
    const auto spec = tenant ? tenant->spec() : tenant_spec{};
    std::vector<api::model_card> cards;
    for (const auto& m : fl->models)
      if (spec.allows(m.name)) cards.push_back({m.name, m.stable->max_model_len});
    for (const auto& r : fl->routes)
      if (spec.allows(r.name)) cards.push_back({r.name, r.large->stable->max_model_len});
    return reply(200, "application/json", api::models_list(cards, 0));
  }
  if (status_.draining.load()) return error(503, "the server is shutting down", "service_unavailable");
  if (!fl || !status_.ready.load()) return error(503, "the model is loading", "service_unavailable");

  if (stream) {
    if (!req.websocket)
      return error(426, "GET /v1/chat/stream is a WebSocket: send an Upgrade: websocket request", "invalid_request_error",
                   "", "upgrade_required", {{"Upgrade", "websocket"}});
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
      h.on_close = [this, conn] {
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
    return;
  }

  completion_call call;
  call.kind = completions ? api::endpoint::completions : api::endpoint::chat;
  call.body = req.body;
  call.tenant = std::move(tenant);
  call.headers = std::move(headers);
  call.request_id = std::move(request_id);
  call.arrival = arrival;
  call.session = req.header("x-session-id");
  call.tier = req.header("x-troupe-tier");
  complete(call, client);
}

void gateway::on_ws_message(const std::shared_ptr<ws_connection>& conn, std::string text) {
  const auto send = [&](std::string m) { conn->socket->send(std::move(m)); };
  const auto error_event = [&](const std::string& id_json, const api::api_error& e) {
    send(R"({"type":"error","id":)" + (id_json.empty() ? std::string("null") : id_json) + R"(,"status":)" +
         std::to_string(e.status) + "," + api::error_body(e).substr(1));
  };
  auto parsed = api::parse_ws_envelope(text);
  if (auto* e = std::get_if<api::api_error>(&parsed)) return error_event("", *e);
  auto& env = std::get<api::ws_envelope>(parsed);
  if (env.type == "ping") return send(R"({"type":"pong"})");
  if (env.type == "auth") {
    if (!tenants_) return send(R"({"type":"auth","tenant":"default"})");
    auto t = tenants_->authenticate(env.api_key);
    if (!t) {
      count_rejection("", env.api_key.empty() ? "missing_api_key" : "invalid_api_key");
      return error_event("", {401, env.api_key.empty() ? "an API key is required" : "the API key is not valid",
                              "authentication_error", "api_key", env.api_key.empty() ? "missing_api_key" : "invalid_api_key"});
    }
    {
      std::lock_guard lock(conn->mu);
      conn->tenant = t;
      conn->authenticated = true;
    }
    return send(R"({"type":"auth","tenant":)" + api::json_string(t->name()) + "}");
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
  std::shared_ptr<tenant_state> tenant;
  {
    std::lock_guard lock(conn->mu);
    if (!conn->authenticated)
      return error_event(env.id_json, {401, "authenticate first: {\"type\":\"auth\",\"api_key\":KEY}",
                                       "authentication_error", "", "missing_api_key"});
    tenant = conn->tenant;
    if (conn->live.contains(env.id_json))
      return error_event(env.id_json, {400, "a request with id " + env.id_json + " is already running on this socket",
                                       "invalid_request_error", "id", "duplicate_id"});
  }
  if (status_.draining.load())
    return error_event(env.id_json, {503, "the server is shutting down", "service_unavailable", "", ""});
  auto r = std::make_shared<ws_request>(conn, env.id_json);
  {
    std::lock_guard lock(conn->mu);
    if (conn->closed) return;
    conn->live.emplace(env.id_json, r);
  }
  completion_call call;
  call.kind = api::endpoint::chat;
  call.body = text;
  call.tenant = std::move(tenant);
  call.request_id = "troupe-" + std::to_string(next_id_.fetch_add(1));
  call.headers = {{"x-request-id", call.request_id}};
  call.arrival = std::chrono::steady_clock::now();
  call.session = conn->session;
  call.tier = conn->tier;
  call.ws_id = env.id_json;
  complete(call, r);
}

void gateway::complete(completion_call& call, const std::shared_ptr<http::exchange>& client) {
  const auto fl = served();
  if (!fl || !status_.ready.load()) {
    api::api_error e{503, "the model is loading", "service_unavailable", "", ""};
    return client->respond(503, call.headers, api::error_body(e));
  }
  const serving_context* const dflt = fl->models.front().stable.get();
  auto headers = call.headers;
  const auto fail = [&](const api::api_error& e, http::header_list extra = {}) {
    auto h = headers;
    h.emplace_back("Content-Type", "application/json");
    for (auto& x : extra) h.push_back(std::move(x));
    client->respond(e.status, std::move(h), api::error_body(e));
  };
  const auto tenant_name = call.tenant ? call.tenant->name() : std::string("default");
  const auto reject = [&](const std::string& reason, const api::api_error& e) {
    if (call.tenant) tenant_registry::count_rejection(*call.tenant, reason);
    count_rejection(tenant_name, reason);
    fail(e);
  };

  const auto kind = call.kind;
  auto parsed = api::parse_request(kind, call.body, dflt->defaults);
  if (auto* e = std::get_if<api::api_error>(&parsed)) return fail(*e);
  // The model: named (a served one, or a capability route), else the default.
  const served_model* model = &fl->models.front();
  const capability_route* route = nullptr;
  std::string model_name = model->name;
  if (const auto& name = std::get<api::completion_request>(parsed).model; !name.empty()) {
    model_name = name;
    model = fl->find(name);
    if (!model && (route = fl->find_route(name))) model = route->small; // (decided once the prompt is encoded)
    if (!model) {
      std::string known;
      for (const auto& m : fl->models) known += (known.empty() ? "'" : ", '") + m.name + "'";
      for (const auto& r : fl->routes) known += ", '" + r.name + "'";
      return fail({400, "the model '" + name + "' does not exist; this server serves " + known,
                   "invalid_request_error", "model", "model_not_found"});
    }
  }
  // Parsed again with its own generation defaults when they differ.
  if (model->stable.get() != dflt && !(model->stable->defaults == dflt->defaults)) {
    parsed = api::parse_request(kind, call.body, model->stable->defaults);
    if (auto* e = std::get_if<api::api_error>(&parsed)) return fail(*e);
  }
  auto& body = std::get<api::completion_request>(parsed);
  if (!call.ws_id.empty()) { // a WebSocket request always streams (its events)
    body.stream = true;
    body.include_usage = false;
  }

  sink_request sr;
  // The tenant's checks, before any model work: its model (403), its token
  // limits (400), then its place and its rate limits (429).
  std::shared_ptr<tenant_ticket> ticket;
  if (call.tenant) {
    const auto spec = call.tenant->spec();
    if (spec.max_output_tokens > 0) {
      if (body.max_tokens && *body.max_tokens > spec.max_output_tokens) {
        if (spec.allows(model_name))
          return reject("max_output_tokens",
                        {400, "max_tokens is " + std::to_string(*body.max_tokens) +
                                  "; the tenant's limit (max_output_tokens) is " + std::to_string(spec.max_output_tokens),
                         "invalid_request_error", "max_tokens", "output_tokens_exceeded"});
      }
      if (!body.max_tokens) body.max_tokens = spec.max_output_tokens;
    }
    auto d = tenants_->admit(call.tenant, model_name, now_s());
    for (auto& h : d.headers) headers.push_back(std::move(h));
    if (d.status != 0) {
      count_rejection(tenant_name, d.reason);
      return fail({d.status, d.message, d.status == 429 ? "rate_limit_error" : "permission_error",
                   d.status == 403 ? "model" : "", d.code});
    }
    ticket = std::move(d.ticket);
    sr.ticket = ticket;
    sr.tenant = spec.name;
    sr.cache_namespace = hash_of("ns:" + spec.cache_namespace);
    sr.account = hash_of("tenant:" + spec.name);
    sr.weight = spec.tier.vtc_weight;
    sr.priority = spec.tier.priority;
    sr.max_input_tokens = spec.max_input_tokens;
    if (spec.response_cache && cache_) {
      // (the cache key is finished below, once the version is known)
      sr.cache = cache_.get();
    }
  }

  // The session key: x-session-id, else the OpenAI user, else the
  // conversation's opening (its messages up to the first user message, which
  // every later turn repeats; or the prompt's start).
  sr.body = std::move(body);
  sr.request_id = call.request_id;
  sr.arrival = call.arrival;
  std::string key = call.session;
  if (!key.empty()) key = "s:" + key;
  else if (!sr.body.user.empty()) key = "u:" + sr.body.user;
  else if (!sr.body.messages.empty())
    for (const auto& m : sr.body.messages) {
      key += "m:" + m.role + "\n" + m.content + "\n";
      if (m.role == "user") break;
    }
  else if (!sr.body.prompt.empty())
    key = "p:" + sr.body.prompt.substr(0, 256);
  else
    for (std::size_t i = 0; i < std::min<std::size_t>(64, sr.body.prompt_tokens.size()); ++i)
      key += (i ? "," : "t:") + std::to_string(sr.body.prompt_tokens[i]);
  sr.has_session = true;
  sr.session = std::hash<std::string>{}(key);
  // The version: sticky per session (a canary takes its share of sessions).
  auto ctx = model->pick(sr.session);
  std::erase_if(headers, [](const auto& h) { return h.first == "x-model-version"; });
  if (route) {
    sr.route = route;
    sr.served = fl;
    sr.tier = call.tier;
    sr.cache = nullptr; // (which model answers is decided later)
  } else {
    headers.emplace_back("x-model-version", ctx->model_version);
  }
  if (sr.cache) {
    const auto canonical = canonical_request(sr.body, ctx->model_version);
    if (canonical.empty())
      sr.cache = nullptr;
    else
      sr.cache_key = response_cache::key(sr.tenant, canonical);
  }
  sr.headers = std::move(headers);
  sr.ws_id = call.ws_id;
  spawn_sink(sys_, std::move(ctx), &status_, client, std::move(sr));
}

// /admin/replicas (GET: each replica's health and load) and
// /admin/replicas/N/ACTION (POST): drain, resume (the router), hang,
// recover, crash (faults injected into its scheduler, for tests).
void gateway::admin(const std::string& path, const http::request& req, serving_context& ctx,
                    const std::shared_ptr<http::exchange>& client, const http::header_list& headers) {
  const auto reply = [&](int status, std::string body) {
    auto h = headers;
    h.emplace_back("Content-Type", "application/json");
    client->respond(status, std::move(h), std::move(body));
  };
  const auto error = [&](int status, std::string message, std::string code) {
    api::api_error e{status, std::move(message), "invalid_request_error", "", std::move(code)};
    reply(status, api::error_body(e));
  };
  const auto wrong_method = [&] {
    error(405, "method " + req.method + " is not allowed on " + path, "method_not_allowed");
  };
  // An actor's status JSON, "" when it does not answer. (An admin call:
  // blocking this HTTP thread for the answer is fine.)
  const auto status_of = [&](const auto& handle) {
    caf::scoped_actor self{sys_};
    std::string body;
    self->request(handle, std::chrono::seconds(5), status_atom_v)
        .receive([&](std::string& s) { body = std::move(s); }, [&](caf::error&) {});
    return body;
  };
  if (path == "/admin/autoscaler") {
    if (req.method != "GET") return wrong_method();
    if (!ctx.autoscaler) return error(404, "the model has no autoscaler (autoscaler.policy is \"none\")", "not_found");
    const auto body = status_of(ctx.autoscaler);
    if (body.empty()) return error(503, "the autoscaler did not answer", "autoscaler_unavailable");
    return reply(200, body);
  }
  const std::string base = "/admin/replicas";
  if (path == base) {
    if (req.method != "GET") return wrong_method();
    const auto body = status_of(ctx.router);
    if (body.empty()) return error(503, "the router did not answer", "router_unavailable");
    return reply(200, R"({"object":"list","data":)" + body + "}");
  }
  if (!path.starts_with(base + "/")) return error(404, "no route for " + path, "not_found");
  const auto rest = path.substr(base.size() + 1);
  const auto slash = rest.find('/');
  std::int32_t replica = -1;
  try {
    std::size_t used = 0;
    replica = std::stoi(rest.substr(0, slash), &used);
    if (used != slash && slash != std::string::npos) replica = -1;
  } catch (...) {
  }
  if (replica < 0 || slash == std::string::npos)
    return error(404, "no replica '" + rest.substr(0, slash) + "' (see GET /admin/replicas)", "not_found");
  if (req.method != "POST") return wrong_method();
  const auto action = rest.substr(slash + 1);
  if (action == "drain" || action == "resume")
    caf::anon_send(ctx.router, drain_atom_v, replica, action == "drain");
  else if (action == "hang" || action == "recover" || action == "crash")
    caf::anon_send(ctx.router, fault_atom_v, replica, action);
  else
    return error(400, "unknown action '" + action + "'; known: drain, resume, hang, recover, crash", "invalid_value");
  reply(200, R"({"replica":)" + std::to_string(replica) + R"(,"action":")" + action + R"("})");
}

} // namespace troupe
