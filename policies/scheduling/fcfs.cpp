#include "policies/scheduling/fcfs.hpp"

#include <numeric>

namespace troupe::policy {

auto fcfs_scheduling::admission_order(const schedule_view& v) -> std::vector<std::size_t> {
  std::vector<std::size_t> order(v.waiting.size());
  std::iota(order.begin(), order.end(), 0);
  return order;
}

auto fcfs_scheduling::preemption_victim(const schedule_view& v) -> std::size_t { return v.running.size() - 1; }

} // namespace troupe::policy
