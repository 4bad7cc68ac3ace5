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
  double queue_age_s = 0;             ///< the oldest waiting request's wait (0: none waits)
  // For its metrics on the router node when it runs elsewhere (a worker's):
  std::int64_t swapped = 0;           ///< preempted by swap, their KV in host memory
  std::int64_t num_preemptions = 0, num_swap_outs = 0; ///< ever
  std::int64_t forked_tokens = 0; ///< ever: prompt tokens a choice of n shared instead of computing
  std::int64_t jump_forward_tokens = 0; ///< ever: tokens a grammar forced, appended without a step
  std::uint64_t steps = 0;              ///< ever: steps finished (a health check's sign of life)
};

/// When a replica leaves and rejoins rotation on its health checks.
struct health_options {
  std::int32_t unhealthy_after = 3; ///< consecutive failed checks take it out
  std::int32_t healthy_after = 2;   ///< consecutive passed checks bring it back
};

/// A replica's health as the router sees it: in rotation when joined,
/// alive, not draining and healthy.
struct replica_health {
  bool joined = false;   ///< loaded and known to the router
  bool alive = false;    ///< its actor runs (false once it died)
  bool draining = false; ///< takes no new requests; the ones it has finish
  bool healthy = true;   ///< its checks pass (false after unhealthy_after failures)
  std::int32_t failures = 0, successes = 0; ///< consecutive, the current run
  std::uint64_t checks = 0, failed_checks = 0; ///< ever
};

/// What a check's result did to a replica's place in rotation.
enum class health_change : std::uint8_t { none, out, back };

class router_core {
public:
  /// A route not covered by a report within this long is taken as abandoned
  /// (its client left before the submission): no longer in flight.
  static constexpr double in_flight_ttl_s = 10.0;

  /// `weights`: capacity per replica (empty: all 1). The `replicas` are
  /// joined and alive from the start (loaded before the router runs).
  router_core(std::unique_ptr<policy::routing_policy> policy, std::size_t replicas, std::vector<double> weights = {},
              health_options health = {});

  /// The policy's replica for the request (counted as in flight to it), or
  /// policy::no_replica when none can take it. `cached`: per replica, the
  /// prompt's leading blocks its cache holds (empty: unknown, 0 for all).
  /// `avoid`: replicas not to use this time (where the request just failed).
  auto route(const policy::route_request& q, double now, std::span<const std::int32_t> cached = {},
             std::span<const std::int32_t> avoid = {}) -> std::size_t;
  void report(std::size_t replica, const replica_report& r);
  /// A submission the router itself made (a health check), which the
  /// replica's reports will count: so that it is not taken for a route.
  void count_submission(std::size_t replica, std::int64_t prompt_tokens);
  /// A new replica slot (not in rotation until join), e.g. one the
  /// autoscaler starts or a remote worker's; returns its index.
  auto add_replica(double weight = 1.0) -> std::size_t;
  /// The replica is loaded: in rotation (or, draining, out of it at once:
  /// a warm-pool replica), healthy, its counts reset. Grows the replicas to
  /// fit `replica` when it is new. On `probation` (a worker's replica,
  /// joining or rejoining over the network) it starts unhealthy: in
  /// rotation only after healthy_after consecutive passed checks.
  void join(std::size_t replica, bool draining = false, bool probation = false);
  /// Its actor died (or its worker left): out for good, until a new join.
  void set_dead(std::size_t replica);
  /// Draining replicas take no new requests.
  void set_draining(std::size_t replica, bool draining);
  /// One health check's outcome; out after unhealthy_after consecutive
  /// failures, back after healthy_after consecutive passes.
  auto record_check(std::size_t replica, bool passed) -> health_change;
  auto health(std::size_t replica) const -> const replica_health& { return books_.at(replica).health; }
  auto view(std::size_t replica) const -> const policy::replica_view& { return views_.at(replica); }
  auto report_of(std::size_t replica) const -> const replica_report& { return books_.at(replica).report; }
  auto num_replicas() const -> std::size_t { return views_.size(); }
  auto num_ready() const -> std::size_t;

private:
  std::unique_ptr<policy::routing_policy> policy_;
  health_options health_options_;
  std::vector<policy::replica_view> views_; ///< what the policy reads (contiguous)
  /// The rest of a replica's bookkeeping, beside its view.
  struct book {
    replica_health health;
    std::uint64_t routed = 0, routed_tokens = 0; ///< since it joined
    replica_report report;                       ///< its last
    /// The routes of the last in_flight_ttl_s: (time, prompt tokens), and their tokens' sum.
    std::deque<std::pair<double, std::uint64_t>> recent;
    std::uint64_t recent_tokens = 0;
  };
  std::vector<book> books_;
  void update_in_flight(std::size_t replica);
  void update_ready(std::size_t replica);
};

} // namespace troupe
