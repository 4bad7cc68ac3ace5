#include "policies/scheduling/priority.hpp"

#include <algorithm>
#include <numeric>

namespace troupe::policy {

auto priority_scheduling::effective(const request_view& r, double now_s) const -> double {
  return r.priority + aging_per_s_ * std::max(0.0, now_s - r.arrival_s);
}

auto priority_scheduling::admission_order(const schedule_view& v) -> std::vector<std::size_t> {
  std::vector<std::size_t> order(v.waiting.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return effective(v.waiting[a], v.now_s) > effective(v.waiting[b], v.now_s);
  });
  return order;
}

auto priority_scheduling::preemption_victim(const schedule_view& v) -> std::size_t {
  std::size_t victim = 0;
  for (std::size_t i = 1; i < v.running.size(); ++i)
    if (effective(v.running[i], v.now_s) <= effective(v.running[victim], v.now_s)) victim = i;
  return victim;
}

} // namespace troupe::policy
