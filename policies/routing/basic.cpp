#include "policies/routing/basic.hpp"

#include <algorithm>

namespace troupe::policy {

auto round_robin_routing::route(const route_view& v) -> std::size_t {
  const auto n = v.replicas.size();
  for (std::size_t k = 0; k < n; ++k) {
    const auto i = (next_ + k) % n;
    if (v.replicas[i].ready) {
      next_ = i + 1;
      return i;
    }
  }
  return no_replica;
}

auto least_requests_routing::route(const route_view& v) -> std::size_t {
  return least_by(v, [](const replica_view& r) { return r.requests(); }, turn_++);
}

auto least_tokens_routing::route(const route_view& v) -> std::size_t { return least_tokens_in_turn(v, turn_); }

auto weighted_routing::route(const route_view& v) -> std::size_t {
  // Each ready replica gains its weight; the largest current weight wins and
  // pays back the total. Current weights are kept by replica id.
  const auto current = [&](std::uint64_t id) -> double& {
    for (auto& [k, w] : current_)
      if (k == id) return w;
    return current_.emplace_back(id, 0.0).second;
  };
  double total = 0;
  std::size_t best = no_replica;
  for (std::size_t i = 0; i < v.replicas.size(); ++i) {
    const auto& r = v.replicas[i];
    if (!r.ready || !(r.weight > 0)) continue;
    auto& c = current(r.id);
    c += r.weight;
    total += r.weight;
    if (best == no_replica || c > current(v.replicas[best].id)) best = i;
  }
  if (best != no_replica) current(v.replicas[best].id) -= total;
  return best;
}

} // namespace troupe::policy
