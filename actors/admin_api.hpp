#pragma once
// The admin API (server.admin_api; it takes no API key, for tests):
//   GET /admin/tenants                every tenant's usage
//   GET /admin/replicas               each replica's health and load (the router)
//   POST /admin/replicas/N/ACTION     drain, resume (the router); hang, recover,
//                                     crash (faults injected into its scheduler)
//   GET /admin/autoscaler             the autoscaler's last decision
// Runs on the HTTP server's threads; the answers from actors are waited for.

#include "actors/http/http_server.hpp"

#include <memory>
#include <string>

namespace caf {
class actor_system;
} // namespace caf

namespace troupe {

struct serving_context;
class tenant_registry;

/// Answers a request for `path` (under /admin/). `tenants`: null without
/// tenants; `model`: the one named by ?model=NAME, else the default, null
/// while the models load. `headers` go on the answer.
void handle_admin(caf::actor_system& sys, const std::string& path, const http::request& req,
                  const tenant_registry* tenants, const serving_context* model,
                  const std::shared_ptr<http::exchange>& client, const http::header_list& headers);

} // namespace troupe
