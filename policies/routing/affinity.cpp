#include "policies/routing/affinity.hpp"

#include "policies/routing/basic.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::policy {

auto mix64(std::uint64_t x) -> std::uint64_t {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void consistent_hash_routing::rebuild(const route_view& v) {
  std::vector<std::uint64_t> ids;
  for (const auto& r : v.replicas)
    if (r.ready) ids.push_back(r.id);
  std::sort(ids.begin(), ids.end());
  if (ids == members_) return;
  members_ = std::move(ids);
  ring_.clear();
  for (const auto id : members_)
    for (int k = 0; k < virtual_nodes; ++k) ring_.emplace_back(mix64(mix64(id) ^ static_cast<std::uint64_t>(k)), id);
  std::sort(ring_.begin(), ring_.end());
}

auto consistent_hash_routing::route(const route_view& v) -> std::size_t {
  if (!v.request.has_session) return least_tokens_in_turn(v, turn_);
  rebuild(v);
  if (members_.empty()) return no_replica;
  std::int64_t total = 0;
  for (const auto& r : v.replicas)
    if (r.ready) total += r.requests();
  // (+1: at low load one request in flight would otherwise fill a replica
  // and break its sessions' affinity.)
  const auto bound = static_cast<std::int64_t>(
                         std::ceil(load_factor * static_cast<double>(total + 1) / static_cast<double>(members_.size()))) +
                     1;
  const auto index_of = [&](std::uint64_t id) {
    for (std::size_t i = 0; i < v.replicas.size(); ++i)
      if (v.replicas[i].id == id && v.replicas[i].ready) return i;
    return no_replica;
  };
  // Clockwise from the session's point; each replica is asked once.
  const auto start = std::lower_bound(ring_.begin(), ring_.end(), std::pair{mix64(v.request.session), std::uint64_t{0}});
  std::vector<std::uint64_t> asked;
  for (std::size_t k = 0; k < ring_.size() && asked.size() < members_.size(); ++k) {
    const auto& [point, id] = ring_[(static_cast<std::size_t>(start - ring_.begin()) + k) % ring_.size()];
    if (std::find(asked.begin(), asked.end(), id) != asked.end()) continue;
    asked.push_back(id);
    const auto i = index_of(id);
    if (i != no_replica && v.replicas[i].requests() < bound) return i;
  }
  return least_by(v, [](const replica_view& r) { return r.requests(); }); // (the bound always admits one)
}

auto prefix_affinity_routing::route(const route_view& v) -> std::size_t {
  const auto least = least_tokens_in_turn(v, turn_);
  if (least == no_replica || v.request.prompt_blocks <= 0) return least;
  double total = 0, busiest = 0;
  std::int32_t best_match = 0;
  int ready = 0;
  for (const auto& r : v.replicas) {
    if (!r.ready) continue;
    ++ready;
    total += static_cast<double>(r.tokens());
    busiest = std::max(busiest, static_cast<double>(r.tokens()));
    best_match = std::max(best_match, r.cached_blocks);
  }
  if (best_match == 0) return least; // nobody holds any of it: balance the load
  std::size_t best = no_replica;
  double best_score = 0;
  for (std::size_t i = 0; i < v.replicas.size(); ++i) {
    const auto& r = v.replicas[i];
    if (!r.ready) continue;
    const double hit = static_cast<double>(std::min(r.cached_blocks, v.request.prompt_blocks)) / v.request.prompt_blocks;
    const double load = busiest > 0 ? static_cast<double>(r.tokens()) / busiest : 0.0;
    const double score = hit - load_weight * load - kv_weight * r.kv_use;
    if (best == no_replica || score > best_score) best = i, best_score = score;
  }
  // The load bound: affinity may not pile work on one replica.
  const double mean = total / ready;
  const double slack = static_cast<double>(v.request.prompt_tokens);
  if (static_cast<double>(v.replicas[best].tokens()) > max_over_mean * mean + slack) return least;
  return best;
}

} // namespace troupe::policy
