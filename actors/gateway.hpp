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
  gateway(caf::actor_system& sys, server_status& status, std::chrono::nanoseconds stall_timeout);

  /// Until set, completions get 503 "loading" (the model is still loading).
  void set_context(std::shared_ptr<serving_context> ctx);
  /// Handles one request (the http::server's handler).
  void handle(http::request req, std::shared_ptr<http::exchange> client);

private:
  auto context() -> std::shared_ptr<serving_context>;
  auto readiness() const -> std::string; ///< "" when ready, else why not

  caf::actor_system& sys_;
  server_status& status_;
  std::chrono::nanoseconds stall_timeout_;
  std::mutex mutex_;
  std::shared_ptr<serving_context> ctx_;
  std::atomic<std::uint64_t> next_id_{1};
};

} // namespace troupe
