#pragma once
// The load-based routing policies: round_robin, least_requests, least_tokens, weighted.

#include "policies/api/routing.hpp"

#include <utility>
#include <vector>

namespace troupe::policy {

/// Ready replicas in turn.
class round_robin_routing final : public routing_policy {
public:
  auto name() const -> std::string_view override { return "round_robin"; }
  auto route(const route_view& v) -> std::size_t override;

private:
  std::size_t next_ = 0;
};

/// Fewest requests running, queued and in flight (ties taken in turn).
class least_requests_routing final : public routing_policy {
public:
  auto name() const -> std::string_view override { return "least_requests"; }
  auto route(const route_view& v) -> std::size_t override;

private:
  std::size_t turn_ = 0;
};

/// Least token work: queued prefill tokens plus active decode tokens plus
/// the prompt tokens in flight to it (ties taken in turn).
class least_tokens_routing final : public routing_policy {
public:
  auto name() const -> std::string_view override { return "least_tokens"; }
  auto route(const route_view& v) -> std::size_t override;

private:
  std::size_t turn_ = 0;
};

/// By capacity: smooth weighted round robin (nginx's), so that a replica of
/// weight 2 gets two requests for every one of a replica of weight 1,
/// interleaved; a replica falling out of rotation just stops being chosen.
class weighted_routing final : public routing_policy {
public:
  auto name() const -> std::string_view override { return "weighted"; }
  auto route(const route_view& v) -> std::size_t override;

private:
  std::vector<std::pair<std::uint64_t, double>> current_; ///< (replica id, current weight)
};

/// The ready replica with the smallest key(r), or no_replica. Ties go to the
/// first from index `turn` on (callers advance it, so that an idle cluster's
/// requests are spread, not all sent to replica 0).
template <class Key>
auto least_by(const route_view& v, Key key, std::size_t turn = 0) -> std::size_t {
  std::size_t best = no_replica;
  const auto n = v.replicas.size();
  for (std::size_t k = 0; k < n; ++k) {
    const auto i = (turn + k) % n;
    if (v.replicas[i].ready && (best == no_replica || key(v.replicas[i]) < key(v.replicas[best]))) best = i;
  }
  return best;
}

/// least_by on token work, ties in turn: the fallback of the affinity policies too.
inline auto least_tokens_in_turn(const route_view& v, std::size_t& turn) -> std::size_t {
  return least_by(v, [](const replica_view& r) { return r.tokens(); }, turn++);
}

} // namespace troupe::policy
