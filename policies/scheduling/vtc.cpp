#include "policies/scheduling/vtc.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

namespace troupe::policy {

auto vtc_scheduling::counter(std::uint64_t tenant) const -> double {
  const auto it = counters_.find(tenant);
  return it == counters_.end() ? 0.0 : it->second;
}

void vtc_scheduling::lift_new_tenants(const schedule_view& v) {
  std::set<std::uint64_t> now;
  for (const auto& r : v.waiting) now.insert(r.tenant);
  for (const auto& r : v.running) now.insert(r.tenant);
  double floor = std::numeric_limits<double>::infinity();
  for (const auto t : now)
    if (active_.contains(t)) floor = std::min(floor, counter(t));
  if (floor != std::numeric_limits<double>::infinity())
    for (const auto t : now)
      if (!active_.contains(t)) counters_[t] = std::max(counter(t), floor);
  active_ = std::move(now);
}

auto vtc_scheduling::admission_order(const schedule_view& v) -> std::vector<std::size_t> {
  lift_new_tenants(v);
  // Each tenant's waiting requests in arrival order; then admit one at a
  // time from the tenant with the smallest counter, charging its prompt to a
  // projected counter, so that one step admitting several interleaves
  // tenants. Ties: the earlier head arrival. O(n log tenants).
  std::map<std::uint64_t, std::vector<std::size_t>> queues;
  for (std::size_t i = 0; i < v.waiting.size(); ++i) queues[v.waiting[i].tenant].push_back(i);
  using entry = std::tuple<double, std::size_t, std::uint64_t, std::size_t>; // counter, head, tenant, position
  std::priority_queue<entry, std::vector<entry>, std::greater<>> heap;
  for (const auto& [tenant, q] : queues) heap.emplace(counter(tenant), q.front(), tenant, 0);
  std::vector<std::size_t> order;
  order.reserve(v.waiting.size());
  while (!heap.empty()) {
    auto [c, head, tenant, pos] = heap.top();
    heap.pop();
    order.push_back(head);
    const auto& q = queues[tenant];
    if (++pos < q.size())
      heap.emplace(c + w_prompt_ * v.waiting[head].num_prompt_tokens / v.waiting[head].weight, q[pos], tenant, pos);
  }
  return order;
}

auto vtc_scheduling::preemption_victim(const schedule_view& v) -> std::size_t {
  std::size_t victim = v.running.size() - 1;
  for (std::size_t i = v.running.size(); i-- > 0;)
    if (counter(v.running[i].tenant) > counter(v.running[victim].tenant)) victim = i;
  return victim;
}

void vtc_scheduling::on_served(const request_view& r, std::int32_t num_prefill_tokens,
                               std::int32_t num_decode_tokens) {
  // A tenant of weight w is charged 1/w per token: w times the share.
  counters_[r.tenant] += (w_prompt_ * num_prefill_tokens + w_output_ * num_decode_tokens) / r.weight;
}

} // namespace troupe::policy
