#pragma once
// The HTTP routes: OpenAI's /v1 API, health and metrics. Runs on the HTTP
// server's threads; each completion request gets a sink actor.

#include "actors/http/http_server.hpp"
#include "actors/serving_context.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <mutex>

namespace troupe {

class gateway {
public:
  /// stall_timeout: /health/ready is 503 when requests are queued and no
  /// step has finished for this long.
  /// admin_api: serve /admin/replicas (list, drain, resume, inject faults).
  gateway(caf::actor_system& sys, server_status& status, std::chrono::nanoseconds stall_timeout,
          bool admin_api = false);

  /// Until set, completions get 503 "loading" (the models are still loading).
  void set_fleet(std::shared_ptr<const fleet> f);
  /// Handles one request (the http::server's handler).
  void handle(http::request req, std::shared_ptr<http::exchange> client);

private:
  auto served() -> std::shared_ptr<const fleet>;
  /// "" when ready, else why not: every model (or `model`) has a replica ready.
  auto readiness(const fleet* f, const served_model* model) const -> std::string;
  void admin(const std::string& path, const http::request& req, serving_context& ctx,
             const std::shared_ptr<http::exchange>& client, const http::header_list& headers);

  caf::actor_system& sys_;
  server_status& status_;
  std::chrono::nanoseconds stall_timeout_;
  bool admin_api_ = false;
  std::mutex mutex_;
  std::shared_ptr<const fleet> fleet_;
  std::atomic<std::uint64_t> next_id_{1};
};

} // namespace troupe
