// The routing policies on hand-built cluster views.

#include "policies/registry.hpp"
#include "policies/routing/affinity.hpp"
#include "policies/routing/basic.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

using namespace troupe::policy;

namespace {

auto cluster(int n) -> std::vector<replica_view> {
  std::vector<replica_view> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)].id = 100 + static_cast<std::uint64_t>(i);
  return v;
}

auto view(const std::vector<replica_view>& r, route_request q = {}) -> route_view { return {0.0, q, r}; }

auto session(std::uint64_t s) -> route_request {
  route_request q;
  q.has_session = true;
  q.session = s;
  q.prompt_tokens = 100;
  return q;
}

} // namespace

TEST_CASE("every built-in is registered by name; an unknown name lists them") {
  CHECK(routing_policy_names() ==
        std::vector<std::string>{"round_robin", "least_requests", "least_tokens", "consistent_hash", "prefix_affinity", "weighted"});
  for (const auto& n : routing_policy_names()) CHECK(make_routing_policy(n)->name() == n);
  CHECK_THROWS_WITH_AS(make_routing_policy("random"),
                       "unknown routing policy 'random' (known: round_robin, least_requests, least_tokens, "
                       "consistent_hash, prefix_affinity, weighted)",
                       std::invalid_argument);
}

TEST_CASE("with no replica ready every policy declines") {
  auto r = cluster(3);
  for (auto& x : r) x.ready = false;
  for (const auto& n : routing_policy_names()) {
    CAPTURE(n);
    auto p = make_routing_policy(n);
    CHECK(p->route(view(r, session(7))) == no_replica);
    CHECK(p->route(view(r)) == no_replica);
    CHECK(p->route(view({})) == no_replica);
  }
}

TEST_CASE("round_robin takes the ready replicas in turn") {
  auto r = cluster(4);
  r[2].ready = false;
  round_robin_routing p;
  std::vector<std::size_t> got;
  for (int i = 0; i < 6; ++i) got.push_back(p.route(view(r)));
  CHECK(got == std::vector<std::size_t>{0, 1, 3, 0, 1, 3});
}

TEST_CASE("least_requests and least_tokens count what the router has in flight") {
  auto r = cluster(3);
  r[0].running = 3;
  r[1].running = 1;
  r[1].in_flight = 3; // sent but not yet reported: counts
  r[2].waiting = 2;
  CHECK(least_requests_routing().route(view(r)) == 2);
  r[0].prefill_tokens = 10;
  r[0].decode_tokens = 20;
  r[1].prefill_tokens = 500;
  r[2].decode_tokens = 10;
  r[2].in_flight_tokens = 25;
  CHECK(least_tokens_routing().route(view(r)) == 0); // 30 against 500 and 35
  r[0].ready = false;
  CHECK(least_tokens_routing().route(view(r)) == 2);
  // Ties: the lowest index.
  auto t = cluster(3);
  CHECK(least_tokens_routing().route(view(t)) == 0);
}

TEST_CASE("weighted gives each replica its share, interleaved") {
  auto r = cluster(3);
  r[0].weight = 2;
  weighted_routing p;
  std::map<std::size_t, int> count;
  std::size_t last = no_replica;
  int run = 0, longest = 0;
  for (int i = 0; i < 400; ++i) {
    const auto k = p.route(view(r));
    ++count[k];
    run = k == last ? run + 1 : 1;
    longest = std::max(longest, run);
    last = k;
  }
  CHECK(count[0] == 200);
  CHECK(count[1] == 100);
  CHECK(count[2] == 100);
  CHECK(longest <= 2);
  r[0].ready = false; // out of rotation: the others share
  count.clear();
  for (int i = 0; i < 100; ++i) ++count[p.route(view(r))];
  CHECK(count[1] == 50);
  CHECK(count[2] == 50);
}

TEST_CASE("consistent_hash keeps a session on its replica, spreads sessions, and moves few when replicas change") {
  auto r = cluster(4);
  consistent_hash_routing p;
  std::map<std::uint64_t, std::size_t> home;
  std::map<std::size_t, int> per;
  for (std::uint64_t s = 0; s < 2000; ++s) {
    home[s] = p.route(view(r, session(s)));
    ++per[home[s]];
    // A conversation's later turns: the same replica.
    CHECK(p.route(view(r, session(s))) == home[s]);
  }
  for (const auto& [k, n] : per) CHECK(n > 350); // of 2000 over 4: none starved (loads are all 0 here)
  // A fifth replica joins: only sessions that now map to it move.
  auto r5 = cluster(5);
  int moved = 0;
  for (std::uint64_t s = 0; s < 2000; ++s) {
    const auto k = p.route(view(r5, session(s)));
    if (r5[k].id != r[home[s]].id) {
      ++moved;
      CHECK(r5[k].id == 104);
    }
  }
  CHECK(moved > 200);
  CHECK(moved < 600); // about 1/5 of 2000
  // Replica 101 leaves rotation: only its sessions move.
  r[1].ready = false;
  for (std::uint64_t s = 0; s < 2000; ++s) {
    const auto k = p.route(view(r, session(s)));
    if (home[s] != 1) CHECK(k == home[s]);
    else CHECK(k != 1);
  }
}

