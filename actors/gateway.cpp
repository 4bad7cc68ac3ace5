#include "actors/gateway.hpp"

#include "actors/http/openai_api.hpp"
#include "actors/sink_actor.hpp"

#include <caf/all.hpp>

namespace troupe {

gateway::gateway(caf::actor_system& sys, server_status& status, std::chrono::nanoseconds stall_timeout,
                 bool admin_api)
  : sys_(sys), status_(status), stall_timeout_(stall_timeout), admin_api_(admin_api) {}

void gateway::set_fleet(std::shared_ptr<const fleet> f) {
  std::lock_guard lock(mutex_);
  fleet_ = std::move(f);
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
    if (now - last > stall_timeout_) return "stalled";
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
  if (path == "/v1/models") {
    if (!get) return wrong_method("GET");
    if (!fl) return error(503, "the model is loading", "service_unavailable");
    std::vector<api::model_card> cards;
    for (const auto& m : fl->models) cards.push_back({m.name, m.stable->max_model_len});
    for (const auto& r : fl->routes) cards.push_back({r.name, r.large->stable->max_model_len});
    return reply(200, "application/json", api::models_list(cards, 0));
  }
  if (path.starts_with("/admin/")) {
    if (!admin_api_) return error(404, "no route for " + path, "invalid_request_error", "", "not_found");
    if (!fl) return error(503, "the model is loading", "service_unavailable");
    return admin(path, req, named ? *named->stable : *fl->models.front().stable, client, headers);
  }
  const bool completions = path == "/v1/completions";
  if (!completions && path != "/v1/chat/completions")
    return error(404, "no route for " + path, "invalid_request_error", "", "not_found");
  if (!post) return wrong_method("POST");
  if (status_.draining.load()) return error(503, "the server is shutting down", "service_unavailable");
  if (!fl || !status_.ready.load()) return error(503, "the model is loading", "service_unavailable");

  const auto kind = completions ? api::endpoint::completions : api::endpoint::chat;
  auto parsed = api::parse_request(kind, req.body, dflt->defaults);
  if (auto* e = std::get_if<api::api_error>(&parsed)) return reply(e->status, "application/json", api::error_body(*e));
  // The model: named (a served one, or a capability route), else the default.
  const served_model* model = &fl->models.front();
  const capability_route* route = nullptr;
  if (const auto& name = std::get<api::completion_request>(parsed).model; !name.empty()) {
    model = fl->find(name);
    if (!model && (route = fl->find_route(name))) model = route->small; // (decided once the prompt is encoded)
    if (!model) {
      std::string known;
      for (const auto& m : fl->models) known += (known.empty() ? "'" : ", '") + m.name + "'";
      for (const auto& r : fl->routes) known += ", '" + r.name + "'";
      return error(400, "the model '" + name + "' does not exist; this server serves " + known,
                   "invalid_request_error", "model", "model_not_found");
    }
  }
  // Parsed again with its own generation defaults when they differ.
  if (model->stable.get() != dflt && !(model->stable->defaults == dflt->defaults)) {
    parsed = api::parse_request(kind, req.body, model->stable->defaults);
    if (auto* e = std::get_if<api::api_error>(&parsed)) return reply(e->status, "application/json", api::error_body(*e));
  }
  auto& body = std::get<api::completion_request>(parsed);
  // The session key: x-session-id, else the OpenAI user, else the
  // conversation's opening (its messages up to the first user message, which
  // every later turn repeats; or the prompt's start).
  sink_request sr;
  sr.body = std::move(body);
  sr.request_id = request_id;
  sr.headers = headers;
  sr.arrival = arrival;
  std::string key = req.header("x-session-id");
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
  std::erase_if(sr.headers, [](const auto& h) { return h.first == "x-model-version"; });
  if (route) {
    sr.route = route;
    sr.served = fl;
    sr.tier = req.header("x-troupe-tier");
  } else {
    sr.headers.emplace_back("x-model-version", ctx->model_version);
  }
  spawn_sink(sys_, std::move(ctx), &status_, std::move(client), std::move(sr));
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
