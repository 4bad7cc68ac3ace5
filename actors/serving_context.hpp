#pragma once
// What every request's sink and the gateway share for the server's life:
// the model's facts, the actor handles, the metrics and a few counters.

#include "actors/interfaces.hpp"
#include "actors/metrics.hpp"
#include "service/request/model_profile.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace troupe {

/// A served model version: its profile (what each request's session reads)
/// and the actors that serve it.
struct serving_context : model_profile {
  std::vector<tokenizer_actor> tokenizers;
  router_actor router; ///< picks each request's replica (and knows their schedulers)
  autoscaler_actor autoscaler; ///< invalid without one
  /// Replicas in the router's rotation (kept by the router).
  std::shared_ptr<std::atomic<std::int32_t>> num_ready = std::make_shared<std::atomic<std::int32_t>>(0);
  server_metrics* metrics = nullptr;

  std::atomic<std::uint64_t> next_tokenizer{0};
  std::atomic<std::uint64_t> next_big_tokenizer{0};
  std::atomic<request_id> next_request{1};

  /// Jobs over this many bytes are big: they take turns on their own share
  /// of the tokenizers.
  static constexpr std::size_t big_job_bytes = 64 << 10;

  /// A tokenizer for a job of `bytes`, in turn (replicas: the router). Big
  /// jobs use the first half of the pool (at least one), the others the rest,
  /// so a flood of huge prompts never holds every tokenizer while small
  /// requests wait (with one tokenizer, they share it).
  auto pick_tokenizer(std::size_t bytes) -> const tokenizer_actor& {
    const std::size_t n = tokenizers.size(), big = n < 2 ? n : n / 2;
    if (bytes > big_job_bytes) return tokenizers[next_big_tokenizer.fetch_add(1, std::memory_order_relaxed) % big];
    return tokenizers[n < 2 ? 0 : big + next_tokenizer.fetch_add(1, std::memory_order_relaxed) % (n - big)];
  }
};

/// A model name clients use: its stable version and, when configured, a new
/// version taking canary_percent of its sessions.
struct served_model {
  std::string name;
  std::shared_ptr<serving_context> stable, canary;
  std::int32_t canary_percent = 0;

  /// The version for a session: the same every time for one session (a
  /// hash of it picks), the canary only while it has a replica ready.
  auto pick(std::uint64_t session) const -> const std::shared_ptr<serving_context>& {
    if (!canary || canary->num_ready->load(std::memory_order_relaxed) <= 0) return stable;
    const auto h = (session ^ (session >> 31)) * 0x9e3779b97f4a7c15ull;
    return (h >> 32) % 100 < static_cast<std::uint64_t>(canary_percent) ? canary : stable;
  }
  auto ready() const -> bool {
    return stable->num_ready->load(std::memory_order_relaxed) > 0 ||
           (canary && canary->num_ready->load(std::memory_order_relaxed) > 0);
  }
};

/// Capability routing: a name of its own whose requests go to a small or a
/// large served model by their prompt length, max_tokens or tier.
struct capability_route : capability_split {
  std::string name;
  const served_model* small = nullptr;
  const served_model* large = nullptr;
};

/// Every model a server serves ([0]: the default, for requests that name
/// none) and its capability routes.
struct fleet {
  std::vector<served_model> models;
  std::vector<capability_route> routes;

  auto find(std::string_view name) const -> const served_model* {
    for (const auto& m : models)
      if (m.name == name) return &m;
    return nullptr;
  }
  auto find_route(std::string_view name) const -> const capability_route* {
    for (const auto& r : routes)
      if (r.name == name) return &r;
    return nullptr;
  }
};

/// The server's liveness facts, read by /health and the drain logic.
struct server_status {
  std::atomic<bool> ready{false};    ///< the model is loaded and actors run
  std::atomic<bool> draining{false}; ///< SIGTERM received: no new requests
  /// server.drain_timeout_s passed: the replicas stop, and the requests they
  /// still serve end as cut off by the shutdown (not as replica failures).
  std::atomic<bool> stopping{false};
  std::atomic<std::int64_t> num_live_requests{0};  ///< sinks alive
  std::atomic<std::int64_t> num_queued{0};          ///< waiting + running, all replicas
  /// Steady clock of the last finished step, or of the moment work arrived
  /// with none queued: a stall counts from whichever came later, so a request
  /// reaching an idle server does not read as one.
  std::atomic<std::int64_t> last_progress_ns{0};
};

} // namespace troupe
