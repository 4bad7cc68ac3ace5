#pragma once
// The router's bookkeeping, as plain C++ (the router actor owns one): each
// replica's last load report, what was routed to it since (in flight), its
// readiness, and the routing policy that chooses among them.

#include "policies/api/routing.hpp"

#include <cstdint>
#include <deque>
#include <utility>
#include <memory>
#include <span>
#include <vector>

namespace troupe {

/// A replica's load as its scheduler reports it after each step.
struct replica_report {
  std::int64_t running = 0, waiting = 0;
  std::int64_t prefill_tokens = 0, decode_tokens = 0;
  double kv_use = 0;
  std::uint64_t submitted = 0;        ///< submissions it has received, ever
  std::uint64_t submitted_tokens = 0; ///< their prompt tokens
};

class router_core {
public:
  /// A route not covered by a report within this long is taken as abandoned
  /// (its client left before the submission): no longer in flight.
  static constexpr double in_flight_ttl_s = 10.0;

  /// `weights`: capacity per replica (empty: all 1).
  router_core(std::unique_ptr<policy::routing_policy> policy, std::size_t replicas, std::vector<double> weights = {});

  /// The policy's replica for the request (counted as in flight to it), or
  /// policy::no_replica when none can take it. `cached`: per replica, the
  /// prompt's leading blocks its cache holds (empty: unknown, 0 for all).
  auto route(const policy::route_request& q, double now, std::span<const std::int32_t> cached = {}) -> std::size_t;
  void report(std::size_t replica, const replica_report& r);
  /// In or out of rotation (a replica that died, hangs or drains is out;
  /// the server's health checks, still to come, will call it).
  void set_ready(std::size_t replica, bool ready);
  auto view(std::size_t replica) const -> const policy::replica_view& { return views_.at(replica); }
  auto num_replicas() const -> std::size_t { return views_.size(); }
  auto num_ready() const -> std::size_t;

private:
  std::unique_ptr<policy::routing_policy> policy_;
  std::vector<policy::replica_view> views_;
  std::vector<std::uint64_t> routed_, routed_tokens_; ///< ever, per replica
  std::vector<replica_report> reports_;
  /// Per replica, the routes of the last in_flight_ttl_s: (time, prompt tokens).
  std::vector<std::deque<std::pair<double, std::uint64_t>>> recent_;
  std::vector<std::uint64_t> recent_tokens_; ///< the sum of each recent_'s tokens
  void update_in_flight(std::size_t replica);
};

} // namespace troupe
