#include "actors/admin_api.hpp"

#include "actors/serving_context.hpp"
#include "service/http/openai/openai_format.hpp"
#include "service/tenancy/tenants.hpp"

#include <caf/all.hpp>

namespace troupe {

void handle_admin(caf::actor_system& sys, const std::string& path, const http::request& req,
                  const tenant_registry* tenants, const serving_context* model,
                  const std::shared_ptr<http::exchange>& client, const http::header_list& headers) {
  const auto reply = [&](int status, std::string body, http::header_list extra = {}) {
    auto h = headers;
    h.emplace_back("Content-Type", "application/json");
    for (auto& e : extra) h.push_back(std::move(e));
    client->respond(status, std::move(h), std::move(body));
  };
  const auto error = [&](int status, std::string message, std::string code, std::string type = "invalid_request_error",
                         http::header_list extra = {}) {
    api::api_error e{status, std::move(message), std::move(type), "", std::move(code)};
    reply(status, api::error_body(e), std::move(extra));
  };
  const auto wrong_method = [&](http::header_list extra = {}) {
    error(405, "method " + req.method + " is not allowed on " + path, "method_not_allowed", "invalid_request_error",
          std::move(extra));
  };
  if (path == "/admin/tenants") {
    if (req.method != "GET" && req.method != "HEAD") return wrong_method({{"Allow", "GET"}});
    if (!tenants) return error(404, "no tenants are configured (server.tenants)", "not_found");
    std::string body = R"({"object":"list","unauthenticated":)" + std::to_string(tenants->unauthenticated()) +
                       R"(,"data":[)";
    bool first = true;
    for (const auto& t : tenants->tenants()) {
      body += (first ? "" : ",") + t->usage_json(steady_now_s());
      first = false;
    }
    return reply(200, body + "]}");
  }
  if (!model) return error(503, "the model is loading", "", "service_unavailable");
  const auto& ctx = *model;
  // An actor's status JSON, "" when it does not answer. (An admin call:
  // blocking this HTTP thread for the answer is fine.)
  const auto status_of = [&](const auto& handle) {
    caf::scoped_actor self{sys};
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
