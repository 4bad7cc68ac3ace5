#pragma once
// The routing policies that keep work where its state is: consistent_hash
// (session affinity) and prefix_affinity (KV locality), both with a load
// bound so that affinity never makes a hotspot.

#include "policies/api/routing.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace troupe::policy {

/// Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam
/// 2018): a session's requests go to the first replica clockwise from the
/// session's hash on a ring of virtual nodes whose load (requests) is under
/// ceil(c · (total + 1) / ready replicas) + 1; when replicas come and go only the
/// sessions of the ring arcs that changed move. Requests with no session go
/// to the replica with the least token work.
class consistent_hash_routing final : public routing_policy {
public:
  static constexpr int virtual_nodes = 160;
  static constexpr double load_factor = 1.25; ///< c: no replica above 1.25x the mean (+1)

  auto name() const -> std::string_view override { return "consistent_hash"; }
  auto route(const route_view& v) -> std::size_t override;

private:
  void rebuild(const route_view& v);
  std::size_t turn_ = 0;
  std::vector<std::uint64_t> members_;                    ///< the ready replica ids the ring holds
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ring_; ///< (point, replica id), sorted
};

/// KV locality: the replica caching the longest prefix of the prompt, its
/// hit fraction weighed against its queue and KV pressure; when that replica
/// carries over 1.5x the mean token work (+ one request's worth), or no
/// replica caches anything, the least loaded one instead.
class prefix_affinity_routing final : public routing_policy {
public:
  static constexpr double load_weight = 0.5;  ///< per unit of token work relative to the busiest
  static constexpr double kv_weight = 0.25;   ///< per unit of KV use
  static constexpr double max_over_mean = 1.5;

  auto name() const -> std::string_view override { return "prefix_affinity"; }
  auto route(const route_view& v) -> std::size_t override;
  auto reads_cached_blocks() const -> bool override { return true; }

private:
  std::size_t turn_ = 0;
};

/// splitmix64's finaliser: the hash both policies place keys and replicas with.
auto mix64(std::uint64_t x) -> std::uint64_t;

} // namespace troupe::policy
