#include "engine/core/router_core.hpp"

#include "base/check.hpp"

#include <algorithm>

namespace troupe {

router_core::router_core(std::unique_ptr<policy::routing_policy> policy, std::size_t replicas,
                         std::vector<double> weights, health_options health)
  : policy_(std::move(policy)), health_options_(health) {
  TROUPE_CHECK(policy_ != nullptr, "a router without a policy");
  TROUPE_CHECK(health.unhealthy_after >= 1 && health.healthy_after >= 1, "health thresholds must be >= 1");
  for (std::size_t i = 0; i < replicas; ++i) join(add_replica(i < weights.size() ? weights[i] : 1.0));
}

auto router_core::add_replica(double weight) -> std::size_t {
  const auto i = views_.size();
  views_.emplace_back();
  views_[i].id = i;
  views_[i].weight = weight;
  views_[i].ready = false;
  books_.emplace_back();
  return i;
}

void router_core::join(std::size_t replica, bool draining, bool probation) {
  while (replica >= views_.size()) add_replica();
  // A slot used before (a replica stopped, then started again) starts
  // afresh: its new scheduler counts submissions from 0. Its checks' counts
  // (ever) stay.
  const auto weight = views_[replica].weight;
  views_[replica] = {};
  views_[replica].id = replica;
  views_[replica].weight = weight;
  auto& b = books_[replica];
  auto h = b.health;
  b = {};
  h.joined = h.alive = true;
  h.healthy = !probation;
  h.draining = draining;
  h.failures = h.successes = 0;
  b.health = h;
  update_ready(replica);
}

void router_core::set_dead(std::size_t replica) {
  books_.at(replica).health.alive = false;
  update_ready(replica);
}

void router_core::set_draining(std::size_t replica, bool draining) {
  books_.at(replica).health.draining = draining;
  update_ready(replica);
}

auto router_core::record_check(std::size_t replica, bool passed) -> health_change {
  auto& h = books_.at(replica).health;
  ++h.checks;
  const bool was = h.healthy;
  if (passed) {
    h.failures = 0;
    ++h.successes;
    if (!h.healthy && h.successes >= health_options_.healthy_after) h.healthy = true;
  } else {
    ++h.failed_checks;
    h.successes = 0;
    ++h.failures;
    if (h.healthy && h.failures >= health_options_.unhealthy_after) h.healthy = false;
  }
  update_ready(replica);
  if (was == h.healthy) return health_change::none;
  return h.healthy ? health_change::back : health_change::out;
}

void router_core::update_ready(std::size_t replica) {
  const auto& h = books_[replica].health;
  views_[replica].ready = h.joined && h.alive && !h.draining && h.healthy;
}

auto router_core::route(const policy::route_request& q, double now, std::span<const std::int32_t> cached,
                        std::span<const std::int32_t> avoid) -> std::size_t {
  for (std::size_t k = 0; k < views_.size(); ++k) {
    views_[k].cached_blocks = k < cached.size() ? cached[k] : 0;
    // Routes older than the TTL that no report covered were abandoned.
    auto& b = books_[k];
    const auto before = b.recent.size();
    while (!b.recent.empty() && b.recent.front().first < now - in_flight_ttl_s) {
      b.recent_tokens -= b.recent.front().second;
      b.recent.pop_front();
    }
    if (b.recent.size() != before) update_in_flight(k);
  }
  for (const auto a : avoid)
    if (a >= 0 && static_cast<std::size_t>(a) < views_.size()) views_[static_cast<std::size_t>(a)].ready = false;
  const auto i = policy_->route({now, q, views_});
  for (const auto a : avoid)
    if (a >= 0 && static_cast<std::size_t>(a) < views_.size()) update_ready(static_cast<std::size_t>(a));
  if (i == policy::no_replica) return i;
  TROUPE_CHECK(i < views_.size() && views_[i].ready, "the routing policy chose a replica out of rotation");
  const auto tokens = static_cast<std::uint64_t>(std::max<std::int64_t>(q.prompt_tokens, 0));
  auto& b = books_[i];
  ++b.routed;
  b.routed_tokens += tokens;
  b.recent.emplace_back(now, tokens);
  b.recent_tokens += tokens;
  update_in_flight(i);
  return i;
}

// In flight: routed but not yet received by the replica, as its last report
// counts them, and at most what was routed within the TTL.
void router_core::update_in_flight(std::size_t i) {
  auto& v = views_[i];
  const auto& b = books_[i];
  v.in_flight = static_cast<std::int64_t>(
      std::min<std::uint64_t>(b.routed - std::min(b.routed, b.report.submitted), b.recent.size()));
  v.in_flight_tokens = static_cast<std::int64_t>(std::min<std::uint64_t>(
      b.routed_tokens - std::min(b.routed_tokens, b.report.submitted_tokens), b.recent_tokens));
}

void router_core::count_submission(std::size_t replica, std::int64_t prompt_tokens) {
  auto& b = books_.at(replica);
  ++b.routed;
  b.routed_tokens += static_cast<std::uint64_t>(std::max<std::int64_t>(prompt_tokens, 0));
  update_in_flight(replica);
}

void router_core::report(std::size_t replica, const replica_report& r) {
  auto& v = views_.at(replica);
  books_[replica].report = r;
  v.running = r.running;
  v.waiting = r.waiting;
  v.prefill_tokens = r.prefill_tokens;
  v.decode_tokens = r.decode_tokens;
  v.kv_use = r.kv_use;
  update_in_flight(replica);
}

auto router_core::num_ready() const -> std::size_t {
  return static_cast<std::size_t>(std::count_if(views_.begin(), views_.end(), [](const auto& v) { return v.ready; }));
}

} // namespace troupe
