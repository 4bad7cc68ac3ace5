#include "policies/scheduling/fcfs.hpp"


namespace troupe::policy {

auto fcfs_scheduling::admission_order(const schedule_view& v) -> std::vector<std::size_t> { return arrival_order(v); }

auto fcfs_scheduling::preemption_victim(const schedule_view& v) -> std::size_t { return v.running.size() - 1; }

} // namespace troupe::policy
