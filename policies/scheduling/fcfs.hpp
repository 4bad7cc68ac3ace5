#pragma once
#include "policies/api/scheduling.hpp"

namespace troupe::policy {

/// First come, first served; the most recently admitted request is preempted
/// first (vLLM's default).
class fcfs_scheduling final : public scheduling_policy {
public:
  auto name() const -> std::string_view override { return "fcfs"; }
  auto admission_order(const schedule_view& v) -> std::vector<std::size_t> override;
  auto preemption_victim(const schedule_view& v) -> std::size_t override;
  auto wants_service_reports() const -> bool override { return false; }
};

} // namespace troupe::policy
