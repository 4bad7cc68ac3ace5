#include "policies/registry.hpp"
#include "policies/scheduling/fcfs.hpp"
#include "policies/scheduling/priority.hpp"
#include "policies/scheduling/sjf.hpp"
#include "policies/scheduling/static_batching.hpp"
#include "policies/scheduling/vtc.hpp"

#include <doctest/doctest.h>

using namespace troupe::policy;
using order = std::vector<std::size_t>;

namespace {

auto req(std::uint64_t id, std::uint64_t tenant, std::int32_t priority, double arrival, std::int32_t prompt,
         std::int32_t hint = -1) -> request_view {
  request_view r;
  r.id = id;
  r.tenant = tenant;
  r.priority = priority;
  r.arrival_s = arrival;
  r.num_prompt_tokens = prompt;
  r.max_tokens = 100;
  r.output_len_hint = hint;
  return r;
}

} // namespace

TEST_CASE("fcfs: arrival order; the newest running request gives way") {
  fcfs_scheduling p;
  std::vector<request_view> w{req(1, 0, 0, 1, 50), req(2, 0, 5, 2, 5)}, r{req(3, 0, 0, 0, 9), req(4, 0, 0, 0, 9)};
  CHECK(p.admission_order({10, w, r}) == order{0, 1});
  CHECK(p.preemption_victim({10, w, r}) == 1);
}

TEST_CASE("priority: highest first, aging lifts old requests, lowest effective priority is the victim") {
  priority_scheduling p(0.5); // half a point per second waited
  std::vector<request_view> w{req(1, 0, 0, 0, 10), req(2, 0, 3, 9, 10), req(3, 0, 3, 8, 10)};
  // At t=10: effective 5, 3.5, 4 -> the oldest low-priority one has aged past both.
  CHECK(p.admission_order({10, w, {}}) == order{0, 2, 1});
  // At t=2 (no aging yet to speak of): 1, 3 (future arrivals clamp to 0 wait) -> by priority, ties by position.
  CHECK(p.admission_order({2, w, {}}) == order{1, 2, 0});
  std::vector<request_view> r{req(4, 0, 2, 0, 1), req(5, 0, 1, 0, 1), req(6, 0, 1, 0, 1)};
  CHECK(p.preemption_victim({0, {}, r}) == 2); // lowest priority, the later of two
}

TEST_CASE("sjf: shortest prompt (or hint) first; most work left is the victim") {
  sjf_scheduling p;
  std::vector<request_view> w{req(1, 0, 0, 0, 300), req(2, 0, 0, 1, 20), req(3, 0, 0, 2, 500, 10), req(4, 0, 0, 3, 20)};
  CHECK(p.admission_order({0, w, {}}) == order{2, 1, 3, 0});
  std::vector<request_view> r{req(5, 0, 0, 0, 10), req(6, 0, 0, 0, 400), req(7, 0, 0, 0, 30)};
  CHECK(p.preemption_victim({0, {}, r}) == 1);
}

TEST_CASE("static: a batch forms only when nothing runs or the batch is still prefilling") {
  static_scheduling p;
  std::vector<request_view> w{req(1, 0, 0, 0, 10), req(2, 0, 0, 1, 10)};
  CHECK(p.admission_order({0, w, {}}) == order{0, 1});
  std::vector<request_view> forming{req(3, 0, 0, 0, 10)};
  CHECK(p.admission_order({0, w, forming}) == order{0, 1});
  forming[0].num_output_tokens = 1;
  CHECK(p.admission_order({0, w, forming}).empty());
}

TEST_CASE("vtc: the tenant served least goes first; new tenants are lifted; the heaviest gives way") {
  vtc_scheduling p(1.0, 2.0);
  // Tenant 1 has been served 100 tokens of output (counter 200), tenant 2 nothing.
  p.on_served(req(9, 1, 0, 0, 0), 0, 100);
  CHECK(p.counter(1) == 200);
  std::vector<request_view> w{req(1, 1, 0, 0, 10), req(2, 1, 0, 1, 10), req(3, 2, 0, 2, 150), req(4, 2, 0, 3, 100)};
  // Both tenants become active together: no lift (nobody was active before).
  // Tenant 2 (0) first; after its 150-token prompt (150) still below 200: its
  // second too (250); then tenant 1 (200), then 1 again (210).
  CHECK(p.admission_order({0, w, {}}) == order{2, 3, 0, 1});
  CHECK(p.counter(2) == 0);

  // Tenant 3 arrives while 1 and 2 are active: lifted to min(200, 0) = 0.
  p.on_served(req(3, 2, 0, 0, 150), 150, 0); // tenant 2 now at 150
  std::vector<request_view> w2{req(5, 3, 0, 4, 10), req(6, 1, 0, 5, 10)};
  std::vector<request_view> running{req(3, 2, 0, 2, 150)};
  CHECK(p.admission_order({0, w2, running}) == order{0, 1});
  CHECK(p.counter(3) == 150); // lifted to tenant 2's 150, the smallest active
  CHECK(p.preemption_victim({0, {}, std::vector<request_view>{req(7, 2, 0, 0, 1), req(8, 1, 0, 0, 1)}}) == 1);
}

TEST_CASE("vtc: a tenant of weight w is charged 1/w: twice the weight, twice the share") {
  vtc_scheduling p(1.0, 2.0);
  auto heavy = req(1, 1, 0, 0, 100);
  auto gold = req(2, 2, 0, 0, 100);
  gold.weight = 2.0;
  p.on_served(heavy, 100, 0);
  p.on_served(gold, 100, 0);
  CHECK(p.counter(1) == 100);
  CHECK(p.counter(2) == 50);
  // Both waiting with equal counters: the weight-2 tenant's projected
  // counter grows half as fast, so it gets two admissions for one.
  vtc_scheduling q(1.0, 2.0);
  std::vector<request_view> w;
  for (int i = 0; i < 3; ++i) w.push_back(req(10 + i, 1, 0, i, 100));
  for (int i = 0; i < 3; ++i) {
    auto g = req(20 + i, 2, 0, 3 + i, 100);
    g.weight = 2.0;
    w.push_back(g);
  }
  // Tenant 1: 0, 100, 200; tenant 2: 0, 50, 100 (ties: the earlier arrival).
  CHECK(q.admission_order({0, w, {}}) == order{0, 3, 4, 1, 5, 2});
}

TEST_CASE("registry: every built-in scheduling policy by name") {
  CHECK(scheduling_policy_names() == std::vector<std::string>{"fcfs", "priority", "sjf", "vtc", "static"});
  for (const auto& n : scheduling_policy_names()) CHECK(make_scheduling_policy(n)->name() == n);
  CHECK_THROWS_WITH_AS(make_scheduling_policy("lottery"),
                       "unknown scheduling policy 'lottery' (known: fcfs, priority, sjf, vtc, static)",
                       std::invalid_argument);
}
