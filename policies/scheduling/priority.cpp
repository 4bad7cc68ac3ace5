#include "policies/scheduling/priority.hpp"

#include <algorithm>

namespace troupe::policy {

auto priority_scheduling::effective(const request_view& r, double now_s) const -> double {
  return r.priority + aging_per_s_ * std::max(0.0, now_s - r.arrival_s);
}

auto priority_scheduling::admission_order(const schedule_view& v) -> std::vector<std::size_t> {
  return order_by(v.waiting, [&](const request_view& r) { return -effective(r, v.now_s); });
}

auto priority_scheduling::preemption_victim(const schedule_view& v) -> std::size_t {
  std::size_t victim = 0;
  for (std::size_t i = 1; i < v.running.size(); ++i)
    if (effective(v.running[i], v.now_s) <= effective(v.running[victim], v.now_s)) victim = i;
  return victim;
}

} // namespace troupe::policy
