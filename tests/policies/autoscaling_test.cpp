// The autoscaling policies on hand-built fleet views.

#include "policies/autoscaling/builtin.hpp"
#include "policies/registry.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

using namespace troupe::policy;

namespace {

auto fleet(std::int32_t serving, std::int32_t min = 1, std::int32_t max = 8) -> fleet_view {
  fleet_view v;
  v.serving = serving;
  v.min_replicas = min;
  v.max_replicas = max;
  return v;
}

} // namespace

TEST_CASE("every built-in is registered by name, with its target; an unknown name lists them") {
  CHECK(autoscaling_policy_names() == std::vector<std::string>{"queue_depth", "ttft_slo", "tokens_per_second"});
  for (const auto& n : autoscaling_policy_names()) {
    CHECK(make_autoscaling_policy(n)->name() == n);
    CHECK(make_autoscaling_policy(n, 3.0)->name() == n);
  }
  CHECK_THROWS_WITH_AS(make_autoscaling_policy("cpu"),
                       "unknown autoscaling policy 'cpu' (known: queue_depth, ttft_slo, tokens_per_second)",
                       std::invalid_argument);
}

TEST_CASE("queue_depth: enough replicas for the target requests each, within [min, max]") {
  queue_depth_autoscaling p(10);
  auto v = fleet(2);
  v.active_seqs = 35;
  v.queue_depth = 20;
  const auto d = p.decide(v);
  CHECK(d.desired == 6); // 55 / 10, up
  CHECK(d.reason == "requests per replica over target");
  v.active_seqs = 500;
  CHECK(p.decide(v).desired == 8); // max
  v.active_seqs = v.queue_depth = 0;
  CHECK(p.decide(v).desired == 1); // min
  CHECK(p.decide(v).reason == "requests per replica under target");
}

TEST_CASE("ttft_slo: over the objective adds replicas, well under it with no queue removes one") {
  ttft_slo_autoscaling p(0.5);
  auto v = fleet(3);
  v.ttft_p95_s = 0.6;
  CHECK(p.decide(v).desired == 4); // one more
  v.ttft_p95_s = 2.0;
  CHECK(p.decide(v).desired == 6); // far over: in proportion, up to twice
  v.ttft_p95_s = 0.1;
  v.queue_age_s = 0.9; // a queue waiting longer than the objective counts as over it: 3 x 0.9 / 0.5
  CHECK(p.decide(v).desired == 6);
  v.queue_age_s = 0;
  CHECK(p.decide(v).desired == 2); // well under, nothing queued
  v.queue_depth = 3;
  CHECK(p.decide(v).desired == 3); // well under, but a queue: hold
  v.ttft_p95_s = 0.3;
  v.queue_depth = 0;
  CHECK(p.decide(v).desired == 3); // within
  auto one = fleet(1);
  CHECK(p.decide(one).desired == 1); // never under min
  v.starting = 2; // replicas already starting: hold until they take traffic
  v.ttft_p95_s = 0.6;
  CHECK(p.decide(v).desired == 5);
  CHECK(p.decide(v).reason == "TTFT p95 over the objective, replicas starting");
}

TEST_CASE("tokens_per_second: the fleet's rate over each replica's share of capacity") {
  tokens_per_second_autoscaling p(1000, 0.5);
  auto v = fleet(1);
  v.tokens_per_s = 2600;
  CHECK(p.decide(v).desired == 6); // 2600 / 500, up
  v.tokens_per_s = 0;
  CHECK(p.decide(v).desired == 1);
  CHECK(clamp_replicas(fleet(1, 2, 5), 9.2) == 5);
  CHECK(clamp_replicas(fleet(1, 2, 5), 0.1) == 2);
  CHECK(clamp_replicas(fleet(1, 2, 5), 3.01) == 4);
}
