#include "engine/router_core.hpp"

#include "engine/check.hpp"

#include <algorithm>

namespace troupe {

router_core::router_core(std::unique_ptr<policy::routing_policy> policy, std::size_t replicas,
                         std::vector<double> weights)
  : policy_(std::move(policy)), views_(replicas), routed_(replicas, 0), routed_tokens_(replicas, 0), reports_(replicas),
    recent_(replicas), recent_tokens_(replicas, 0) {
  TROUPE_CHECK(policy_ != nullptr, "a router without a policy");
  for (std::size_t i = 0; i < replicas; ++i) {
    views_[i].id = i;
    views_[i].weight = i < weights.size() ? weights[i] : 1.0;
  }
}

auto router_core::route(const policy::route_request& q, double now, std::span<const std::int32_t> cached)
    -> std::size_t {
  for (std::size_t k = 0; k < views_.size(); ++k) {
    views_[k].cached_blocks = k < cached.size() ? cached[k] : 0;
    // Routes older than the TTL that no report covered were abandoned.
    auto& r = recent_[k];
    const auto before = r.size();
    while (!r.empty() && r.front().first < now - in_flight_ttl_s) {
      recent_tokens_[k] -= r.front().second;
      r.pop_front();
    }
    if (r.size() != before) update_in_flight(k);
  }
  const auto i = policy_->route({now, q, views_});
  if (i == policy::no_replica) return i;
  TROUPE_CHECK(i < views_.size() && views_[i].ready, "the routing policy chose a replica out of rotation");
  const auto tokens = static_cast<std::uint64_t>(std::max<std::int64_t>(q.prompt_tokens, 0));
  ++routed_[i];
  routed_tokens_[i] += tokens;
  recent_[i].emplace_back(now, tokens);
  recent_tokens_[i] += tokens;
  update_in_flight(i);
  return i;
}

// In flight: routed but not yet received by the replica, as its last report
// counts them, and at most what was routed within the TTL.
void router_core::update_in_flight(std::size_t i) {
  auto& v = views_[i];
  v.in_flight = static_cast<std::int64_t>(
      std::min<std::uint64_t>(routed_[i] - std::min(routed_[i], reports_[i].submitted), recent_[i].size()));
  v.in_flight_tokens = static_cast<std::int64_t>(std::min<std::uint64_t>(
      routed_tokens_[i] - std::min(routed_tokens_[i], reports_[i].submitted_tokens), recent_tokens_[i]));
}

void router_core::report(std::size_t replica, const replica_report& r) {
  auto& v = views_.at(replica);
  reports_[replica] = r;
  v.running = r.running;
  v.waiting = r.waiting;
  v.prefill_tokens = r.prefill_tokens;
  v.decode_tokens = r.decode_tokens;
  v.kv_use = r.kv_use;
  update_in_flight(replica);
}

void router_core::set_ready(std::size_t replica, bool ready) { views_.at(replica).ready = ready; }

auto router_core::num_ready() const -> std::size_t {
  return static_cast<std::size_t>(std::count_if(views_.begin(), views_.end(), [](const auto& v) { return v.ready; }));
}

} // namespace troupe
