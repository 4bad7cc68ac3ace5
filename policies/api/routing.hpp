#pragma once
// The routing policy kind: which replica a request goes to. A policy sees a
// plain view of the cluster (each replica's load, readiness, capacity weight
// and how much of this request's prompt it already caches) and returns a
// replica, or declines (no replica can take it: the router answers 503).
// Plain C++: no clock but the view's `now`, no randomness; the server's
// router actor and the simulator run the same policies.

#include "policies/api/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace troupe::policy {

/// One replica as the router knows it (its last load report plus what the
/// router sent it since).
struct replica_view {
  std::uint64_t id = 0;          ///< stable across membership changes (hashing keys on it)
  bool ready = true;             ///< in rotation: loaded, healthy, not draining
  double weight = 1.0;           ///< capacity (a faster device gets more), > 0
  std::int64_t running = 0;      ///< requests being computed
  std::int64_t waiting = 0;      ///< requests queued
  std::int64_t in_flight = 0;    ///< sent by the router, not yet in a load report
  std::int64_t prefill_tokens = 0; ///< prompt tokens queued or still to prefill
  std::int64_t decode_tokens = 0;  ///< tokens its running requests still decode
  std::int64_t in_flight_tokens = 0; ///< prompt tokens of the in-flight requests
  double kv_use = 0.0;           ///< referenced KV blocks / blocks, [0, 1]
  double queue_delay_s = 0.0;    ///< its estimate of a new request's wait
  std::int32_t cached_blocks = 0; ///< leading full blocks of this request's prompt it caches

  auto requests() const -> std::int64_t { return running + waiting + in_flight; }
  auto tokens() const -> std::int64_t { return prefill_tokens + decode_tokens + in_flight_tokens; }
};

/// What a policy may know of the request being routed.
struct route_request {
  bool has_session = false;
  std::uint64_t session = 0;     ///< hash of the session key (x-session-id, user, or the first messages)
  std::int64_t prompt_tokens = 0;
  std::int32_t prompt_blocks = 0; ///< full blocks of the prompt (the most any replica can cache)
  std::int64_t max_tokens = 0;
};

struct route_view {
  double now = 0.0;
  route_request request;
  std::span<const replica_view> replicas;
};

/// route()'s answer when no replica can take the request.
inline constexpr std::size_t no_replica = static_cast<std::size_t>(-1);

class routing_policy {
public:
  virtual ~routing_policy() = default;
  virtual auto name() const -> std::string_view = 0;
  /// An index into v.replicas (one that is ready), or no_replica.
  virtual auto route(const route_view& v) -> std::size_t = 0;
  /// Whether route() reads replica_view::cached_blocks. Counting a prompt's
  /// cached blocks asks every device's prefix cache before each request, so
  /// the server and the simulator count them only for a policy that says so;
  /// for the others the field is 0.
  virtual auto reads_cached_blocks() const -> bool { return false; }
};

} // namespace troupe::policy