TEST_CASE("consistent_hash bounds the load: a hot session's replica at the bound sends it on") {
  auto r = cluster(4);
  consistent_hash_routing p;
  const auto first = p.route(view(r, session(42)));
  // Its replica carries 10 requests, the others none: the bound is ceil(1.25 * 11 / 4) + 1 = 5.
  r[first].running = 10;
  const auto next = p.route(view(r, session(42)));
  CHECK(next != first);
  CHECK(r[next].requests() < 5);
  // Many requests of one hot session: no replica goes past the bound.
  auto c = cluster(4);
  for (int i = 0; i < 400; ++i) {
    const auto k = p.route(view(c, session(7)));
    std::int64_t total = 0;
    for (const auto& x : c) total += x.requests();
    CHECK(c[k].requests() < static_cast<std::int64_t>(std::ceil(1.25 * static_cast<double>(total + 1) / 4)) + 1);
    ++c[k].in_flight;
  }
  std::int64_t most = 0;
  for (const auto& x : c) most = std::max(most, x.requests());
  CHECK(most <= 126);
  // Without a session: the least token work.
  auto t = cluster(3);
  t[0].prefill_tokens = 50;
  t[2].decode_tokens = 10;
  CHECK(p.route(view(t)) == 1);
}

TEST_CASE("prefix_affinity goes to the replica caching the prompt, and falls back under load") {
  auto r = cluster(4);
  route_request q;
  q.prompt_tokens = 320;
  q.prompt_blocks = 20;
  r[2].cached_blocks = 18;
  r[1].cached_blocks = 4;
  for (auto& x : r) x.decode_tokens = 1000;
  prefix_affinity_routing p;
  CHECK(p.route(view(r, q)) == 2);
  // A longer match on a somewhat busier replica still wins...
  r[2].prefill_tokens = 300;
  CHECK(p.route(view(r, q)) == 2);
  // ...but not past 1.5x the mean load (plus the request's own tokens): the least loaded instead.
  r[2].prefill_tokens = 4000;
  r[3].decode_tokens = 500;
  CHECK(p.route(view(r, q)) == 3);
  // Nobody caches any of it: the least loaded.
  for (auto& x : r) x.cached_blocks = 0;
  CHECK(p.route(view(r, q)) == 3);
  // KV pressure weighs against a match of equal length.
  auto e = cluster(2);
  e[0].cached_blocks = e[1].cached_blocks = 10;
  e[0].kv_use = 0.95;
  e[1].kv_use = 0.10;
  q.prompt_blocks = 10;
  CHECK(p.route(view(e, q)) == 1);
}

TEST_CASE("prefix_affinity on a skewed stream: more hits than least_tokens, no hotspot") {
  // 16 replicas, each caching the last 3 prefixes it served (LRU); 80% of
  // requests share one of 8 hot prefixes, the rest are unique. A routed
  // request queues its prefill work on its replica (a hit: only the uncached
  // tail); every replica drains a little per request. A replica's load is
  // the prefill work it was given.
  const auto run = [](routing_policy& p, double& hit_rate, double& max_over_mean) {
    auto r = cluster(16);
    std::vector<std::vector<int>> holds(16);
    std::vector<double> routed(16, 0.0);
    std::uint64_t x = 1;
    int hits = 0;
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      x = mix64(x);
      const int prefix = x % 10 < 8 ? static_cast<int>(x % 8) : 8 + i;
      route_request q;
      q.prompt_tokens = 512;
      q.prompt_blocks = 32;
      for (std::size_t k = 0; k < 16; ++k)
        r[k].cached_blocks = std::find(holds[k].begin(), holds[k].end(), prefix) != holds[k].end() ? 28 : 0;
      const auto k = p.route(view(r, q));
      REQUIRE(k != no_replica);
      const bool hit = r[k].cached_blocks > 0;
      hits += hit;
      const std::int64_t work = hit ? 64 : 512;
      r[k].prefill_tokens += work;
      routed[k] += static_cast<double>(work);
      auto& h = holds[k];
      h.erase(std::remove(h.begin(), h.end(), prefix), h.end());
      h.insert(h.begin(), prefix);
      if (h.size() > 3) h.pop_back();
      for (auto& y : r) y.prefill_tokens = std::max<std::int64_t>(0, y.prefill_tokens - 20);
    }
    double total = 0, most = 0;
    for (const double w : routed) total += w, most = std::max(most, w);
    hit_rate = static_cast<double>(hits) / n;
    max_over_mean = most / (total / 16);
  };
  prefix_affinity_routing affinity;
  least_tokens_routing least;
  double hit_a = 0, load_a = 0, hit_l = 0, load_l = 0;
  run(affinity, hit_a, load_a);
  run(least, hit_l, load_l);
  MESSAGE("prefix_affinity: hit rate " << hit_a << ", max/mean work " << load_a << "; least_tokens: hit rate "
                                       << hit_l << ", max/mean " << load_l);
  CHECK(hit_a > hit_l + 0.2);
  CHECK(load_a <= 1.5);
}
